"""A real change, and whether the gate finds it and only it: the reference server as a deployed engine (the
built-in `reference-sglang` profile: TTFT 100 ms, ITL 5 ms, no load model, so every figure's true change has a
closed form), 64:16 at c=4 and c=8, 96 requests. The candidate has ITL raised 10 % (5.5 ms), or separately
TTFT raised 10 % (110 ms). Each repetition measures 3 runs a side (interleaved, each a new launch, fresh
prompts), then `tokenbench gate --repeat-until-decided --max-runs 6` measures more until every figure is
decided (at most 6 runs a side). A repetition succeeds when every figure the change moves by at least
--min-effect is found regressed and no other figure is called regressed or improved.

True changes at 64:16 (E2EL = TTFT + 15 x ITL, the same at c=4 and c=8: no load model, 8 run at once):
  ITL +10 %:  TPOT, ITL +10 %; E2EL +4.3 %; output and request throughput -4.1 %; TTFT 0
  TTFT +10 %: TTFT +10 %; E2EL +5.7 %; throughputs -5.4 %; TPOT, ITL 0

    .venv/bin/python bench/gate_reference.py [--repetitions 10] [--change itl|ttft|both] [--keep DIR]

A benchmark, not a test (tests/judge/test_gate_cli.py runs the same against the reference server, fewer).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tokenbench.cli.main import main
from tokenbench.store.db import Store

BASE = {"ttft-ms": 100.0, "itl-ms": 5.0}
CHANGES = {"itl": {"itl-ms": 5.5}, "ttft": {"ttft-ms": 110.0}}
OUT = 16
MOVED = {"itl": {"tpot", "itl", "e2el", "output_throughput", "request_throughput"},
         "ttft": {"ttft", "e2el", "output_throughput", "request_throughput"}}


def sweep(db: str, args: dict[str, float], seed: int) -> str:
    sets = [f"args.{k}={v:g}" for k, v in {**args, "itl-per-running-ms": 0, "prefill-ms-per-token": 0}.items()]
    code = main(["sweep", "--set", "target.profile=reference-sglang", "--set", f"target.set=[{', '.join(sets)}]",
                 "--pairs", f"64:{OUT}", "--concurrency", "4,8", "--num-prompts", "96", "--seed", str(seed),
                 "--db", db, "--disable-tqdm"])
    if code != 0:
        raise SystemExit(f"sweep exited {code}")
    return Store(db).runs()[-1].id


def repetition(change: str, n: int, folder: Path, min_effect: float) -> tuple[bool, dict]:
    db, out = str(folder / f"{change}-{n}.db"), folder / f"{change}-{n}.json"
    base, cand = [], []
    for k in range(3):                      # interleaved: a drift of the host falls on both sides
        base.append(sweep(db, BASE, 1000 * n + 10 * k))
        cand.append(sweep(db, {**BASE, **CHANGES[change]}, 1000 * n + 10 * k + 5))
    started = time.monotonic()
    code = main(["gate", "--db", db, "--baseline", ",".join(base), "--candidate", ",".join(cand),
                 "--repeat-until-decided", "--max-runs", "6", "--min-effect", f"{min_effect:g}",
                 "--allow-client-lag", "--json", str(out)])
    doc = json.loads(out.read_text())
    moved = [f for f in doc["figures"] if f["metric"] in MOVED[change]]
    missed = [f"{f['cell']} {f['figure']} ({f['verdict']})" for f in moved if f["verdict"] != "regressed"]
    wrong = [f"{f['cell']} {f['figure']} ({f['verdict']})" for f in doc["figures"]
             if f["verdict"] == "improved" or f["verdict"] == "regressed" and f["metric"] not in MOVED[change]]
    runs = (len(doc["baseline"]), len(doc["candidate"]))
    print(f"{change} #{n + 1}: exit {code}, looks {doc['look']}, runs {runs[0]}+{runs[1]}, "
          f"gate {time.monotonic() - started:.0f} s, moved {len(moved) - len(missed)}/{len(moved)} regressed, "
          f"others flagged {len(wrong)}; load average {os.getloadavg()[0]:.1f}", flush=True)
    for line in missed[:6] + wrong[:6]:
        print("   ", line)
    return not missed and not wrong, {"missed": missed, "wrong": wrong, "runs": runs, "look": doc["look"]}


def main_() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--change", choices=("itl", "ttft", "both"), default="both")
    ap.add_argument("--min-effect", type=float, default=0.02)
    ap.add_argument("--keep", default=None, help="keep the databases and gate JSON here")
    args = ap.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="tokenbench-gate-ref-"))
    folder.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TOKENBENCH_STATE", str(folder / "state"))
    failed = 0
    for change in ("itl", "ttft") if args.change == "both" else (args.change,):
        ok = sum(repetition(change, n, folder, args.min_effect)[0] for n in range(args.repetitions))
        print(f"{change} +10 %: found regressed in every figure it moves and no other in {ok} of "
              f"{args.repetitions} repetitions (target: at least 8 of 10)")
        failed += ok < 0.8 * args.repetitions
    print(f"databases and gate JSON in {folder}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main_())
