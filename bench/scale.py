"""Scale (issue 20): client peak RSS, DB bytes per request, CPU per chunk and report/compare/export time
as the number of requests grows. Prints one markdown table.

Real rows run `tokenbench bench` (one client process, closed loop) against the shipped reference server
in its own process; peak RSS and CPU come from the client process's own rusage (wait4), CPU per chunk
from the measured phase only (client_cpu_percent x duration / chunks, one token per chunk). Synthetic
rows (`--synthetic`) write a cell of N plausible records straight into a results database, without any
HTTP, for sizes a run cannot reach on a small machine; only their DB and report columns mean anything.

    .venv/bin/python bench/scale.py --real 10000,100000 --synthetic 1000000
    .venv/bin/python bench/scale.py --real 5000,40000     # the bounded-memory acceptance pair
    .venv/bin/python bench/scale.py --soak 600 --rate 50   # a --duration cell past any prepared cap
    .venv/bin/python bench/scale.py --real 1000000 --base-url http://127.0.0.1:PORT --model M --vocab-size V
                                                           # against a faster (compiled) server already running
    .venv/bin/python bench/scale.py --real 5000,40000 --oracle PATH/TO/oracle --busy --no-views
        # issue 39's pair: a compiled timing server (any OpenAI-compatible one taking --addr, --ttft-ms,
        # --itl-ms; built from its Go source with `go build`) pinned on CPU 1, the client on CPU 0, and with
        # --busy a busy loop pinned on the client's CPU too; prints the peak RSS ratio of the last row to the first
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

from tokenbench.client.records import RequestRecord
from tokenbench.metrics.summary import summarize
from tokenbench.spec.bench import Load
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

TB = [sys.executable, "-m", "tokenbench.cli.main"]
SUMMARY_SAMPLE = 20_000          # synthetic cells: the summary is computed from this many records
WRITE_MAX = 50_000               # synthetic cells: rows written through the store; the rest are copies


def _run(argv: list[str], env: dict) -> tuple[float, int, float]:
    """(wall s, peak RSS bytes, CPU s) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()[-400:] if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(argv[:6])} ... failed: {err}")
    return wall, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def _db_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def _views(db: Path, run_id: str, other: str, env: dict, out: Path) -> dict:
    """Wall time, peak RSS and CPU time of report, compare and export of one stored run."""
    got = {}
    for name, argv in (("report", ["report", run_id, "--db", str(db), "-o", str(out / "r")]),
                       ("compare", ["compare", run_id, other, "--db", str(db), "-o", str(out / "c")]),
                       ("export", ["export", run_id, "--db", str(db), "-o", str(out / "e.json")])):
        got[name] = _run([*TB, *argv], env)
    return got


def _server(itl_ms: float, base_url: str | None, oracle: str | None = None):
    """The shipped reference server in its own process, a compiled one (`oracle`) pinned on CPU 1, or the
    server already at `base_url`."""
    if oracle:
        return _oracle(oracle, itl_ms)
    if base_url:
        return contextlib.nullcontext(SimpleNamespace(url=base_url))
    return ReferenceProcess(ReferenceConfig(ttft_ms=0, itl_ms=itl_ms))


