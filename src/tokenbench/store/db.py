"""The results database (SQLite, stdlib). One transaction per finished cell, so a crash loses at most
the cell in progress, and a resumed run sees exactly the cells that were committed."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from tokenbench import __version__, userdirs
from tokenbench.client.records import RequestRecord
from tokenbench.errors import OutputError, StoreError, UsageError
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store import commands, liveness, outputs
from tokenbench.store.migrate import migrate
from tokenbench.store.records import REQUEST_COLUMNS, dumps, from_row, to_row
from tokenbench.store.rows import (
    CellRow,
    ConfigRow,
    RunRow,
    SampleRow,
    SearchRow,
    Send,
    config_from_db,
    run_from_db,
    sample_from_db,
    search_from_db,
)
from tokenbench.store.schema import RESERVOIR, SAMPLE_ORDER

if TYPE_CHECKING:
    from tokenbench.logs.launch import Death, LaunchFailure
    from tokenbench.metrics.capacity import SearchRecord


def default_db_path() -> Path:
    """The per-user results database (tokenbench/userdirs.py): the same from any directory."""
    return userdirs.results_dir() / "tokenbench.db"


def db_path(db: str | Path | None) -> Path:
    """The database a `--db` value names (None: the default one). Every --db reaches here, through Store
    or a reader's check that it exists: `-` is refused, never a file named "-"."""
    if db is None:
        return default_db_path()
    if str(db) == outputs.STDOUT:
        raise UsageError("--db -: the results database is an SQLite file, not a stream",
                         "give --db a file path, e.g. --db ./results.db")
    return Path(db)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


BUSY_S = 30.0           # a write waits this long for another writer (several processes share one database)
BUSY_STEP_S = 0.1       # ... in steps of this, so a Ctrl-C is handled meanwhile (store.begin)
# a cell a resume skips: its current row ended ok (or was skipped on purpose: saturation); one that failed, was
# interrupted or was cut short by a server that went away is measured again
DONE = "c.superseded = 0 AND c.status IN ('ok', 'skipped')"


@dataclass(frozen=True)
class RunFilter:
    """Which runs `Store.runs` gives: the study name and the target containing these texts (any case),
    created from `since` until `until` (ISO timestamps in UTC, as stored; either end open), of the series
    named exactly `series` (the run's spec: no column of its own, the runs table is scanned once)."""

    name: str | None = None
    target: str | None = None
    since: str | None = None
    until: str | None = None
    series: str | None = None

    def where(self) -> tuple[str, tuple]:
        """The SQL condition on `runs r` (with its leading WHERE) and its arguments."""
        parts = [(f"COALESCE(json_extract(r.spec_json, '$.name'), '') LIKE ? ESCAPE '{LIKE_ESCAPE}'", _like(self.name)),
                 (f"r.target LIKE ? ESCAPE '{LIKE_ESCAPE}'", _like(self.target)),
                 ("r.created_at >= ?", self.since), ("r.created_at <= ?", self.until),
                 ("json_extract(r.spec_json, '$.series') = ?", self.series)]
        kept = [(sql, arg) for sql, arg in parts if arg is not None]
        return (" WHERE " + " AND ".join(sql for sql, _ in kept) if kept else "", tuple(arg for _, arg in kept))


LIKE_ESCAPE = "\\"


def _like(text: str | None) -> str | None:
    """A LIKE pattern matching `text` anywhere (its own % and _ taken literally)."""
    if text is None:
        return None
    for c in (LIKE_ESCAPE, "%", "_"):
        text = text.replace(c, LIKE_ESCAPE + c)
    return f"%{text}%"


# SQLite's words for a write that the disk refused -> what the user is told
WRITE_REFUSED = {"database or disk is full": "disk full", "readonly database": "read-only",
                 "disk i/o error": "disk I/O error"}
FIX = "check --db and its directory (space, permissions, a local disk)"


def describe(exc: BaseException) -> str:
    """A short reason for an OS or SQLite error (ENOSPC -> 'disk full (No space left on device)')."""
    if isinstance(exc, OSError):
        return outputs.reason(exc)
    text = str(exc)
    for needle, short in WRITE_REFUSED.items():
        if needle in text.lower():
            return f"{short} ({text})"
    return text


