"""One results database through everything that made a figure not a number: a bench with --output-len 1 (no
TPOT), a bench against a dead port, a bench whose every request failed, a bench whose server died mid-cell;
then `runs`, `report`, `export --format json`, `compare` and `--resume` all work on it, and `compare` of two
bench runs names them by target and load. tests/store/test_old_sqlite.py runs this module again on the
oldest SQLite tokenbench supports."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow   # reference servers in child processes

SQLITE_ASKED = "TOKENBENCH_TEST_SQLITE"      # set by test_old_sqlite.py: the version this process must run on


def test_the_sqlite_this_runs_on():
    assert sqlite3.sqlite_version == os.environ.get(SQLITE_ASKED, sqlite3.sqlite_version)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench(url: str, db: Path, *extra: str, out_len: int = 16, n: int = 12) -> int:
    return main(["bench", "--base-url", url, "--input-len", "8", "--output-len", str(out_len), "--concurrency", "2",
                 "--num-prompts", str(n), "--seed", "0", "--db", str(db), *extra])


class Killable:
    """`tokenbench reference-server` on a fixed port, so the same URL can be served again after a SIGKILL."""

    def __init__(self, port: int, log: Path, *extra: str) -> None:
        self.port, self.log = port, log
        self.proc = subprocess.Popen([sys.executable, "-m", "tokenbench.cli.main", "reference-server", "--port",
                                      str(port), "--send-log", str(log), *extra],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not self._up():
            assert time.monotonic() < deadline and self.proc.poll() is None, "reference server did not start"
            time.sleep(0.05)

    def _up(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def kill_after(self, answered: int) -> None:
        deadline = time.monotonic() + 60
        while self.proc.poll() is None and time.monotonic() < deadline:
            if self.log.exists() and len(self.log.read_text().splitlines()) >= answered:
                self.proc.kill()
            time.sleep(0.02)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def run_ids(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute("SELECT id FROM runs ORDER BY rowid")]
    finally:
        con.close()


@pytest.mark.timeout(300)
def test_one_database_through_every_figure_that_is_not_a_number(tmp_path, capsys):
    import threading

    db = tmp_path / "results.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1)) as ok, \
            ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1, faults={"http_500": 1.0})) as failing:
        assert bench(ok.url, db, out_len=1) == 0
        assert bench(f"http://127.0.0.1:{free_port()}", db) == 3
        assert bench(failing.url, db) == 5
    port = free_port()
    server = Killable(port, tmp_path / "send.jsonl", "--ttft-ms", "1", "--itl-ms", "20")
    killer = threading.Thread(target=server.kill_after, args=(4,), daemon=True)
    killer.start()
    assert bench(f"http://127.0.0.1:{port}", db, n=200) == 3
    killer.join()
    out1, failed, died = run_ids(db)
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--json"]) == 0
    assert sorted(r["id"] for r in json.loads(capsys.readouterr().out)) == sorted([out1, failed, died])
    for run in (out1, failed, died):
        assert main(["report", run, "--db", str(db), "--output", str(tmp_path / run)]) == 0
        assert main(["export", run, "--db", str(db), "--format", "json", "-o", str(tmp_path / f"{run}.json")]) == 0
    [cell] = json.loads((tmp_path / f"{out1}.json").read_text())["cells"]
    assert cell["mean_tpot_ms"] is None and cell["mean_ttft_ms"] > 0
    [cell] = json.loads((tmp_path / f"{failed}.json").read_text())["cells"]
    assert cell["mean_ttft_ms"] is None and cell["failed"] == 12
    server = Killable(port, tmp_path / "send2.jsonl", "--ttft-ms", "1", "--itl-ms", "1")
    try:
        assert main(["bench", "--resume", died, "--db", str(db)]) == 0
    finally:
        server.stop()
    assert main(["compare", out1, died, "--db", str(db), "--output", str(tmp_path / "cmp")]) == 0
    assert "error" not in capsys.readouterr().err.lower()


@pytest.mark.timeout(300)
def test_compare_of_two_bench_runs_names_them_by_target_and_load(tmp_path):
    db = tmp_path / "results.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1)) as fast, \
            ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=12)) as slow:
        for ref in (fast, slow):
            assert bench(ref.url, db, "--warmup-requests", "0", "--allow-client-lag", n=24) == 0
    first, second = run_ids(db)
    assert main(["compare", first, second, "--db", str(db), "--output", str(tmp_path / "cmp")]) == 0
    md = (tmp_path / "cmp" / "compare.md").read_text()
    names = [f"{ref.url.removeprefix('http://')} c=2" for ref in (fast, slow)]
    assert all(f"{n} ({r})" in md for n, r in zip(names, (first, second), strict=True))
    assert f"{names[0]} faster by" in md and "bench faster" not in md and "bench (" not in md
