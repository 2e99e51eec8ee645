"""A capacity search that one bad cell cannot sink: the reference server with a closed form (`--ttft-ms 20
--itl-ms 5 --prefill-ms-per-token 0.5`, 150:16 prompts, constant arrivals: one prompt's prefill takes 75 ms,
so the FIFO prefill saturates at 13.33 requests/s and `ttft:p99<=200` holds up to there), searched by
`tokenbench sweep --find-capacity rate` while the client is stopped (SIGSTOP) for 3 s once in each of its
first four cells, as a VM pause or a swap storm would. The answer must be 12.5-13.4 requests/s with an
interval holding 13.33, or say it could not decide because of the client; never a confident wrong number.

A timing target (real stops of the client, a real search of minutes), so a script, not a test
(tests/study/test_capacity_search.py drives the same search with stalled cells, in process):

    .venv/bin/python bench/capacity_stops.py [--stops 4] [--stop-s 3] [--seed 0] [--nice 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tokenbench.metrics.request import percentile
from tokenbench.testing import truth
from tokenbench.testing.disrupt import client_and_server_cpus, stop_when
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

TOKENBENCH = str(Path(sys.executable).with_name("tokenbench"))
CLOSED_FORM = 1000 / (150 * 0.5)            # requests/s: one prefill of 150 tokens at 0.5 ms each
DONE = re.compile(r"/rate=[\d.]+/s\S* (ok|failed|invalid)")


def search(url: str, folder: Path, seed: int, cpu: int | None) -> subprocess.Popen:
    argv = [TOKENBENCH, "sweep", "--base-url", url, "--pairs", "150:16", "--find-capacity",
            "rate", "--arrival", "constant", "--slo", "ttft:p99<=200", "--seed", str(seed), "--no-store",
            "--output", str(folder / "out.json")]
    if cpu is not None:
        argv += ["--client-cpus", str(cpu)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            env={**os.environ, "COLUMNS": "200"})


class CellStart:
    """Whether the client's cell k has run 1.5 s: k cells are done (their lines printed) and the server has
    seen a request since (the cell's warmup), 1.5 s ago."""

    def __init__(self, ref: ReferenceProcess, lines: list[str], k: int) -> None:
        self.ref, self.lines, self.k = ref, lines, k
        self.base: int | None = None
        self.at: float | None = None

    def __call__(self) -> bool:
        if sum(1 for line in self.lines if DONE.search(line)) < self.k:
            return False
        count = self.ref.arrivals()["count"]
        self.base = count if self.base is None else self.base
        if count > self.base and self.at is None:
            self.at = time.monotonic()
        return self.at is not None and time.monotonic() - self.at > 1.5


def stop_cells(ref: ReferenceProcess, proc: subprocess.Popen, lines: list[str], stops: int, stop_s: float) -> list:
    """Stop the client `stop_s` once in each of its first `stops` cells, 1.5 s into each."""
    out = []
    for k in range(stops):
        stop = stop_when(proc, CellStart(ref, lines, k), stop_s)
        if stop is None:
            break
        out.append(stop)
    return out


def server_side(cell: dict, log: list[dict]) -> str:
    """A cell's p99 TTFT as measured, and by the server's own writes (first write - the client's send, the
    requests received while the cell sent): a server starved by other work shows there, not as the client's."""
    sends = [r["sent_ns"] for r in cell["requests"] if r["phase"] == "measure"]
    mine = [r for r in log if min(sends) <= r["recv_ns"] <= max(sends) + 1_000_000_000]
    own = sorted(truth.samples(truth.measured(mine, len(sends), sends))["ttft"])
    s = cell["summary"]
    mark = (s.get("client_marks") or {}).get("p99_ttft_ms")
    server = f"{percentile(own, 99):.0f}" if own else "-"
    return (f"{cell['key']} #{cell['repeat'] + 1}: {s.get('p99_ttft_ms', 0):.0f}"
            f"{' ~' + mark['cause'] if mark else ''}; server {server}")


def main(args: argparse.Namespace) -> None:
    server_cpu, client_cpu = client_and_server_cpus()
    cfg = ReferenceConfig(ttft_ms=20, itl_ms=5, prefill_ms_per_token=0.5)
    with tempfile.TemporaryDirectory() as tmp, ReferenceProcess(cfg, cpu=server_cpu) as ref:
        if args.nice and ref.proc is not None:
            os.setpriority(os.PRIO_PROCESS, ref.proc.pid, -args.nice)     # as a local engine's, ahead of other work
        started = time.monotonic()
        proc = search(ref.url, Path(tmp), args.seed, client_cpu)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
        reader.start()
        stops = stop_cells(ref, proc, lines, args.stops, args.stop_s)
        proc.wait()
        reader.join()
        doc = json.loads((Path(tmp) / "out.json").read_text())
        log = ref.send_log()
    print("each cell as the client measured it and as the server's send log has it (p99 TTFT, ms):")
    for cell in doc["cells"]:
        print("  " + server_side(cell, log))
    [record] = doc.get("capacity") or [{}]
    print(f"{len(stops)} stops of {args.stop_s:g} s; search took {(time.monotonic() - started) / 60:.1f} min; "
          f"closed form {CLOSED_FORM:.2f} requests/s")
    for line in lines:
        if line.startswith(("capacity", "sustain")) or "capacity " in line or "sustain " in line:
            print("  " + line.rstrip())
    for a in record.get("answers", []):
        held = a["lo"] is not None and a["hi"] is not None and a["lo"] <= CLOSED_FORM <= a["hi"]
        good = a["capacity"] is not None and 12.5 <= a["capacity"] <= 13.4 and held
        print(f"  answer {a['capacity']} in [{a['lo']}, {a['hi']}], reason {a['reason']}, remeasured "
              f"{a.get('remeasured')}, client loads {a.get('client_loads')}: "
              f"{'as the closed form' if good else 'client named' if a['reason'] == 'client' else 'WRONG'}")
    for t in record.get("tried", []):
        print(f"    {t['role']:9s} {t['load']:g}/s #{t['repeat'] + 1} {t['status']} doubt={t.get('doubt')} "
              f"pass={[v['passes'] for v in t['verdicts']]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stops", type=int, default=4)
    parser.add_argument("--stop-s", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nice", type=int, default=5, help="lower the server's niceness by this much (root): other "
                        "work on a shared machine must not starve the server whose closed form is checked")
    main(parser.parse_args())
