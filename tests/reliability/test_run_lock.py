"""One process measures a run at a time: the lock is a row of the results database (pid, host, start time).
A second `--resume` of a run being measured is refused in one line naming the owner's pid; the lock of
a dead process (SIGKILL, or a pid now used by a later process) is taken over; a lock held on another
host is honoured, as this host cannot tell whether its process still runs."""

from __future__ import annotations

import os
import socket
import sqlite3
import time

import psutil
import pytest
import yaml

from tokenbench.errors import StoreError
from tokenbench.store import liveness, run_lock
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import db_problems
from .test_client_death import committed, sweep, wait_for_run, wait_until

ADVICE = "resume with `tokenbench sweep --resume R1`"


def plant(store: Store, run_id: str, pid: int, host: str, started: float) -> None:
    """A lock row as another process would have left it."""
    store.db.execute(run_lock.DDL)
    store.db.execute("INSERT OR REPLACE INTO run_locks VALUES (?,?,?,?,?)", (run_id, pid, host, started, "then"))


def test_a_live_holder_is_refused_in_one_line_naming_its_pid(tmp_path):
    store = Store(tmp_path / "db")
    parent = psutil.Process(os.getppid())              # a real, live process that is not this one
    plant(store, "R1", parent.pid, socket.gethostname(), parent.create_time())
    with pytest.raises(StoreError) as exc:
        run_lock.take(store, "R1", ADVICE)
    assert exc.value.message == f"run R1 is being measured by tokenbench process {parent.pid} (since then)"
    assert f"`kill -INT {parent.pid}`" in exc.value.hint and exc.value.hint.endswith(ADVICE)
    with pytest.raises(StoreError):
        run_lock.refuse_if_held(store, "R1", ADVICE)
    assert run_lock.holder_of(store, "R1").pid == parent.pid       # untouched


def test_a_dead_holder_is_taken_over_and_released_on_exit(tmp_path):
    store = Store(tmp_path / "db")
    pid, started = liveness.me()
    plant(store, "R1", pid, socket.gethostname(), started - 3600)  # this pid, an hour earlier: a reused pid
    run_lock.refuse_if_held(store, "R1", ADVICE)
    with run_lock.held(store, "R1", ADVICE):
        now = run_lock.holder_of(store, "R1")
        assert (now.pid, now.host, now.started) == (pid, socket.gethostname(), started)
        run_lock.take(store, "R1", ADVICE)                          # this process again: not refused
    assert run_lock.holder_of(store, "R1") is None


def test_a_holder_on_another_host_is_honoured(tmp_path):
    store = Store(tmp_path / "db")
    plant(store, "R1", 1, "gpu-box-7", 0.0)
    with pytest.raises(StoreError, match="process 1 on host gpu-box-7 .* this host cannot tell") as exc:
        run_lock.take(store, "R1", ADVICE)
    assert exc.value.hint.endswith(f"on gpu-box-7: {ADVICE}")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_second_resume_refused_while_the_first_measures_and_a_killed_owner_is_taken_over(tmp_path):
    db = tmp_path / "sweep.db"
    spec = {"pairs": [[8, 16]], "concurrency": [1], "repeats": 4, "warmup_requests": 0,
            "requests": {"per_concurrency": 4, "min": 4}, "allow_client_lag": True}
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=40)) as ref:      # ~2.6 s per cell
        (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({**spec, "target": {"base_url": ref.url}}))
        first = sweep(db, str(tmp_path / "sweep.yaml"))
        run_id = wait_for_run(db, first)
        wait_until(lambda: lock_pid(db, run_id) == first.pid)
        first.kill()
        first.communicate()
        assert lock_pid(db, run_id) == first.pid                    # the dead owner's lock stays ...
        second = sweep(db, "--resume", run_id)
        wait_until(lambda: lock_pid(db, run_id) == second.pid)      # ... and the next resume takes it over
        third = sweep(db, "--resume", run_id)
        _, err = third.communicate(timeout=120)
        assert second.poll() is None, "the test needs the second resume still measuring"
        assert third.returncode == 6
        lines = err.strip().splitlines()
        assert len(lines) == 1 and f"is being measured by tokenbench process {second.pid}" in lines[0], err
        _, err = second.communicate(timeout=120)                    # the owner finishes the run, alone
        assert second.returncode == 0, err
        assert lock_pid(db, run_id) is None
    assert {(k, r) for k, r in committed(db)} == {("8:16/c=1", r) for r in range(4)}
    assert db_problems(db) == []


def lock_pid(db, run_id: str) -> int | None:
    con = sqlite3.connect(db, timeout=30)
    try:
        row = con.execute("SELECT pid FROM run_locks WHERE run_id=?", (run_id,)).fetchone()
    except sqlite3.OperationalError:
        row = None                       # no lock taken yet in this database
    finally:
        con.close()
    time.sleep(0.01)
    return row[0] if row else None
