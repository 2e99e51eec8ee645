"""A real change, and whether the gate finds it and only it: the reference server as a deployed engine (the
built-in `reference-sglang` profile: TTFT 200 ms, ITL 10 ms, no load model, so every figure's true change has a
closed form), 64:16 at c=8, 192 requests. The candidate has ITL raised 10 % (11 ms), or separately TTFT
raised 10 % (220 ms). Each repetition measures 3 runs a side (interleaved, each a new launch, fresh
prompts), then `tokenbench gate --repeat-until-decided --max-runs 6` measures more until every figure is
decided (at most 6 runs a side). A repetition succeeds when every figure the change moves is found regressed
and no other figure is called regressed or improved. Two gates judge the same runs: every figure judged
(--allow-client-lag), and the default, where a run whose figure the client's own delays moved beyond its
tolerance (marked `~`, docs/metrics.md "Client health") is left out of that figure, and a figure moved so in
every run of a side is refused, not judged, and counted apart (on a busy host the p99 gaps are the client's,
not the server's). At the end, for each figure, in how many repetitions each gate found it regressed.

True changes at 64:16 (E2EL = TTFT + 15 x ITL at c=8: no load model, 8 run at once):
  ITL +10 %:  TPOT, ITL +10 %; E2EL +4.3 %; output and request throughput -4.1 %; TTFT 0
  TTFT +10 %: TTFT +10 %; E2EL +5.7 %; throughputs -5.4 %; TPOT, ITL 0

    .venv/bin/python bench/gate_reference.py [--repetitions 10] [--change itl|ttft|both|aa] [--keep DIR]

`--change aa` measures the baseline's config on both sides: where the gate has the power to call a few %,
how often it calls a figure that did not change.

A benchmark, not a test (tests/judge/test_gate_cli.py runs the same against the reference server, fewer).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from tokenbench.cli.main import main
from tokenbench.store.db import Store


def ids(db) -> set[str]:
    return {r.id for r in Store(db).runs()}


def added(db, before: set[str]) -> str:
    """The one run stored since `before` (ids(db) taken before the call): the call's own."""
    [new] = [r.id for r in Store(db).runs() if r.id not in before]
    return new


BASE = {"ttft-ms": 200.0, "itl-ms": 10.0}
CHANGES = {"itl": {"itl-ms": 11.0}, "ttft": {"ttft-ms": 220.0}, "aa": {}}
OUT = 16
MOVED = {"itl": {"tpot", "itl", "e2el", "output_throughput", "request_throughput"},
         "ttft": {"ttft", "e2el", "output_throughput", "request_throughput"}, "aa": set()}


def sweep(db: str, args: dict[str, float], seed: int) -> str:
    before = ids(db)
    sets = [f"args.{k}={v:g}" for k, v in {**args, "itl-per-running-ms": 0, "prefill-ms-per-token": 0}.items()]
    code = main(["sweep", "--set", "target.profile=reference-sglang", "--set", f"target.set=[{', '.join(sets)}]",
                 "--pairs", f"64:{OUT}", "--concurrency", "8", "--num-prompts", "192", "--seed", str(seed),
                 "--db", db, "--disable-tqdm"])
    if code != 0:
        raise SystemExit(f"sweep exited {code}")
    return added(db, before)


def verdicts(change: str, doc: dict) -> tuple[list[str], list[str], int]:
    """The moved figures judged and not regressed, the others called regressed or improved, and how many were
    refused because the client's own delays moved them."""
    lagged = sum(f["why"] == "moved" for f in doc["figures"])
    moved = [f for f in doc["figures"] if f["metric"] in MOVED[change] and f["why"] != "moved"]
    missed = [f"{f['cell']} {f['figure']} ({f['decision']})" for f in moved if f["decision"] != "regressed"]
    wrong = [f"{f['cell']} {f['figure']} ({f['decision']})" for f in doc["figures"]
             if f["decision"] == "improved" or f["decision"] == "regressed" and f["metric"] not in MOVED[change]]
    return missed, wrong, lagged


