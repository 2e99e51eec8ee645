"""Other benchmark clients' command lines in tokenbench's terms: the meaning of vLLM's and SGLang's
`bench` flags that `tokenbench bench` accepts under their own spellings (`serve`), and `tokenbench
translate` for whole command lines of `vllm bench serve`, SGLang's bench_serving, AIPerf and GuideLLM
(`translate`). Pure: no I/O, no measuring (docs/peers.md)."""
