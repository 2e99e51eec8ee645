"""The client's own cost (issue 46), side by side with a compiled client in one run. Prints three tables:

1. CPU per streamed chunk and timing error, tokenbench against the compiled client, at each concurrency,
   in alternating rounds (`--rounds`), each with the host's load when it ran, then the median ratio;
2. start-up: `tokenbench --help` and `tokenbench runs` (over a small results database made here), median
   wall and CPU of `--startup-runs` runs each, and the modules the root help imports;
3. `--workers N` against one process at one concurrency: the measured phase's CPU per chunk summed over
   the client processes (each worker's own CPU over its phase), the timing error of each, and the
   capacity that follows on N free cores: N x (one process's CPU per chunk / N processes' CPU per chunk).
   The whole process tree's CPU per chunk is shown beside it (it adds each worker's start-up).

The yardstick is a directory holding `bench-client.sh` (a compiled timing server, pinned to CPU 1, that logs
the real send time of every chunk, and a compiled streaming client, both built with `go build`), which
runs each client against the server and scores it against the send log; tokenbench runs from this
checkout (`--tokenbench`, default .venv/bin/tokenbench), pinned to CPU 0 (the worker rows: CPUs 0-1).

    .venv/bin/python bench/client_cost.py --yardstick DIR [--concurrency 64,1024,2048] [--rounds 3]
        [--workers 2 --workers-concurrency 2048] [--startup-runs 10] [--skip cost,startup,workers]

Figures and the machine they came from: docs/architecture.md ("The client's cost").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKENS_OUT = 256                      # the yardstick's output length (OSL)


def _wrapper(where: Path, name: str, tokenbench: str, extra: list[str], cpus: str | None) -> str:
    """A script the yardstick runs as `tokenbench`: this checkout's, with extra options (and CPUs)."""
    path = where / name
    pin = f"taskset -c {cpus} " if cpus else ""
    path.write_text(f'#!/bin/sh\nexec {pin}{tokenbench} "$@" {" ".join(extra)}\n')
    path.chmod(0o755)
    return str(path)


def _yardstick(ys: Path, concs: str, clients: str, tb: str, out: Path) -> list[dict]:
    """One run of the yardstick: each (client, concurrency) row of its summary (`out` holds its built
    programs, and each run's files until the next run)."""
    env = {**os.environ, "TB": tb, "OUT": str(out)}
    subprocess.run([str(ys / "bench-client.sh"), concs, clients], env=env, cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines() if line.strip()]


def _chunks(row: dict) -> int:
    return (row["reported"].get("completed") or 0) * -(-TOKENS_OUT // row["tpc"])


def _cpu_us(row: dict) -> float:
    t = row["time"]
    chunks = _chunks(row)
    return 1e6 * ((t.get("user_s") or 0) + (t.get("sys_s") or 0)) / chunks if chunks else float("nan")


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.1f}%"


def cost(ys: Path, tb: str, concs: list[int], rounds: int, work: Path) -> None:
    wrapped = _wrapper(work, "tb-one", tb, [], None)
    ratios: dict[int, list[float]] = {c: [] for c in concs}
    print("| round | load | C | client | TTFT err | TPOT err | CPU us/chunk | x compiled |")
    print("|---|---|---|---|---|---|---|---|")
    for r in range(1, rounds + 1):
        load = os.getloadavg()[0]
        rows = _yardstick(ys, " ".join(map(str, concs)), "goload tokenbench", wrapped, work / "yard")
        by = {(d["peer"], d["conc"]): d for d in rows}
        for c in concs:
            base = _cpu_us(by[("goload", c)])
            for peer in ("goload", "tokenbench"):
                d = by[(peer, c)]
                us = _cpu_us(d)
                if peer == "tokenbench":
                    ratios[c].append(us / base)
                print(f"| {r} | {load:.1f} | {c} | {peer} | {_pct(d['err_pct'].get('ttft_vs_truth'))} | "
                      f"{_pct(d['err_pct'].get('tpot_vs_truth'))} | {us:.1f} | "
                      f"{us / base:.2f} |")
    print()
    print("median CPU per chunk, tokenbench / compiled client: "
          + ", ".join(f"C={c}: {statistics.median(v):.2f}x" for c, v in ratios.items()))


