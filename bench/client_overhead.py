"""Client error against ground truth (issue 2): tokenbench's TTFT/TPOT vs the reference server's send
log at concurrency 1, 64, 256, 1024. A benchmark that prints a table, not a test.

    .venv/bin/python bench/client_overhead.py [--concurrency 1,64,256,1024]
"""

import sys

from tokenbench.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["calibrate", "--concurrency", "1,64,256,1024", *sys.argv[1:]]))
