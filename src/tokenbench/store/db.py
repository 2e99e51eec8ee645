"""The results database (SQLite, stdlib). One transaction per finished cell, so a crash loses at most
the cell in progress, and a resumed run sees exactly the cells that were committed."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from tokenbench import __version__
from tokenbench.client.records import RequestRecord
from tokenbench.errors import StoreError
from tokenbench.store.records import REQUEST_COLUMNS, from_row, to_row
from tokenbench.store.schema import DDL, SCHEMA_VERSION

DEFAULT_DIR_ENV = "TOKENBENCH_RESULTS"


def default_db_path() -> Path:
    return Path(os.environ.get(DEFAULT_DIR_ENV, "results")) / "tokenbench.db"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open results database {self.path}: {exc}", "check --db and permissions") from exc
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA foreign_keys = ON")
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = FULL")
        self._migrate()

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema {version}, newer than this tokenbench ({SCHEMA_VERSION})",
                             "upgrade tokenbench or use another --db")
        if version < SCHEMA_VERSION:
            self.db.executescript(DDL)
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        self.db.close()

    # runs ---------------------------------------------------------------------------------------
    def create_run(self, kind: str, target: str, spec: dict, command: Sequence[str], environment: dict,
                   run_id: str | None = None) -> str:
        run_id = run_id or new_run_id()
        clock = {"perf_counter_ns": time.perf_counter_ns(), "time_ns": time.time_ns()}
        self.db.execute(
            "INSERT INTO runs (id, created_at, kind, status, target, tool_version, spec_json, command_json,"
            " environment_json, clock_json) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (run_id, _now(), kind, "running", target, __version__, json.dumps(spec), json.dumps(list(command)),
             json.dumps(environment), json.dumps(clock)))
        return run_id

    def set_run_status(self, run_id: str, status: str, message: str = "") -> None:
        self.db.execute("UPDATE runs SET status=?, message=? WHERE id=?", (status, message, run_id))

    def run(self, run_id: str) -> dict:
        row = self.db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"no run '{run_id}' in {self.path}", "list runs with `tokenbench runs`")
        return _decode(dict(row))

    def runs(self) -> list[dict]:
        rows = self.db.execute(
            "SELECT r.*, (SELECT COUNT(*) FROM cells c WHERE c.run_id=r.id) AS cells_done"
            " FROM runs r ORDER BY created_at, id").fetchall()
        return [_decode(dict(r)) for r in rows]

    # server configs -----------------------------------------------------------------------------
    def upsert_config(self, run_id: str, name: str, overrides: dict | None = None, profile: dict | None = None,
                      facts: dict | None = None, status: str = "pending", message: str = "") -> int:
        self.db.execute(
            "INSERT INTO server_configs (run_id, name, overrides_json, profile_json, facts_json, status, message)"
            " VALUES (?,?,?,?,?,?,?) ON CONFLICT(run_id, name) DO UPDATE SET"
            " profile_json=excluded.profile_json, facts_json=excluded.facts_json,"
            " status=excluded.status, message=excluded.message, overrides_json=excluded.overrides_json",
            (run_id, name, json.dumps(overrides or {}), json.dumps(profile or {}), json.dumps(facts or {}),
             status, message))
        return self.db.execute("SELECT id FROM server_configs WHERE run_id=? AND name=?", (run_id, name)).fetchone()[0]

    def configs(self, run_id: str) -> list[dict]:
        rows = self.db.execute("SELECT * FROM server_configs WHERE run_id=? ORDER BY id", (run_id,)).fetchall()
        return [_decode(dict(r)) for r in rows]

    # cells --------------------------------------------------------------------------------------
    def save_cell(self, run_id: str, config_id: int, cell: dict, records: Iterable[RequestRecord],
                  samples: Iterable[tuple] = ()) -> int:
        """Commit a finished cell with its requests and samples in ONE transaction (replacing any
        earlier row of the same key, e.g. a cell rerun after a crash)."""
        cols = ("run_id", "config_id", "key", "repeat", "input_len", "output_len", "concurrency", "request_rate",
                "status", "message", "kv_demand", "kv_capacity", "over_capacity", "summary_json", "started_ns",
                "finished_at")
        values = (run_id, config_id, cell["key"], cell.get("repeat", 0), cell["input_len"], cell["output_len"],
                  cell.get("concurrency"), cell.get("request_rate"), cell["status"], cell.get("message", ""),
                  cell.get("kv_demand"), cell.get("kv_capacity"), int(bool(cell.get("over_capacity"))),
                  json.dumps(cell["summary"]), cell.get("started_ns"), _now())
        with self._tx():
            self.db.execute("DELETE FROM cells WHERE run_id=? AND config_id=? AND key=? AND repeat=?",
                            (run_id, config_id, cell["key"], cell.get("repeat", 0)))
            cur = self.db.execute(f"INSERT INTO cells ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})", values)
            cell_id = cur.lastrowid
            self.db.executemany(
                f"INSERT INTO requests ({','.join(REQUEST_COLUMNS)}) VALUES ({','.join('?' * len(REQUEST_COLUMNS))})",
                (to_row(cell_id, r) for r in records))
            self.db.executemany(
                "INSERT INTO samples (cell_id, t_ns, source, name, value, labels_json) VALUES (?,?,?,?,?,?)",
                ((cell_id, *s) for s in samples))
        return cell_id

    def cells(self, run_id: str) -> list[dict]:
        rows = self.db.execute(
            "SELECT c.*, s.name AS config_name FROM cells c JOIN server_configs s ON s.id=c.config_id"
            " WHERE c.run_id=? ORDER BY c.config_id, c.input_len, c.output_len, c.concurrency, c.request_rate,"
            " c.repeat", (run_id,)).fetchall()
        return [_decode(dict(r)) for r in rows]

    def done_keys(self, run_id: str) -> set[tuple[str, str, int]]:
        rows = self.db.execute(
            "SELECT s.name, c.key, c.repeat FROM cells c JOIN server_configs s ON s.id=c.config_id WHERE c.run_id=?",
            (run_id,)).fetchall()
        return {(r[0], r[1], r[2]) for r in rows}

    def requests(self, cell_id: int, phase: str = "measure") -> list[RequestRecord]:
        rows = self.db.execute("SELECT * FROM requests WHERE cell_id=? AND phase=? ORDER BY idx",
                               (cell_id, phase)).fetchall()
        return [from_row(dict(r)) for r in rows]

    def samples(self, cell_id: int) -> list[dict]:
        rows = self.db.execute("SELECT * FROM samples WHERE cell_id=? ORDER BY t_ns", (cell_id,)).fetchall()
        return [_decode(dict(r)) for r in rows]

    def _tx(self):
        return _Transaction(self.db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")


def _decode(row: dict) -> dict:
    for key in list(row):
        if key.endswith("_json"):
            row[key.removesuffix("_json")] = json.loads(row.pop(key))
    return row