@contextlib.contextmanager
def _oracle(path: str, itl_ms: float) -> Iterator[SimpleNamespace]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["taskset", "-c", "1", path, "--addr", f"127.0.0.1:{port}", "--ttft-ms", "100",
                             "--itl-ms", str(itl_ms)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield SimpleNamespace(url=f"http://127.0.0.1:{port}")
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def _busy(on: bool) -> Iterator[None]:
    """A busy loop pinned on the client's CPU (0), for the run's length."""
    proc = subprocess.Popen(["taskset", "-c", "0", "sh", "-c", "while :; do :; done"]) if on else None
    try:
        yield
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


def real_row(n: int, db: Path, env: dict, a: argparse.Namespace, target: list[str]) -> dict:
    """n requests through `tokenbench bench` at --streams concurrency (the options `a` of this script)."""
    pin = ["taskset", "-c", "0"] if a.oracle else []
    with _server(a.itl_ms, a.base_url, a.oracle) as ref, _busy(a.busy):
        before = _db_bytes(db)
        wall, rss, _ = _run([*pin, *TB, "bench", "--base-url", ref.url, *target, "--input-len", "32", "--output-len",
                             str(a.output_len), "--concurrency", str(a.streams), "--num-prompts", str(n),
                             "--warmup-requests", "0", "--db", str(db), "--allow-length-mismatch",
                             "--max-error-rate", "1", "--allow-client-lag"], env)
    store = Store(db)
    run_id = store.runs()[0].id
    s = store.cells(run_id)[0].summary.to_dict()
    chunks = s.get("total_output_tokens") or 1
    cpu_s = (s.get("client_cpu_percent") or 0) / 100 * (s.get("duration") or 0)
    return {"kind": "real", "n": n, "run": run_id, "rss": rss, "bench_s": wall,
            "db_per_req": (_db_bytes(db) - before) / n, "us_per_chunk": cpu_s / chunks * 1e6,
            "failed": s.get("failed"), "lag_p99": s.get("loop_lag_p99_ms")}


def soak_row(seconds: float, rate: float, db: Path, env: dict, output_len: int, itl_ms: float) -> str:
    """One open-loop `--duration` cell: requests sent, measured span, peak RSS (the cell must send for
    the whole duration, however many requests that takes)."""
    with ReferenceProcess(ReferenceConfig(ttft_ms=0, itl_ms=itl_ms)) as ref:
        wall, rss, _ = _run([*TB, "bench", "--base-url", ref.url, "--input-len", "32", "--output-len",
                             str(output_len), "--request-rate", str(rate), "--duration", str(seconds),
                             "--warmup-requests", "0", "--db", str(db), "--allow-length-mismatch",
                             "--max-error-rate", "1"], env)
    store = Store(db)
    s = store.cells(store.runs()[0].id)[0].summary.to_dict()
    return (f"soak {seconds:g} s at {rate:g}/s: {s['num_prompts']:,} requests sent ({s['failed']} failed), "
            f"duration {s['duration']:.1f} s, last send lateness p99 {s.get('p99_queue_ms', 0):.1f} ms, "
            f"prepared_exhausted_s={s.get('prepared_exhausted_s')}, peak RSS {rss / 2**20:.0f} MB, wall {wall:.0f} s")


def _records(n: int, output_len: int, seed: int) -> Iterator[RequestRecord]:
    rng = random.Random(seed)
    t = 10**12
    for i in range(n):
        sent = t + i * 1_000_000
        first = sent + rng.randint(20_000_000, 40_000_000)
        times = [first + k * rng.randint(9_000_000, 11_000_000) for k in range(output_len)]
        yield RequestRecord(index=i, phase="measure", input_len=32, output_len=output_len, intended_ns=sent,
                            sent_ns=sent, end_ns=times[-1] + 100_000, status=200, token_times_ns=times,
                            token_counts=[1] * output_len, prompt_tokens=32, completion_tokens=output_len,
                            usage_source="server", finish_reason="length", text="x" * output_len,
                            count_source="usage", first_content_ns=first)


def _copy_rows(store: Store, cell_id: int, written: int, n: int) -> None:
    """Fill the cell up to n rows by copying the written ones at later indices and times (inside SQLite:
    a million Python-built rows take too long on a small machine), then redo the reservoir."""
    if n <= written:
        return
    cols = [r[1] for r in store.db.execute("PRAGMA table_info(requests)")]
    shifted = {"idx": "idx + :k", "intended_ns": "intended_ns + :dt", "sent_ns": "sent_ns + :dt",
               "end_ns": "end_ns + :dt", "sampled": "0"}
    select = ", ".join(shifted.get(c, c) for c in cols)
    db = store.db
    db.execute("BEGIN IMMEDIATE")
    for k in range(written, n, written):
        db.execute(f"INSERT INTO requests ({', '.join(cols)}) SELECT {select} FROM requests"
                   " WHERE cell_id = :c AND phase = 'measure' AND idx < :m",
                   {"k": k, "dt": k * 1_000_000, "c": cell_id, "m": min(written, n - k)})
    db.execute("UPDATE requests SET sampled = 0 WHERE cell_id = ?", (cell_id,))
    store._mark_reservoir(cell_id)
    db.execute("COMMIT")


def synthetic_row(n: int, db: Path, output_len: int, streams: int) -> dict:
    load = Load(concurrency=streams, num_prompts=n)
    sample = summarize(list(_records(min(n, SUMMARY_SAMPLE), output_len, n)), load, 32, output_len)
    summary = sample.model_copy(update={"num_prompts": n, "completed": n})   # figures of the sample; the run's
    store = Store(db)                                                          # target says "synthetic"
    before = _db_bytes(db)
    t0 = time.perf_counter()
    run_id = store.create_run("bench", "synthetic", {"cells": [], "planned_cells": 1}, ["scale.py"], {})
    config = store.upsert_config(run_id, "target", status="done")
    cell = CellRow(key=f"32:{output_len}/c={streams}", input_len=32, output_len=output_len, status="ok",
                   summary=summary, concurrency=streams)
    cell_id = store.save_cell(run_id, config, cell, _records(min(n, WRITE_MAX), output_len, n))
    _copy_rows(store, cell_id, min(n, WRITE_MAX), n)
    store.set_run_status(run_id, "done")
    return {"kind": "synthetic", "n": n, "run": run_id, "write_s": time.perf_counter() - t0,
            "db_per_req": (_db_bytes(db) - before) / n}


def _fmt(row: dict) -> str:
    mb = 1 << 20

    def v(key: str, fmt: str) -> str:
        return format(row[key], fmt) if row.get(key) is not None else "-"
    views = row.get("views", {})
    cols = [row["kind"], f"{row['n']:,}", f"{row['rss'] / mb:.0f}" if "rss" in row else "-", v("db_per_req", ".0f"),
            v("us_per_chunk", ".1f"), v("lag_p99", ".1f"),
            *(f"{views[k][0]:.2f} s ({views[k][2]:.2f} s CPU) / {views[k][1] / mb:.0f} MB" if k in views else "-"
              for k in ("report", "compare", "export"))]
    return "| " + " | ".join(cols) + " |"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", default="10000", help="request counts run for real, comma-separated")
    ap.add_argument("--synthetic", default="", help="request counts written straight to the store")
    ap.add_argument("--streams", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--itl-ms", type=float, default=20.0, help="reference server's inter-token latency")
    ap.add_argument("--no-views", action="store_true", help="skip report/compare/export timings")
    ap.add_argument("--base-url", help="measure against this running server instead of the reference server")
    ap.add_argument("--model", help="with --base-url: the model name to ask for")
    ap.add_argument("--vocab-size", type=int, help="with --base-url: a server that does not report its vocabulary")
    ap.add_argument("--oracle", help="a compiled OpenAI-compatible timing server to start on CPU 1 (the client on CPU 0)")
    ap.add_argument("--busy", action="store_true", help="a busy loop pinned on the client's CPU while it runs")
    ap.add_argument("--soak", type=float, default=0, help="instead: one --duration cell of this many seconds")
    ap.add_argument("--rate", type=float, default=50.0, help="--soak: open-loop request rate")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tb-scale-"))
    env = {**os.environ, "TOKENBENCH_RESULTS": str(work)}
    rows = []
    try:
        if a.soak:
            print(soak_row(a.soak, a.rate, work / "soak.db", env, a.output_len, a.itl_ms))
            return 0
        for n in (int(x) for x in a.real.split(",") if x):
            model, vocab = a.model or ("oracle" if a.oracle else None), a.vocab_size or (32000 if a.oracle else None)
            target = [*(["--model", model] if model else []), *(["--vocab-size", str(vocab)] if vocab else [])]
            rows.append(real_row(n, work / f"real-{n}.db", env, a, target))
        for n in (int(x) for x in a.synthetic.split(",") if x):
            rows.append(synthetic_row(n, work / "synthetic.db", a.output_len, a.streams))
        if not a.no_views:
            for row in rows:
                db = work / (f"real-{row['n']}.db" if row["kind"] == "real" else "synthetic.db")
                row["views"] = _views(db, row["run"], row["run"], env, work / f"v-{row['n']}")
        print("| rows | requests | peak RSS MB | DB bytes/request | CPU us/chunk | loop lag p99 ms |"
              " report | compare | export |")
        print("|---|---|---|---|---|---|---|---|---|")
        for row in rows:
            print(_fmt(row))
        real = [r for r in rows if r["kind"] == "real"]
        if len(real) >= 2:
            print(f"\npeak RSS {real[-1]['n']:,} / {real[0]['n']:,} requests: {real[-1]['rss'] / real[0]['rss']:.2f}x"
                  f"{' (busy loop on the client CPU)' if a.busy else ''}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
