"""Marks from evidence, against the reference server's send log (testing/truth.py): the client run as users
run it (`tokenbench bench` in a process of its own, on the last CPU, the server and any proxy on the first)
under what the field does to it, and every figure it published judged: clean (within its tolerance of the
server's writes), clean and wrong, marked with a bound that covers its error, or marked short of it.

Scenarios (`--scenario`, repeatable; default all but capacity):
- chunks:     the server writes 2, 3, 4 and 8 chunks per write, no proxy
- proxy:      a proxy in front flushes every 50, 100 and 200 ms
- proxy-busy: the same with a busy loop on the client's core
- sigstop:    an open-loop cell (8/s) whose client is stopped 0.9 s four times
- constant:   `--arrival constant --request-rate 20` with 80-150 ms client stops now and then
- ramp:       ITL ramping from 8 to 24 ms across a 40 s cell: every timeslice against the send log
- quiet:      64 streams, nothing disturbed (TTFT within 5 ms of the send log, TPOT within 0.1 %)

A timing target (the stops and the busy loop are real), so a script, not a test:

    .venv/bin/python bench/evidence.py [--scenario proxy] [--repeat 3] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.testing import truth
from tokenbench.testing.disrupt import Pattern, Stopper, busy, client_and_server_cpus
from tokenbench.testing.process import ProxyProcess
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

TOKENBENCH = str(Path(sys.executable).with_name("tokenbench"))
BASE = ReferenceConfig(ttft_ms=110, itl_ms=20)


@dataclass
class Cell:
    """One client run: its summary, the send log of its measured requests, its console output, stops."""

    summary: CellSummary
    log: list[dict]
    console: str
    stops: list[tuple[int, int]] = field(default_factory=list)
    doc: dict = field(default_factory=dict)


def bench(url: str, folder: Path, load: list[str], lengths: tuple[int, int] = (16, 64), cpu: int | None = None,
          extra: list[str] | None = None) -> subprocess.Popen:
    argv = [TOKENBENCH, "bench", "--base-url", url, "--input-len", str(lengths[0]), "--output-len", str(lengths[1]),
            *load, "--no-store", "--output", str(folder / "out.json"), *(extra or [])]
    if cpu is not None:
        argv += ["--client-cpus", str(cpu)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "COLUMNS": "200"})


def run_cell(ref: ReferenceProcess, url: str, load: list[str], pattern: Pattern | None = None,
             hog: bool = False, **kw) -> Cell:
    server_cpu, client_cpu = client_and_server_cpus()
    with tempfile.TemporaryDirectory() as tmp, (busy(client_cpu) if hog and client_cpu is not None else nullcontext()):
        folder = Path(tmp)
        since = ref.arrivals()["count"]
        proc = bench(url, folder, load, cpu=client_cpu, **kw)
        stopper = None
        if pattern is not None:
            _wait_measured(ref, since, proc)
            stopper = Stopper(proc.pid, pattern).start()
        console, _ = proc.communicate()
        stops = stopper.stop() if stopper else []
        if not (folder / "out.json").exists():
            raise SystemExit(f"the client wrote no result (exit {proc.returncode}):\n{console[-3000:]}")
        doc = json.loads((folder / "out.json").read_text())
    cell = doc["cells"][0]
    summary = CellSummary.from_dict(cell["summary"])
    sends = [r["sent_ns"] for r in cell["requests"] if r["phase"] == "measure"]
    log = truth.measured(_log(ref), len(sends), sends)
    return Cell(summary, log, console, stops, doc)


def _log(ref: ReferenceProcess) -> list[dict]:
    """The send log once it holds every request the server received (it is written a line per loop turn)."""
    want = ref.arrivals()["count"]
    for _ in range(100):
        log = ref.send_log()
        if len(log) >= want:
            return log
        time.sleep(0.05)
    return ref.send_log()


def _wait_measured(ref: ReferenceProcess, since: int, proc: subprocess.Popen) -> None:
    """Until the server saw the warmup and the first measured request (the default warmup: 1 request)."""
    while ref.arrivals(since)["count"] - since < 2 and proc.poll() is None:
        time.sleep(0.02)


def report(name: str, cell: Cell, verbose: bool) -> dict:
    judged = truth.judge(cell.summary, cell.log)
    verdicts = Counter(j.verdict for j in judged)
    causes = Counter(m.cause for m in ((cell.summary.figures.client_marks if cell.summary.figures else None) or {}).values())
    print(f"## {name}: {dict(verdicts)}; marks by cause {dict(causes)}; stops {len(cell.stops)}")
    for j in judged:
        if verbose or j.verdict in ("clean_wrong", "uncovered"):
            print("   " + j.line())
    return {"verdicts": dict(verdicts), "causes": dict(causes)}


def chunks(args) -> None:
    for k in (2, 3, 4, 8):
        with ReferenceProcess(_cfg(chunks_per_write=k), cpu=client_and_server_cpus()[0]) as ref:
            for r in range(args.repeat):
                report(f"chunks per write {k} #{r}", run_cell(ref, ref.url, ["--concurrency", "8", "--num-prompts", "32"]),
                       args.verbose)


def _cfg(**kw) -> ReferenceConfig:
    from dataclasses import replace
    return replace(BASE, **kw)


def proxy(args, hog: bool = False) -> None:
    server_cpu = client_and_server_cpus()[0]
    for period in (50, 100, 200):
        with ReferenceProcess(BASE, cpu=server_cpu) as ref, ProxyProcess(ref.url, period, cpu=server_cpu) as px:
            for r in range(args.repeat):
                cell = run_cell(ref, px.url, ["--concurrency", "8", "--num-prompts", "32"], hog=hog)
                report(f"proxy flushing every {period} ms{' + busy client core' if hog else ''} #{r}", cell,
                       args.verbose)


def sigstop(args) -> None:
    pattern = Pattern(stop_s=0.9, every_s=2.5, first_s=1.0, count=4)
    with ReferenceProcess(BASE, cpu=client_and_server_cpus()[0]) as ref:
        for r in range(args.repeat):
            cell = run_cell(ref, ref.url, ["--request-rate", "8", "--num-prompts", "96"], pattern)
            report(f"SIGSTOP 0.9 s x4, open loop 8/s #{r}", cell, args.verbose)


def constant(args) -> None:
    pattern = Pattern(stop_s=0.08, stop_max_s=0.15, every_s=0.6, every_max_s=1.4, first_s=0.5, seed=1)
    with ReferenceProcess(_cfg(ttft_ms=20, itl_ms=5), cpu=client_and_server_cpus()[0]) as ref:
        for r in range(args.repeat):
            since = ref.arrivals()["count"]
            cell = run_cell(ref, ref.url, ["--request-rate", "20", "--arrival", "constant", "--num-prompts", "200"],
                            pattern)
            gaps = ref.arrivals(since + 1)["gaps_ms"]
            print(f"## constant 20/s with 80-150 ms stops #{r}: server gaps max {max(gaps):.0f} ms; stops {len(cell.stops)}")
            send = {k: v for k, v in cell.doc["cells"][0]["summary"].items() if k.startswith("send_")}
            print("   JSON: " + json.dumps(send))
            print("   console: " + " | ".join(line.strip() for line in cell.console.splitlines() if "sent" in line))


def ramp(args) -> None:
    width = 5.0
    cfg = _cfg(ttft_ms=50, itl_ms=8, itl_end_ms=24, ramp_s=40, faults={"slow_end": 1.0}, slow_end_s=0.2)
    with ReferenceProcess(cfg, cpu=client_and_server_cpus()[0]) as ref:
        cell = run_cell(ref, ref.url, ["--concurrency", "4", "--duration", "40", "--timeslice-s", str(width)])
    s = cell.summary.slices
    t = truth.slice_figures(cell.log, s.t0_ns, s.width_s, len(s), s.span_s)
    print("## ITL ramp 8 -> 24 ms: slice, (client, server) ttft_mean_ms, tpot_mean_ms, output_tps")
    for k in range(len(s)):
        row = [(getattr(s, f)[k], t[f][k]) for f in ("ttft_mean_ms", "tpot_mean_ms", "output_tps")]
        print(f"   {k}: " + "  ".join(f"{a if a is None else round(a, 2)} vs {b if b is None else round(b, 2)}"
                                       for a, b in row))


def quiet(args) -> None:
    with ReferenceProcess(BASE, cpu=client_and_server_cpus()[0]) as ref:
        for r in range(args.repeat):
            cell = run_cell(ref, ref.url, ["--concurrency", "64", "--num-prompts", "256"], lengths=(32, 50))
            f = truth.figures(cell.log)
            s = cell.summary
            print(f"## quiet, 64 streams #{r}: TTFT {s.mean_ttft_ms - f['mean_ttft_ms']:+.2f} ms, "
                  f"TPOT {100 * (s.mean_tpot_ms / f['mean_tpot_ms'] - 1):+.3f} %")
            report("   figures", cell, args.verbose)


SCENARIOS = {"chunks": chunks, "proxy": proxy, "proxy-busy": lambda a: proxy(a, hog=True), "sigstop": sigstop,
             "constant": constant, "ramp": ramp, "quiet": quiet}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--verbose", action="store_true")
    a = parser.parse_args()
    with ExitStack():
        for name in a.scenario or list(SCENARIOS):
            SCENARIOS[name](a)
