"""Agreement: tokenbench's figures held against an independent account of the same requests. `calibrate`
runs a cell against the reference server and compares it with the server's own send log; `agree` runs
another benchmark client (`vllm bench serve`, `sglang.bench_serving`, AISBench: `peers`, `aisbench`) and
tokenbench alternately on one workload, compares what each sent (`capture`), turns each difference into a
tokenbench arm (`variants`) and attributes each figure's difference to them (`explain`). Both run their
cells as studies (study/run.measure); only their commands (cli/agree.py, cli/calibrate.py) import them."""
