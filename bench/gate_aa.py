"""A/A on the real llama.cpp engine (the built-in `cpu-smollm2-llamacpp` profile): one config measured
RUNS times (64:32, c=1 and c=4, 24 requests, each run its own seed so no run hits what another left in the
prefix cache), the server relaunched every two runs (`deploy up` / `deploy down`); then
- the gate between SPLITS random halves (RUNS / 2 against RUNS / 2): how often it called a figure regressed
  or improved, per figure and per gate, against the false-alarm rate it states (--alpha over the gate);
- `compare` of every pair of single runs: how many of its verdicts name a faster side, against the 5 % its
  95 % intervals allow, and which noise it used (the floor learned from the database's other runs of the
  same target, config and cell, else the default);
- the between-run noise the runs show (relative standard deviation per figure): what the default floor of
  metrics/noise.py is set from.
The host's load average is printed beside each run: the machine is shared. A benchmark, not a test.

    .venv/bin/python bench/gate_aa.py [--runs 8] [--splits 40] [--db PATH]     # measure, then judge
    .venv/bin/python bench/gate_aa.py --db PATH --no-measure                    # judge runs measured before
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROFILE = "cpu-smollm2-llamacpp"
BENCH = ["--input-len", "64", "--output-len", "32", "--concurrency", "1,4", "--num-prompts", "24"]
TOKENBENCH = str(Path(sys.executable).with_name("tokenbench"))


def _tb(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run([TOKENBENCH, *args], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"tokenbench {' '.join(args[:3])} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done.stdout


def measure(db: str, runs: int, per_launch: int, first_seed: int) -> None:
    """`runs` bench runs of one config into `db`, the server relaunched every `per_launch` runs."""
    env = {**os.environ, "TOKENBENCH_STATE": str(Path(db).parent / "state")}
    for n in range(runs):
        if n % per_launch == 0:
            url = _tb(["deploy", "up", PROFILE], env).strip().splitlines()[-1]
        before = os.getloadavg()[0]
        started = time.monotonic()
        _tb(["bench", "--base-url", url, *BENCH, "--seed", str(first_seed + 100 * n), "--db", db,
             "--disable-tqdm"], env)
        print(f"run {n + 1}/{runs}: launch {n // per_launch + 1}, {time.monotonic() - started:.0f} s, "
              f"load average {before:.2f} -> {os.getloadavg()[0]:.2f}", flush=True)
        if n % per_launch == per_launch - 1 or n == runs - 1:
            _tb(["deploy", "down", PROFILE], env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--per-launch", type=int, default=2)
    ap.add_argument("--splits", type=int, default=40)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--db", default=None)
    ap.add_argument("--no-measure", action="store_true", help="judge the runs already in --db")
    args = ap.parse_args()
    db = args.db or str(Path(tempfile.mkdtemp(prefix="tokenbench-aa-")) / "results.db")
    if not args.no_measure:
        measure(db, args.runs, args.per_launch, args.seed)
    print(f"runs in {db}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