def _timed(cmd: list[str], runs: int) -> tuple[float, float]:
    """Median wall and CPU (s) of `runs` runs of cmd, after one that is not counted."""
    walls, cpus = [], []
    for n in range(runs + 1):
        before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
        if n:
            walls.append(wall)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def startup(ys: Path, tb: str, runs: int, work: Path) -> None:
    db = work / "runs.db"
    _store_runs(ys, tb, db, work)
    print("| command | wall median | CPU median |")
    print("|---|---|---|")
    for args in (["--help"], ["runs", "--db", str(db)]):
        wall, cpu = _timed([tb, *args], runs)
        print(f"| tokenbench {' '.join(args[:1])} | {1e3 * wall:.0f} ms | {1e3 * cpu:.0f} ms |")
    probe = ("import sys, contextlib, io\nfrom tokenbench.cli.main import main\n"
             "with contextlib.redirect_stdout(io.StringIO()): main(['--help'])\nprint(len(sys.modules))")
    bare = subprocess.run([sys.executable, "-c", "import sys; print(len(sys.modules))"], capture_output=True,
                          text=True, check=True).stdout.strip()
    count = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    print(f"\nmodules loaded by the root help: {count} (the interpreter alone: {bare})")


def _store_runs(ys: Path, tb: str, db: Path, work: Path) -> None:
    """Three small stored runs against the yardstick's timing server, for `tokenbench runs` to list."""
    server = work / "yard" / "bin" / "oracle"
    if not server.exists():
        subprocess.run(["go", "build", "-o", str(server), "."], cwd=ys / "oracle", check=True,
                       stdout=subprocess.DEVNULL)
    port = 18290
    proc = subprocess.Popen([str(server), "--addr", f"127.0.0.1:{port}", "--ttft-ms", "5", "--itl-ms", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        for _ in range(3):
            subprocess.run([tb, "bench", "--base-url", f"http://127.0.0.1:{port}", "--model", "oracle",
                            "--vocab-size", "32000", "--input-len", "16", "--output-len", "8", "--concurrency", "2",
                            "--num-prompts", "4", "--db", str(db)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
    finally:
        proc.terminate()
        proc.wait()


def _phase_cpu_us(out: Path, conc: int, chunks: int) -> float:
    """The measured phase's CPU per chunk, summed over the client processes (client_cpu_percent is the
    sum of each process's CPU over the phase, in percent of one core, docs/metrics.md)."""
    doc = json.loads((out / f"tokenbench-c{conc}" / "tokenbench.json").read_text())
    s = doc["cells"][0]["summary"]
    return 1e6 * s["client_cpu_percent"] / 100 * s["duration"] / chunks


def workers(ys: Path, tb: str, n: int, conc: int, work: Path) -> None:
    print("| processes | TTFT err | TPOT err | phase CPU us/chunk | process tree CPU us/chunk |")
    print("|---|---|---|---|---|")
    phase = {}
    for w in (1, n):
        wrapped = _wrapper(work, f"tb-w{w}", tb, ["--workers", str(w)], "0,1")
        out = work / "yard"
        [row] = _yardstick(ys, str(conc), "tokenbench", wrapped, out)
        phase[w] = _phase_cpu_us(out, conc, _chunks(row))
        print(f"| {w} | {_pct(row['err_pct'].get('ttft_vs_truth'))} | {_pct(row['err_pct'].get('tpot_vs_truth'))} | "
              f"{phase[w]:.1f} | {_cpu_us(row):.1f} |")
    print(f"\ncapacity of {n} processes on {n} free cores: {n * phase[1] / phase[n]:.2f}x one process's chunks per "
          f"second (N x phase CPU per chunk of one / of N)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--yardstick", required=True, type=Path, help="the directory with bench-client.sh")
    ap.add_argument("--tokenbench", default=str(ROOT / ".venv" / "bin" / "tokenbench"))
    ap.add_argument("--concurrency", default="64,1024,2048")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--startup-runs", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--workers-concurrency", type=int, default=2048)
    ap.add_argument("--skip", default="", help="comma-separated: cost, startup, workers")
    a = ap.parse_args()
    skip = set(a.skip.split(",")) - {""}
    # what an installed tokenbench runs: its modules compiled (pip does it at install; a source checkout with
    # PYTHONDONTWRITEBYTECODE would otherwise compile every module at every start)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True, stdout=subprocess.DEVNULL)
    print(f"host: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, {_cpu_model()}\n")
    with tempfile.TemporaryDirectory(prefix="tokenbench-cost-") as tmp:
        work = Path(tmp)
        if "cost" not in skip:
            cost(a.yardstick, a.tokenbench, [int(c) for c in a.concurrency.split(",")], a.rounds, work)
            print()
        if "startup" not in skip:
            startup(a.yardstick, a.tokenbench, a.startup_runs, work)
            print()
        if "workers" not in skip:
            workers(a.yardstick, a.tokenbench, a.workers, a.workers_concurrency, work)
    return 0


def _cpu_model() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        return "CPU model unknown"


if __name__ == "__main__":
    sys.exit(main())
