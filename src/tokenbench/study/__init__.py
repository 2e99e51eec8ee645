"""Studies: one or several server configurations x cells, relaunch and resume, as a library for the
CLI, the demo and `agree`. `run` orchestrates; `outputs` writes the result files."""
