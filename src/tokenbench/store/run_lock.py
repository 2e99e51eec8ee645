"""One process measures a run at a time. Two `--resume` of the same run would both measure the missing
cells (doubling the server's load) and one's results would replace the other's, so the second is refused.

The lock is a row of the results database (table run_locks: run id, pid, host, the process's start
time), checked and taken in one IMMEDIATE transaction, so two processes cannot both pass. A lock whose
process is gone (on this host, its pid no longer runs or now belongs to a later process) is stale and
is taken over. A lock held on another host cannot be judged from here and is honoured.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

from tokenbench.errors import StoreError
from tokenbench.store import liveness
from tokenbench.store.db import FIX, Store, describe

DDL = ("CREATE TABLE IF NOT EXISTS run_locks (run_id TEXT PRIMARY KEY, pid INTEGER NOT NULL, "
       "host TEXT NOT NULL, started REAL NOT NULL, since TEXT NOT NULL)")


@dataclass(frozen=True)
class Holder:
    """The process that holds a run's lock."""
    pid: int
    host: str
    started: float
    since: str

    def is_me(self) -> bool:
        return (self.pid, self.host) == (os.getpid(), socket.gethostname()) and \
            liveness.alive(self.pid, self.started)

    def alive(self) -> bool:
        """False only when it surely is not: same host, and that process is gone."""
        return self.host != socket.gethostname() or liveness.alive(self.pid, self.started)


@contextlib.contextmanager
def held(store: Store, run_id: str, resume: str) -> Iterator[None]:
    """The run's lock for the block; StoreError naming the owner when a live process holds it.
    `resume`: how to resume the run (commands.resume_advice), for the advice."""
    take(store, run_id, resume)
    try:
        yield
    except BaseException:
        with store.no_wait():           # an interrupt must not wait for another writer: a lock left behind is
            release(store, run_id)      # stale once this process ends, and the next one takes it over
        raise
    release(store, run_id)


def take(store: Store, run_id: str, resume: str) -> None:
    with _transaction(store, "lock the run"):
        found = _holder(store.db, run_id)
        if found is not None and not found.is_me() and found.alive():
            raise _busy(run_id, found, resume)
        pid, started = liveness.me()
        store.db.execute("INSERT OR REPLACE INTO run_locks VALUES (?,?,?,?,?)",
                         (run_id, pid, socket.gethostname(), started, _now()))


def refuse_if_held(store: Store, run_id: str, resume: str) -> None:
    """StoreError when a live process other than this one holds the run's lock (nothing is taken)."""
    found = holder_of(store, run_id)
    if found is not None and not found.is_me() and found.alive():
        raise _busy(run_id, found, resume)


def release(store: Store, run_id: str) -> None:
    """Drop the lock if this process holds it (a failed write leaves it stale: the next one takes it over)."""
    with contextlib.suppress(StoreError), _transaction(store, "unlock the run"):
        store.db.execute("DELETE FROM run_locks WHERE run_id=? AND pid=? AND host=?",
                         (run_id, os.getpid(), socket.gethostname()))


def holder_of(store: Store, run_id: str) -> Holder | None:
    """Who holds the run's lock now (stale or not), or None."""
    with _transaction(store, "read the run's lock"):
        return _holder(store.db, run_id)


def _holder(db: sqlite3.Connection, run_id: str) -> Holder | None:
    db.execute(DDL)
    row = db.execute("SELECT pid, host, started, since FROM run_locks WHERE run_id=?", (run_id,)).fetchone()
    return Holder(*row) if row else None


def _busy(run_id: str, holder: Holder, resume: str) -> StoreError:
    where = "" if holder.host == socket.gethostname() else f" on host {holder.host}"
    if where:
        return StoreError(f"run {run_id} is being measured by tokenbench process {holder.pid}{where} (since "
                          f"{holder.since}); this host cannot tell whether it still runs",
                          f"let it finish, or once it has stopped, on {holder.host}: {resume}")
    return StoreError(f"run {run_id} is being measured by tokenbench process {holder.pid} (since {holder.since})",
                      f"let it finish, or stop it with `kill -INT {holder.pid}` (it keeps what it measured), "
                      f"then {resume}")


@contextlib.contextmanager
def _transaction(store: Store, action: str) -> Iterator[None]:
    try:
        store.begin()
    except sqlite3.Error as exc:
        raise StoreError(f"results database {store.path}: cannot {action}: {describe(exc)}", FIX) from None
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            store.db.execute("ROLLBACK")
        raise
    try:
        store.db.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(f"results database {store.path}: cannot {action}: {describe(exc)}", FIX) from None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
