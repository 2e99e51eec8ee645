"""A capacity search on the real llama.cpp engine (the built-in `cpu-smollm2-llamacpp` profile: SmolLM2-135M,
4 slots, 1 thread), with its sustain cell, timed end to end (deploy included), then its report. The target:
under 15 minutes on a 2-core machine, with the TTFT limit chosen so the boundary lies inside 1-8 streams
(past the 4 slots a request waits for one to free, so TTFT jumps there). Prints the time, the answer and
where the report is. A benchmark, not a test.

    .venv/bin/python bench/capacity_llamacpp.py [--ttft-ms 3000] [--sustain-s 90] [--db PATH] [-o DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tokenbench.cli.main import main
from tokenbench.store.db import Store


def run(args: argparse.Namespace) -> int:
    db = args.db or str(Path(tempfile.mkdtemp(prefix="tokenbench-capacity-")) / "results.db")
    started = time.monotonic()
    code = main(["sweep", "--set", "target.profile=cpu-smollm2-llamacpp", "--pairs", args.pairs, "--find-capacity",
                 "--slo", f"ttft:p99<={args.ttft_ms:g}", "--capacity-max", "8", "--capacity-budget", str(args.budget),
                 "--sustain-s", str(args.sustain_s), "--set", "requests.min=12", "--allow-client-lag", "--db", db])
    elapsed = time.monotonic() - started
    store = Store(db)
    run_id = store.runs()[-1].id
    [search] = store.searches(run_id)
    a = search.record.answers[0]
    print(f"capacity search + sustain: {elapsed / 60:.1f} min (target: under 15), exit {code}")
    print(f"answer: {a.capacity} streams, boundary in [{a.lo}, {a.hi}], {a.reason}, "
          f"{len(search.record.tried)} cells; binding {a.binding.limit.text if a.binding else '-'}")
    out = args.out or str(Path(db).parent / "report")
    main(["report", run_id, "--db", db, "-o", out])
    return 0 if code == 0 and elapsed < 15 * 60 else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ttft-ms", type=float, default=3000.0, help="the limit: ttft:p99<=T")
    p.add_argument("--pairs", default="64:32")
    p.add_argument("--budget", type=int, default=10)
    p.add_argument("--sustain-s", type=float, default=90.0)
    p.add_argument("--db", default=None)
    p.add_argument("-o", "--out", default=None)
    sys.exit(run(p.parse_args()))
