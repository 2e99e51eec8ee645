"""`tokenbench tune` on the real llama.cpp engine (the built-in `cpu-smollm2-llamacpp` profile: SmolLM2-135M,
1 thread), timed end to end: slots x batch size (`--vary slots=1,2,4 --vary args.n_batch=16,2048`, the
default config as the baseline) under `ttft:p99<=T`, within a cell budget, the answer confirmed on a fresh
launch with a sustain cell `--sustain-s` long; then the recommended `deploy` command is started and stopped. With `--start-failure`, a second tune adds a config whose context is too large
for the host's memory (`--vary parallelism.ctx=4096,100000000`): it is kept with its cause (out of memory, read
from llama.cpp's log) and the tune goes on. Prints the time, the ranking and where the report is. A
benchmark, not a test.

    .venv/bin/python bench/tune_llamacpp.py [--ttft-ms 4000] [--budget 24] [--sustain-s 60] [--start-failure]
        [--db PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tokenbench.cli.main import main
from tokenbench.judge import tune as judged
from tokenbench.store.db import Store

PROFILE = "cpu-smollm2-llamacpp"


def tuning(db: str) -> tuple[str, judged.Tuning | None]:
    store = Store(db)
    run = store.runs()[-1]
    return run.id, judged.of_run(run.spec, store.configs(run.id), store.searches(run.id))


def timed(args: list[str]) -> tuple[int, float]:
    started = time.monotonic()
    code = main(args)
    return code, time.monotonic() - started


def ranking(t: judged.Tuning) -> None:
    for r in t.rankings:
        for s in r.standings:
            a = s.answer
            where = f"{a.capacity} [{a.lo}, {a.hi}] {a.reason}" if a is not None else (s.launch or s.note)
            died = "".join(f"; died on launch {d.launch} in {d.cell}: {d.failure.cause}" for d in s.deaths)
            print(f"  {r.tier.name}: {s.config}: {s.verdict}, {s.cells} cells, {where}{died}")
        if r.gain is not None:
            print(f"  {r.tier.name}: gain over {t.baseline}: {r.gain.value} in [{r.gain.lo}, {r.gain.hi}]")
    for c in t.confirmations:
        print(f"  confirmation of {c.config}: {c.outcome} ({c.load} streams for {c.duration_s} s)")


def tune(args: argparse.Namespace, db: str) -> int:
    code, elapsed = timed(["tune", PROFILE, "--vary", "slots=1,2,4", "--vary", "args.n_batch=16,2048",
                           "--baseline", "slots=4,n_batch=2048", "--input-len", "64", "--output-len", "16",
                           "--slo", f"ttft:p99<={args.ttft_ms:g}", "--capacity-max", "8", "--budget-cells",
                           str(args.budget), "--sustain-s", f"{args.sustain_s:g}", "--set", "requests.min=12",
                           "--allow-client-lag", "--db", db])
    run_id, t = tuning(db)
    cells = len(Store(db).cells(run_id)) - len(t.confirmations if t else [])      # the confirmations beside
    print(f"tune (6 configs, slots x n_batch): {elapsed / 60:.1f} min, {cells} cells of {args.budget}, exit {code}")
    if t is None or t.recommendation is None:
        return 1
    ranking(t)
    argv = t.recommendation.argv
    up, up_s = timed(argv[1:])
    main(["deploy", "down", PROFILE])
    print(f"recommended: {' '.join(argv)} -> started: {up == 0} ({up_s:.1f} s)")
    main(["report", run_id, "--db", db, "-o", str(Path(db).parent / "report")])
    return 0 if code == 0 and up == 0 and cells <= args.budget else 1


def start_failure(db: str) -> int:
    code, elapsed = timed(["tune", PROFILE, "--vary", "parallelism.ctx=4096,100000000", "--input-len", "64",
                           "--output-len", "16", "--slo", "ttft:p99<=60000", "--capacity-max", "1",
                           "--num-prompts", "4", "--no-confirm", "--allow-client-lag", "--db", db])
    _, t = tuning(db)
    failed = [s for s in t.rankings[0].standings if s.launch is not None] if t else []
    print(f"tune with a context too large for memory: {elapsed:.0f} s, exit {code}")
    for s in failed:
        print(f"  {s.config}: did not start: {s.launch.cause}: {s.launch.evidence}")   # type: ignore[union-attr]
    return 0 if code == 0 and failed and failed[0].launch and failed[0].launch.cause == "out_of_memory" else 1


def run(args: argparse.Namespace) -> int:
    db = args.db or str(Path(tempfile.mkdtemp(prefix="tokenbench-tune-")) / "results.db")
    code = tune(args, db)
    return code or (start_failure(db) if args.start_failure else 0)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ttft-ms", type=float, default=4000.0, help="the limit: ttft:p99<=T")
    p.add_argument("--budget", type=int, default=24, help="--budget-cells")
    p.add_argument("--sustain-s", type=float, default=60.0, help="the confirmation's sustain cell (--sustain-s)")
    p.add_argument("--start-failure", action="store_true", help="also a tune with a config that cannot start")
    p.add_argument("--db", default=None)
    sys.exit(run(p.parse_args()))
