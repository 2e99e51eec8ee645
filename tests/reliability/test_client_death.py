"""Client death: `tokenbench sweep` SIGKILLed at seeded random moments, then `--resume RUN_ID`, again and
again, against a fast reference server. The moments are counted in requests the server has answered
(then a random few ms), not in seconds, so a busy machine moves them no closer to the start or the end. After every kill the database is consistent (integrity check,
foreign keys, every cell's stored requests match its summary, no orphan rows, no duplicate cell), no
committed cell is lost or redone, and the final resume completes exactly the planned cells. With a
profile target, the engine dies with the killed sweep."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import db_problems, fake_profile, gone, logged

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test

KILLS = 5
PAIRS, CONCURRENCY, REPEATS = [[8, 6], [16, 6]], [1, 2, 4], 2
PLANNED = {(f"{i}:{o}/c={c}", r) for i, o in PAIRS for c in CONCURRENCY for r in range(REPEATS)}


def sweep(db: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tokenbench.cli.main", "sweep", *args, "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def committed(db: Path) -> dict[tuple[str, int], tuple]:
    """(key, repeat) -> (cell id, finished_at, summary) of every committed cell."""
    con = sqlite3.connect(db)
    try:
        return {(k, r): (i, f, s) for i, k, r, f, s in
                con.execute("SELECT id, key, repeat, finished_at, summary_json FROM cells")}
    finally:
        con.close()


def wait_for_run(db: Path, proc: subprocess.Popen, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            con = sqlite3.connect(db)
            try:
                row = con.execute("SELECT id FROM runs").fetchone()
            finally:
                con.close()
            if row:
                return row[0]
        except sqlite3.Error:
            pass                             # not created yet
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.02)
    raise AssertionError("the sweep never created its run")


def answered(ref: ReferenceProcess) -> int:
    """Requests the server has logged so far (complete lines of its send log)."""
    return Path(ref.config.send_log).read_bytes().count(b"\n")


def wait_answered(ref: ReferenceProcess, count: int, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    """Until the server has answered `count` requests in all, or the sweep has ended."""
    deadline = time.monotonic() + timeout_s
    while answered(ref) < count and proc.poll() is None:
        assert time.monotonic() < deadline, f"the server answered {answered(ref)} of {count} requests"
        time.sleep(0.01)


@pytest.mark.timeout(300)
def test_sigkill_then_resume_never_loses_or_duplicates_a_cell(tmp_path):
    rng = random.Random(20240509)
    db = tmp_path / "sweep.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=10)) as ref:
        spec = {"target": {"base_url": ref.url}, "pairs": PAIRS, "concurrency": CONCURRENCY, "repeats": REPEATS,
                "warmup_requests": 0, "requests": {"per_concurrency": 2, "min": 8}, "monitor_interval_s": 0.2}
        (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
        run_id, before, kills, progress = None, {}, 0, []
        for _ in range(KILLS):
            # 8 requests a cell: the 9th answered means this life committed a cell; 5 lives of at most 16
            # cannot commit all 12
            start = answered(ref)
            proc = sweep(db, *(["--resume", run_id] if run_id else [str(tmp_path / "sweep.yaml")]))
            run_id = run_id or wait_for_run(db, proc)
            wait_answered(ref, start + rng.randint(9, 16), proc)
            time.sleep(rng.uniform(0, 0.05))
            kills += proc.poll() is None
            proc.kill()
            proc.communicate()
            assert db_problems(db) == []
            after = committed(db)
            assert set(after) <= PLANNED
            assert {k: after.get(k) for k in before} == before      # nothing lost, nothing redone
            before = after
            progress.append(len(after))
        assert kills == KILLS and 0 < progress[0] and progress[-1] < len(PLANNED), progress   # all mid-sweep
        final = sweep(db, "--resume", run_id)
        _, err = final.communicate(timeout=120)
        assert final.returncode == 0, err
    cells = committed(db)
    assert set(cells) == PLANNED and len(cells) == len(PLANNED)
    assert {k: cells[k] for k in before} == before
    assert db_problems(db) == []
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs").fetchall() == [("done",)]
    # (a subprocess: a loaded machine may mark a cell `invalid` for client lag, never `failed`)
    assert con.execute("SELECT COUNT(*) FROM cells WHERE status = 'failed'").fetchone()[0] == 0


def wait_until(predicate, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.timeout(180)
def test_sigkill_with_a_profile_target_takes_the_engine_down(tmp_path, monkeypatch):
    """A sweep deploying a (stand-in) engine is SIGKILLed mid-cell: the engine goes too (it gets
    SIGTERM when its parent dies), and `--resume` completes the run on a fresh engine."""
    profile = fake_profile(tmp_path, monkeypatch)
    spec = {"target": {"profile": str(profile)}, "pairs": [[8, 6]], "concurrency": [1, 2], "warmup_requests": 0,
            "requests": {"per_concurrency": 1, "min": 16}, "monitor_interval_s": 0.2}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    db, states = tmp_path / "sweep.db", tmp_path / "state"
    proc = sweep(db, str(tmp_path / "sweep.yaml"))
    wait_until(lambda: list(states.glob("*.json")))
    [engine] = [yaml.safe_load(p.read_text()) for p in states.glob("*.json")]
    wait_until(lambda: logged(tmp_path, engine["port"]) >= 3)
    proc.kill()
    proc.communicate()
    assert gone(engine["pid"], timeout_s=20), "the engine outlived the killed sweep"
    assert db_problems(db) == []
    [(run_id,)] = sqlite3.connect(db).execute("SELECT id FROM runs").fetchall()
    final = sweep(db, "--resume", run_id)
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err
    assert {k for k, _ in committed(db)} == {"8:6/c=1", "8:6/c=2"} and db_problems(db) == []
