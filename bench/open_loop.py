"""Open-loop acceptance against the reference server's arrival log (GET /arrivals): what the server saw of
`tokenbench bench --request-rate 20 --num-prompts 100`, with Poisson and constant arrivals, in one process
and with `--workers 2`. Prints a markdown table: the rate the cell asked, scheduled and states it sent,
the rate the server saw, and its gaps against the schedule's 50 ms (for constant arrivals: how many are
more than 5 ms off, and the worst). A timing target, so a script and not a test: run it on a quiet machine
(the tests judge the same runs against what the client measured, tests/load/test_open_loop.py).

    .venv/bin/python bench/open_loop.py [--rate 20] [--requests 100] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from tokenbench.cli.main import main
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

TOLERANCE_MS = 5.0


def one(ref: ReferenceProcess, folder: Path, args: argparse.Namespace, arrival: str, workers: int) -> list[str]:
    out, since = folder / f"{arrival}-{workers}.json", ref.arrivals()["count"]
    code = main(["bench", "--base-url", ref.url, "--input-len", "16", "--output-len", "4", "--request-rate",
                 str(args.rate), "--num-prompts", str(args.requests), "--warmup-requests", "0", "--arrival", arrival,
                 "--workers", str(workers), "--output", str(out), "--db", str(folder / "r.db")])
    s = json.loads(out.read_text())["cells"][0]["summary"]
    log = ref.arrivals(since)
    gap = 1e3 / args.rate
    off = [abs(g - gap) for g in log["gaps_ms"]]
    gaps = f"{sum(o > TOLERANCE_MS for o in off)} of {len(off)} off by > {TOLERANCE_MS:g} ms, worst {max(off):.2f} ms"
    return [arrival, str(workers), f"{s['send_rate_asked']:g}", f"{s['send_rate_scheduled']:.3f}",
            f"{s['send_rate_achieved']:.3f}", f"{log['rate_per_s']:.3f}", gaps if arrival == "constant" else "-",
            s.get("send_rate_off", "-"), "ok" if code == 0 else f"exit {code}"]


def run(args: argparse.Namespace) -> None:
    head = ["arrival", "workers", "asked /s", "scheduled /s", "sent /s (client)", "seen /s (server)",
            f"server gaps vs {1e3 / args.rate:g} ms", "off: why", "cell"]
    rows = []
    with tempfile.TemporaryDirectory() as folder, ReferenceProcess(ReferenceConfig(ttft_ms=10, itl_ms=5)) as ref:
        for arrival in ("poisson", "constant"):
            for workers in sorted({1, args.workers}):
                rows.append(one(ref, Path(folder), args, arrival, workers))
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    run(parser.parse_args())
