"""Report cost of an ordinary study-shaped run (issues 18 and 20): wall time of `report`, `compare` and
`export` of one stored sweep of configs x pairs x loads x repeats, written straight into a results
database through the Store API (no HTTP: only the view timings mean anything).

    PYTHONPATH=src .venv/bin/python bench/report_cost.py                       # 2 x 2 x 4 x 3, 1,000 each
    PYTHONPATH=src .venv/bin/python bench/report_cost.py --requests 200 --repeats 1
    PYTHONPATH=src .venv/bin/python bench/report_cost.py --keep DIR           # keep the database for profiling
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tokenbench.client.records import RequestRecord
from tokenbench.metrics.summary import summarize
from tokenbench.spec.bench import Load
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow

TB = [sys.executable, "-m", "tokenbench.cli.main"]
MS = 1_000_000


def _records(n: int, input_len: int, output_len: int, c: int, rng: random.Random) -> list[RequestRecord]:
    """A closed loop of concurrency c: TTFT and the token interval grow with c, lognormal noise."""
    out, t = [], 10**12
    tpot = 8 * MS * (1 + c / 16)
    for i in range(n):
        sent = t + (i // c) * int(output_len * tpot)
        first = sent + int(rng.lognormvariate(0, 0.3) * (20 * MS + input_len * 20_000) * (1 + c / 8))
        level = rng.lognormvariate(0, 0.1)
        times, now = [], first
        for _ in range(output_len):
            times.append(now)
            now += int(tpot * level * rng.lognormvariate(0, 0.2))
        out.append(RequestRecord(index=i, phase="measure", input_len=input_len, output_len=output_len,
                                 intended_ns=sent, sent_ns=sent, end_ns=times[-1] + 100_000, status=200,
                                 token_times_ns=times, token_counts=[1] * output_len, prompt_tokens=input_len,
                                 completion_tokens=output_len, usage_source="server", finish_reason="length",
                                 text=f"tokens of request {i}", count_source="usage", first_content_ns=first))
    return out


def build(db: Path, configs: int, pairs: list[tuple[int, int]], loads: list[int], repeats: int, n: int) -> str:
    store, rng = Store(db), random.Random(1)
    run_id = store.create_run("sweep", "synthetic", {"cells": [], "planned_cells": configs * len(pairs) * len(loads)
                                                      * repeats}, ["report_cost.py"], {})
    for k in range(configs):
        config = store.upsert_config(run_id, f"cfg{k}", status="done")
        for i, o in pairs:
            for c in loads:
                for rep in range(repeats):
                    recs = _records(n, i, o, c, rng)
                    summary = summarize(recs, Load(concurrency=c, num_prompts=n), i, o)
                    row = CellRow(key=f"{i}:{o}/c={c}", input_len=i, output_len=o, status="ok", summary=summary,
                                  repeat=rep, concurrency=c)
                    store.save_cell(run_id, config, row, recs)
    store.set_run_status(run_id, "done")
    return run_id


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall s, CPU s) of one child process (CPU: its own rusage, which a shared machine's load or a paused
    process does not inflate)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([*TB, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode()[-400:] if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{argv[0]} failed: {err}")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", type=int, default=2)
    ap.add_argument("--pairs", default="128:64,512:128")
    ap.add_argument("--loads", default="1,4,16,64")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--requests", type=int, default=1000, help="requests per cell")
    ap.add_argument("--keep", default=None, help="directory to keep the database in (reused when it has one)")
    a = ap.parse_args()
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="tb-rcost-"))
    work.mkdir(parents=True, exist_ok=True)
    db, env = work / "study.db", {**os.environ, "TOKENBENCH_RESULTS": str(work)}
    pairs = [tuple(int(x) for x in p.split(":")) for p in a.pairs.split(",")]
    loads = [int(x) for x in a.loads.split(",")]
    try:
        t0 = time.perf_counter()
        runs = Store(db).runs() if db.exists() else []
        run_id = runs[0].id if runs else build(db, a.configs, pairs, loads, a.repeats, a.requests)
        cells = a.configs * len(pairs) * len(loads) * a.repeats
        print(f"run {run_id}: {cells} cells of {a.requests} requests, written in {time.perf_counter() - t0:.1f} s",
              flush=True)
        for name, argv in (("report", ["report", run_id, "--db", str(db), "-o", str(work / "r")]),
                           ("compare", ["compare", f"{run_id}:cfg0", f"{run_id}:cfg1", "--db", str(db), "--quiet",
                                        "-o", str(work / "c")]),
                           ("export", ["export", run_id, "--db", str(db), "-o", str(work / "e.json")])):
            wall, cpu = timed(argv, env)
            print(f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