def refused_write(exc: BaseException) -> bool:
    """A full, read-only or failing disk (data could go elsewhere), not a bug or a lock."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO, errno.EACCES, errno.EPERM)
    return any(n in str(exc).lower() for n in WRITE_REFUSED)


class Store:
    kept = True         # False for --no-store's temporary database: nothing to resume or report from later
    wait_s = BUSY_S     # how long a write waits for another writer (0 in `no_wait`)

    def __init__(self, path: str | Path) -> None:
        self.path = db_path(path)
        if self.path.exists() and not self.path.is_file():
            raise StoreError(f"results database {self.path} is not a regular file (a directory, device or FIFO)",
                             "pass --db the path of a database file (or a new one)")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot create the directory of results database {self.path}: {describe(exc)}",
                              FIX) from None
        with self._guard("open"):
            outputs.create(self.path)           # SQLite would make a new one 0644 whatever the umask
            self.db = sqlite3.connect(self.path, timeout=BUSY_S, isolation_level=None)
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = FULL")
            migrate(self.db, self.path)
            self.db.execute("PRAGMA foreign_keys = ON")

    @contextlib.contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Every SQLite or OS error as a StoreError naming the database (OutputError: a refused write)."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            text = str(exc)
            if "not a database" in text or "malformed" in text:
                raise StoreError(f"{self.path} is not a readable tokenbench results database ({text})",
                                 "it is damaged or another kind of file: use another --db") from None
            kind = OutputError if refused_write(exc) else StoreError
            raise kind(f"results database {self.path}: cannot {action}: {describe(exc)}", FIX) from None
        except OSError as exc:
            raise OutputError(f"results database {self.path}: cannot {action}: {describe(exc)}", FIX) from None

    def close(self) -> None:
        self.db.close()

    # runs ---------------------------------------------------------------------------------------
    def create_run(self, kind: str, target: str, spec: dict, command: Sequence[str], environment: dict,
                   run_id: str | None = None) -> str:
        run_id = run_id or new_run_id()
        clock = {"perf_counter_ns": time.perf_counter_ns(), "time_ns": time.time_ns()}
        with self._guard("create a run"):
            self.db.execute(
                "INSERT INTO runs (id, created_at, kind, status, target, tool_version, spec_json, command_json,"
                " environment_json, clock_json, owner_pid, owner_started) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, _now(), kind, "running", target, __version__, dumps(spec), dumps(list(command)),
                 dumps(environment), dumps(clock), *liveness.me()))
        return run_id

    def set_run_status(self, run_id: str, status: str, message: str = "") -> None:
        """"running" also makes this process the run's owner (a resume takes the run over)."""
        with self._guard("update the run's status"):
            self.db.execute("UPDATE runs SET status=?, message=? WHERE id=?", (status, message, run_id))
            if status == "running":
                self.db.execute("UPDATE runs SET owner_pid=?, owner_started=? WHERE id=?", (*liveness.me(), run_id))

    def discard_run(self, run_id: str) -> bool:
        """Remove a run that holds no cell (one refused for a usage error before anything was measured), with
        its server configs and searches; False, and nothing removed, when it holds a cell."""
        with self._guard("remove the run"), self._tx():
            if self.db.execute("SELECT 1 FROM cells WHERE run_id=? LIMIT 1", (run_id,)).fetchone():
                return False
            for table in ("searches", "server_configs"):
                self.db.execute(f"DELETE FROM {table} WHERE run_id=?", (run_id,))
            self.db.execute("DELETE FROM runs WHERE id=?", (run_id,))
        return True

    def run(self, run_id: str) -> RunRow:
        with self._guard("read runs"):
            row = self.db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"no run '{run_id}' in {self.path}",
                             f"list runs with `{commands.tokenbench(self.path, 'runs')}`")
        return liveness.shown_status(run_from_db(_decode(dict(row))))

    def runs(self, which: RunFilter = RunFilter()) -> list[RunRow]:
        """The runs `which` selects, oldest first (created_at is to the second: ties in the order stored)."""
        with self._guard("read runs"):
            where, args = which.where()
            rows = self.db.execute(
                f"SELECT r.*, (SELECT COUNT(*) FROM cells c WHERE c.run_id=r.id AND {DONE}) AS cells_done"
                f" FROM runs r{where} ORDER BY created_at, r.rowid", args).fetchall()
            return [liveness.shown_status(run_from_db(_decode(dict(r)))) for r in rows]

    # server configs -----------------------------------------------------------------------------
    def upsert_config(self, run_id: str, name: str, overrides: dict | None = None, profile: Profile | None = None,
                      facts: ServerFacts | None = None, status: str = "pending") -> int:
        """Store a server config (its message is set by set_config_status)."""
        stored = (dumps(overrides or {}), dumps(profile.model_dump(mode="json") if profile else {}),
                  dumps(facts.to_dict() if facts else {}))
        with self._guard("store a server config"):
            self.db.execute(
                "INSERT INTO server_configs (run_id, name, overrides_json, profile_json, facts_json, status, message)"
                " VALUES (?,?,?,?,?,?,?) ON CONFLICT(run_id, name) DO UPDATE SET"
                " profile_json=excluded.profile_json, facts_json=excluded.facts_json,"
                " status=excluded.status, message=excluded.message, overrides_json=excluded.overrides_json",
                (run_id, name, *stored, status, ""))
            return self.db.execute("SELECT id FROM server_configs WHERE run_id=? AND name=?",
                                   (run_id, name)).fetchone()[0]

    def set_config_status(self, run_id: str, name: str, status: str, message: str) -> None:
        with self._guard("update a server config"):
            self.db.execute("UPDATE server_configs SET status=?, message=? WHERE run_id=? AND name=?",
                            (status, message, run_id, name))

    def set_config_launch(self, run_id: str, name: str, failure: LaunchFailure | None) -> None:
        """Keep why a server config did not start (None: it started)."""
        stored = failure.model_dump_json() if failure is not None else "{}"
        with self._guard("update a server config"):
            self.db.execute("UPDATE server_configs SET launch_json=? WHERE run_id=? AND name=?", (stored, run_id, name))

    def add_config_death(self, run_id: str, name: str, death: Death) -> None:
        """Keep that a server config's engine died after it started (every death, in order)."""
        with self._guard("update a server config"):
            self.db.execute("UPDATE server_configs SET deaths_json=json_insert(deaths_json, '$[#]', json(?))"
                            " WHERE run_id=? AND name=?", (death.model_dump_json(), run_id, name))

    def configs(self, run_id: str) -> list[ConfigRow]:
        return [config_from_db(r) for r in self._rows("read server configs",
                                                      "SELECT * FROM server_configs WHERE run_id=? ORDER BY id",
                                                      (run_id,))]

    # capacity searches --------------------------------------------------------------------------
    def save_search(self, run_id: str, config_id: int, record: SearchRecord) -> None:
        """Store (or replace: a resumed search replays its cells and ends the same or further) a search."""
        with self._guard(f"store the capacity search of {record.workload}"):
            self.db.execute(
                "INSERT INTO searches (run_id, config_id, workload, record_json, finished_at) VALUES (?,?,?,?,?)"
                " ON CONFLICT(run_id, config_id, workload) DO UPDATE SET record_json=excluded.record_json,"
                " finished_at=excluded.finished_at",
                (run_id, config_id, record.workload, record.model_dump_json(), _now()))

    def searches(self, run_id: str) -> list[SearchRow]:
        rows = self._rows("read capacity searches",
                          "SELECT x.*, s.name AS config_name FROM searches x JOIN server_configs s"
                          " ON s.id=x.config_id WHERE x.run_id=? ORDER BY x.config_id, x.rowid", (run_id,))
        return [r for row in rows if (r := search_from_db(row)) is not None]

    # cells --------------------------------------------------------------------------------------
    def save_cell(self, run_id: str, config_id: int, cell: CellRow, records: Iterable[RequestRecord],
                  samples: Iterable[tuple] = ()) -> int:
        """Commit a finished cell with its requests and samples in ONE transaction, as the current row of its
        key (an earlier row of the same key makes way: `_make_way`)."""
        columns = {**cell.columns(), "over_capacity": int(cell.over_capacity),
                   "summary_json": dumps(cell.summary.to_dict()), "started_ns": cell.started_ns,
                   "run_id": run_id, "config_id": config_id, "finished_at": _now()}
        with self._guard(f"store cell {cell.key}"), self._tx():
            self._make_way(run_id, config_id, cell)
            cur = self.db.execute(f"INSERT INTO cells ({','.join(columns)}) VALUES ({','.join('?' * len(columns))})",
                                  tuple(columns.values()))
            cell_id = cur.lastrowid or 0
            self.db.executemany(
                f"INSERT INTO requests ({','.join(REQUEST_COLUMNS)}) VALUES ({','.join('?' * len(REQUEST_COLUMNS))})",
                (to_row(cell_id, r) for r in records))
            self._mark_reservoir(cell_id)
            self.db.executemany(
                "INSERT INTO samples (cell_id, t_ns, source, name, value, labels_json) VALUES (?,?,?,?,?,?)",
                ((cell_id, *s) for s in samples if _a_number(s[3])))
        return cell_id

    def _make_way(self, run_id: str, config_id: int, cell: CellRow) -> None:
        """The key's current row makes way for a new one: one a resume measures again (interrupted, failed, cut
        short by a server that went away) is kept as data, numbered as the n-th superseded attempt (its
        requests stay; no figure reads them); one that ended ok (or was skipped) is replaced."""
        same, key = "run_id=? AND config_id=? AND key=? AND repeat=?", (run_id, config_id, cell.key, cell.repeat)
        self.db.execute(f"UPDATE cells SET superseded = (SELECT MAX(superseded) + 1 FROM cells WHERE {same})"
                        f" WHERE {same} AND superseded = 0 AND status NOT IN ('ok', 'skipped')", key + key)
        self.db.execute(f"DELETE FROM cells WHERE {same} AND superseded = 0", key)

    def cells(self, run_id: str) -> list[CellRow]:
        """The run's current cells (an interrupted attempt measured again since is not among them)."""
        return [CellRow.from_db(r) for r in self._rows(
            "read cells",
            "SELECT c.*, s.name AS config_name FROM cells c JOIN server_configs s ON s.id=c.config_id"
            " WHERE c.run_id=? AND c.superseded=0 ORDER BY c.config_id, c.input_len, c.output_len, c.concurrency, c.request_rate,"
            " c.repeat", (run_id,))]

    def done_keys(self, run_id: str) -> set[tuple[str, str, int]]:
        """(config, key, repeat) of the cells a resume skips: those that ended ok or were skipped on purpose
        (every other is run again, in full: failed, interrupted, cut short by a server that went away)."""
        with self._guard("read cells"):
            rows = self.db.execute(
                "SELECT s.name, c.key, c.repeat FROM cells c JOIN server_configs s ON s.id=c.config_id"
                f" WHERE c.run_id=? AND {DONE}",
                (run_id,)).fetchall()
        return {(r[0], r[1], r[2]) for r in rows}

    def requests(self, cell_id: int, phase: str = "measure") -> list[RequestRecord]:
        with self._guard("read requests"):
            rows = self.db.execute("SELECT * FROM requests WHERE cell_id=? AND phase=? ORDER BY idx",
                                   (cell_id, phase)).fetchall()
            return [from_row(dict(r)) for r in rows]

    def _mark_reservoir(self, cell_id: int) -> None:
        for phase in ("measure", "warmup"):
            self.db.execute(
                "UPDATE requests SET sampled = 1 WHERE rowid IN (SELECT rowid FROM requests WHERE cell_id=? AND"
                f" phase=? ORDER BY {SAMPLE_ORDER} LIMIT ?)", (cell_id, phase, RESERVOIR))

    def sampled_requests(self, cell_id: int, phase: str = "measure") -> list[RequestRecord]:
        """The cell's reservoir: at most RESERVOIR requests, spread over the cell, chosen when it was
        stored (all of them for a cell that small), so a per-request view costs the same for any size."""
        with self._guard("read requests"):
            # the reservoir's own index: ORDER BY idx would otherwise walk the primary key over the whole cell
            rows = self.db.execute("SELECT * FROM requests INDEXED BY requests_sampled WHERE cell_id=? AND phase=?"
                                   " AND sampled=1 ORDER BY idx", (cell_id, phase)).fetchall()
            return [from_row(dict(r)) for r in rows]

    def request_count(self, cell_id: int, phase: str = "measure") -> int:
        with self._guard("read requests"):
            return self.db.execute("SELECT COUNT(*) FROM requests WHERE cell_id=? AND phase=?",
                                   (cell_id, phase)).fetchone()[0]

    def samples(self, cell_id: int) -> list[SampleRow]:
        return [sample_from_db(r) for r in self._rows("read samples",
                                                      "SELECT * FROM samples WHERE cell_id=? ORDER BY t_ns", (cell_id,))]

    def cache_totals(self, run_id: str) -> dict[int, tuple[int, int, int]]:
        """Per cell: cached prompt tokens, prompt tokens, and how many requests reported cached_tokens, over
        the cell's reservoir (every request of a cell of at most RESERVOIR; above, an even spread of them:
        the share cached is what the report shows, and reading every row would cost what the cell's size does)."""
        with self._guard("read requests"):
            rows = self.db.execute(
                "SELECT r.cell_id, COALESCE(SUM(r.cached_tokens), 0), COALESCE(SUM(r.prompt_tokens), 0),"
                " COUNT(r.cached_tokens) FROM cells c JOIN requests r ON r.cell_id = c.id AND r.phase = 'measure'"
                " AND r.sampled = 1 WHERE c.run_id = ? AND c.superseded = 0 GROUP BY r.cell_id", (run_id,)).fetchall()
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    def sends(self, target: str, key: str, repeat: int) -> list[Send]:
        """Every stored attempt of the cell `key` (repeat `repeat`) of a run against `target`, superseded ones
        included (their prompts were sent too), oldest first: what went to that server before."""
        rows = self._rows("read cells",
                          "SELECT r.id AS run_id, r.spec_json, c.finished_at FROM cells c JOIN runs r ON r.id = c.run_id"
                          " WHERE r.target = ? AND c.key = ? AND c.repeat = ? AND c.status != 'skipped'"
                          " ORDER BY c.finished_at, c.id", (target, key, repeat))
        return [Send(r["run_id"], r["spec"] or {}, r["finished_at"]) for r in rows]

    def _rows(self, action: str, sql: str, args: tuple) -> list[dict]:
        with self._guard(action):
            return [_decode(dict(r)) for r in self.db.execute(sql, args).fetchall()]

    def begin(self) -> None:
        """BEGIN IMMEDIATE: wait for another writer up to `wait_s`, in steps of BUSY_STEP_S, so a Ctrl-C is
        handled within a step (SQLite's own wait for a lock cannot be interrupted)."""
        deadline = time.monotonic() + self.wait_s
        self.db.execute(f"PRAGMA busy_timeout = {int(min(BUSY_STEP_S, self.wait_s) * 1000)}")
        try:
            while True:
                try:
                    self.db.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() >= deadline:
                        raise
        finally:
            self.db.execute(f"PRAGMA busy_timeout = {int(self.wait_s * 1000)}")

    @contextlib.contextmanager
    def no_wait(self) -> Iterator[None]:
        """Writes that do not wait for another writer, and fail quietly when one holds the database: after a
        second Ctrl-C nothing may keep the process (a run left "running" reads "interrupted" once it ends)."""
        self.wait_s = 0.0
        self.db.execute("PRAGMA busy_timeout = 0")
        try:
            with contextlib.suppress(StoreError):
                yield
        finally:
            self.wait_s = BUSY_S
            with contextlib.suppress(sqlite3.Error):
                self.db.execute(f"PRAGMA busy_timeout = {int(BUSY_S * 1000)}")

    @contextlib.contextmanager
    def _tx(self) -> Iterator[None]:
        self.begin()
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")
            raise


def _a_number(value: float) -> bool:
    """A sample worth a row: SQLite stores NaN as NULL, which `samples.value` refuses (the cell would be lost)."""
    return not (isinstance(value, float) and math.isnan(value))


def _decode(row: dict) -> dict:
    for key in list(row):
        if key.endswith("_json"):
            try:
                row[key.removesuffix("_json")] = json.loads(row.pop(key))
            except (TypeError, ValueError):
                raise StoreError(f"a stored {key.removesuffix('_json')} is not valid JSON",
                                 "the database was edited or damaged: use another --db") from None
    return row