def repetition(change: str, n: int, folder: Path, min_effect: float) -> tuple[bool, bool, list[dict]]:
    """Three runs a side, then the sequential gate judging every figure (--allow-client-lag) up to 6 runs a
    side; then the default gate (a figure the client's delays moved is refused) on the same runs. Whether
    each found every moved figure it judged regressed and flagged nothing else."""
    db = str(folder / f"{change}-{n}.db")
    print(f"{change} #{n + 1}: load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    base, cand = [], []
    for k in range(3):                      # interleaved: a drift of the host falls on both sides
        base.append(sweep(db, BASE, 1000 * n + 10 * k))
        cand.append(sweep(db, {**BASE, **CHANGES[change]}, 1000 * n + 10 * k + 5))
    every, plain = folder / f"{change}-{n}.json", folder / f"{change}-{n}-default.json"
    main(["gate", "--db", db, "--baseline", ",".join(base), "--candidate", ",".join(cand), "--repeat-until-decided",
          "--max-runs", "6", "--min-effect", f"{min_effect:g}", "--allow-client-lag", "--json", str(every)])
    doc = json.loads(every.read_text())
    main(["gate", "--db", db, "--baseline", ",".join(doc["baseline"]), "--candidate", ",".join(doc["candidate"]),
          "--min-effect", f"{min_effect:g}", "--json", str(plain)])
    out, docs = [], [doc, json.loads(plain.read_text())]
    for name, d in zip(("every figure judged", "default (moved runs left out)"), docs, strict=True):
        missed, wrong, lagged = verdicts(change, d)
        judged = sum(f["metric"] in MOVED[change] and f["why"] != "moved" for f in d["figures"])
        left = sum(sum(f.get("left_out_moved") or (0, 0)) for f in d["figures"])
        print(f"{change} #{n + 1} {name}: {d['outcome']}, looks {doc['look']}, runs {len(d['baseline'])}+"
              f"{len(d['candidate'])}, moved {judged - len(missed)}/{judged} regressed, others flagged {len(wrong)}, "
              f"refused as moved by the client {lagged} (runs left out of a figure: {left}); load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        for line in missed[:8] + wrong[:8]:
            print("   ", line)
        out.append(not missed and not wrong)
    return out[0], out[1], docs


def main_() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--change", choices=("itl", "ttft", "both", "aa"), default="both",
                    help="aa: the candidate is the baseline's config (where the gate has power: its false alarms)")
    ap.add_argument("--min-effect", type=float, default=0.02)
    ap.add_argument("--keep", default=None, help="keep the databases and gate JSON here")
    args = ap.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="tokenbench-gate-ref-"))
    folder.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TOKENBENCH_STATE", str(folder / "state"))
    failed = 0
    for change in ("itl", "ttft") if args.change == "both" else (args.change,):
        results = [repetition(change, n, folder, args.min_effect) for n in range(args.repetitions)]
        every, plain = sum(r[0] for r in results), sum(r[1] for r in results)
        for k, name in enumerate(("every figure judged", "default")):
            tally: dict[str, list[str]] = {}
            for r in results:
                for f in r[2][k]["figures"]:
                    tally.setdefault(f["figure"], []).append(f["decision"])
            print(f"{change} {name}, per figure over {len(results)} repetitions: " + "; ".join(
                f"{key} {sum(v == 'regressed' for v in got)} regressed"
                + "".join(f", {sum(v == w for v in got)} {w}" for w in ("improved", "inconclusive", "refused")
                          if any(v == w for v in got)) for key, got in tally.items()))
        print(f"{change}{'' if change == 'aa' else ' +10 %'}: every moved figure regressed and no other flagged in {every} of {args.repetitions} "
              f"repetitions judging every figure, {plain} of {args.repetitions} refusing what the client's delays "
              f"moved (target: at least 8 of 10)")
        if change == "aa":
            docs = [json.loads(p.read_text()) for p in folder.glob("aa-*.json")]
            flags = sum(len(verdicts(change, d)[1]) for d in docs)
            print(f"A/A: {flags} of {sum(len(d['figures']) for d in docs)} figures called regressed or improved "
                  f"over {len(docs)} gates (alpha 5 % over each gate)")
        failed += every < 0.8 * args.repetitions
    print(f"databases and gate JSON in {folder}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main_())
