"""Client scale (issue 8): error vs truth and client CPU at 1..2048 concurrent streams, one process and
N processes, against the reference server (50 tokens/s per stream: ITL 20 ms). Prints tables.

    .venv/bin/python bench/client_scale.py [--workers 2] [--tokens-per-chunk 1]
"""

import argparse
import sys

from tokenbench.cli.main import main

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="2")
    ap.add_argument("--tokens-per-chunk", default="1")
    ap.add_argument("--concurrency", default="1,64,256,1024,2048")
    a = ap.parse_args()
    code = 0
    for w in ("1", a.workers):
        code |= main(["calibrate", "--concurrency", a.concurrency, "--workers", w,
                      "--tokens-per-chunk", a.tokens_per_chunk, "--output-len", "50"])
    sys.exit(code)
