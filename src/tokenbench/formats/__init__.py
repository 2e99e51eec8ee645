"""Other tools' formats in both directions: results of vLLM, SGLang, AISBench and published CSV imported as
runs, and stored runs exported as JSON/CSV rows."""
