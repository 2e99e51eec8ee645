"""The results database schema, versioned with `PRAGMA user_version`.

`V1_DDL` is the first schema; every later change is one entry of MIGRATIONS (version it produces, SQL, or
a function of the connection where SQL cannot do it, defined here beside it). A new database runs V1_DDL then
every migration, so the path an old database takes is the path every database takes. To change the
schema: append a migration; never edit V1_DDL or an earlier migration.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from tokenbench.store.records import dumps

V1_DDL = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    kind TEXT NOT NULL,                 -- bench | sweep | import
    status TEXT NOT NULL,               -- running | done | failed | interrupted
    target TEXT NOT NULL,
    tool_version TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    command_json TEXT NOT NULL,
    environment_json TEXT NOT NULL,
    clock_json TEXT NOT NULL,           -- {"perf_counter_ns": .., "time_ns": ..} taken together
    message TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS server_configs (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    overrides_json TEXT NOT NULL DEFAULT '{}',
    profile_json TEXT NOT NULL DEFAULT '{}',
    facts_json TEXT NOT NULL DEFAULT '{}',
    status TEXT NOT NULL DEFAULT 'pending',
    message TEXT NOT NULL DEFAULT '',
    UNIQUE (run_id, name)
);
CREATE TABLE IF NOT EXISTS cells (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    config_id INTEGER NOT NULL REFERENCES server_configs(id),
    key TEXT NOT NULL,
    repeat INTEGER NOT NULL DEFAULT 0,
    input_len INTEGER NOT NULL,
    output_len INTEGER NOT NULL,
    concurrency INTEGER,
    request_rate REAL,
    status TEXT NOT NULL,               -- ok | failed | invalid
    message TEXT NOT NULL DEFAULT '',
    kv_demand INTEGER,
    kv_capacity INTEGER,
    over_capacity INTEGER NOT NULL DEFAULT 0,
    summary_json TEXT NOT NULL,
    started_ns INTEGER,
    finished_at TEXT NOT NULL,
    UNIQUE (run_id, config_id, key, repeat)
);
CREATE TABLE IF NOT EXISTS requests (
    cell_id INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    idx INTEGER NOT NULL,
    input_len INTEGER NOT NULL,
    output_len INTEGER NOT NULL,
    intended_ns INTEGER NOT NULL,
    sent_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    status INTEGER,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    cached_tokens INTEGER,
    usage_source TEXT NOT NULL,
    finish_reason TEXT,
    error_kind TEXT,
    error_detail TEXT NOT NULL DEFAULT '',
    length_error TEXT NOT NULL DEFAULT '',
    token_offsets_json TEXT NOT NULL,   -- arrival of each token-bearing chunk, ns after sent_ns
    token_counts_json TEXT NOT NULL,
    text TEXT NOT NULL DEFAULT '',
    worker INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (cell_id, phase, idx)
);
CREATE TABLE IF NOT EXISTS samples (
    cell_id INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    t_ns INTEGER NOT NULL,
    source TEXT NOT NULL,
    name TEXT NOT NULL,
    value REAL NOT NULL,
    labels_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS samples_cell ON samples(cell_id, source, name);
"""

# the columns of `cells` as V1_DDL made them (migration 5 rebuilds the table with them)
_CELL_COLUMNS = """
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    config_id INTEGER NOT NULL REFERENCES server_configs(id),
    key TEXT NOT NULL,
    repeat INTEGER NOT NULL DEFAULT 0,
    input_len INTEGER NOT NULL,
    output_len INTEGER NOT NULL,
    concurrency INTEGER,
    request_rate REAL,
    status TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    kv_demand INTEGER,
    kv_capacity INTEGER,
    over_capacity INTEGER NOT NULL DEFAULT 0,
    summary_json TEXT NOT NULL,
    started_ns INTEGER,
    finished_at TEXT NOT NULL"""
_CELL_NAMES = ", ".join(line.split()[0] for line in _CELL_COLUMNS.strip().splitlines())

RESERVOIR = 1000   # requests per cell and phase kept flagged `sampled` for per-request views

# a fixed pseudo-random order of request indices (Fibonacci hashing): the first RESERVOIR of a cell in
# this order are its reservoir, spread evenly over the cell; a cell of at most RESERVOIR has them all
SAMPLE_ORDER = "(idx * 2654435761) % 4294967296, idx"
_RANKED = f"SELECT rowid AS id, ROW_NUMBER() OVER (PARTITION BY cell_id, phase ORDER BY {SAMPLE_ORDER}) AS rn FROM requests"

# the JSON columns a release before schema 8 wrote with json.dumps's NaN and Infinity (requests' token lists
# were always msgspec's integers, and a monitor sample's labels strings)
NAN_COLUMNS = {"runs": ("spec_json", "command_json", "environment_json", "clock_json"),
               "server_configs": ("overrides_json", "profile_json", "facts_json"),
               "cells": ("summary_json",), "searches": ("record_json",)}
_SUSPECT = "({c} LIKE '%NaN%' OR {c} LIKE '%Infinity%')"


def non_finite_json_to_null(db: sqlite3.Connection) -> None:
    """Migration 8, in Python where SQL cannot: NaN, Infinity and -Infinity in stored JSON (not JSON: SQLite
    before 3.42 refuses the whole text, so every query that reads into it failed) rewritten as null, "not
    defined", what tokenbench now writes. store/migrate.py runs it in the transaction of its version bump."""
    for table, columns in NAN_COLUMNS.items():
        for column in columns:
            rows = db.execute(f"SELECT rowid, {column} FROM {table} WHERE {_SUSPECT.format(c=column)}").fetchall()
            for rowid, text in rows:
                fixed = _standard(text)
                if fixed != text:
                    db.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (fixed, rowid))


def _standard(text: str) -> str:
    """The same document in standard JSON; text that is not JSON at all is left as it is (it was damaged
    some other way, and the reader says so)."""
    try:
        return dumps(json.loads(text))
    except ValueError:
        return text


# a migration is SQL, or a function given the connection where SQL cannot do it (non_finite_json_to_null above)
MIGRATIONS: list[tuple[int, str | Callable[[sqlite3.Connection], None]]] = [
    # 2: the process that owns a running run (pid + its start time), so a dead run reads "interrupted"
    (2, "ALTER TABLE runs ADD COLUMN owner_pid INTEGER;\n"
        "ALTER TABLE runs ADD COLUMN owner_started REAL;"),
    # 3: a bounded reservoir of requests per cell (report timelines and intervals read only these)
    (3, "ALTER TABLE requests ADD COLUMN sampled INTEGER NOT NULL DEFAULT 0;\n"
        f"UPDATE requests SET sampled = 1 WHERE rowid IN (SELECT id FROM ({_RANKED}) WHERE rn <= {RESERVOIR});\n"
        "CREATE INDEX IF NOT EXISTS requests_sampled ON requests(cell_id, phase, sampled);"),
    # 4: every RequestRecord field has its column (store/records.py derives them from the record); requests
    # stored before read these back as the record's defaults (what they were not stored with is unknown)
    (4, "ALTER TABLE requests ADD COLUMN images INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE requests ADD COLUMN image_bytes INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE requests ADD COLUMN image_count INTEGER;\n"
        "ALTER TABLE requests ADD COLUMN first_content_offset_ns INTEGER;\n"
        "ALTER TABLE requests ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE requests ADD COLUMN count_source TEXT NOT NULL DEFAULT 'none';\n"
        "ALTER TABLE requests ADD COLUMN expected_prompt_tokens INTEGER;\n"
        "ALTER TABLE requests ADD COLUMN connect_ns INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE requests ADD COLUMN connect_in_ttft INTEGER NOT NULL DEFAULT 0;"),
    # 5: a cell interrupted by the user (Ctrl-C) and measured again is kept as data, superseded: `superseded` is
    # 0 for a cell's current row, n > 0 for the n-th earlier attempt it replaced. SQLite cannot change a table's
    # UNIQUE constraint in place, so the table is rebuilt (store/migrate.py runs it with foreign keys off).
    (5, f"CREATE TABLE cells_v5 ({_CELL_COLUMNS},\n"
        "    superseded INTEGER NOT NULL DEFAULT 0,\n"
        "    UNIQUE (run_id, config_id, key, repeat, superseded));\n"
        f"INSERT INTO cells_v5 ({_CELL_NAMES}) SELECT {_CELL_NAMES} FROM cells;\n"
        "DROP TABLE cells;\n"
        "ALTER TABLE cells_v5 RENAME TO cells;"),
    # 6: a request that is a turn of a session (sessions workload): its session and turn
    (6, "ALTER TABLE requests ADD COLUMN session_id TEXT;\n"
        "ALTER TABLE requests ADD COLUMN turn INTEGER;"),
    # 7: capacity searches: per server config and workload, the search's record (every cell tried with its
    # role, the pooled verdicts per load, the answer per SLO tier, the sustain cell: metrics/capacity.py)
    (7, "CREATE TABLE IF NOT EXISTS searches (\n"
        "    run_id TEXT NOT NULL REFERENCES runs(id),\n"
        "    config_id INTEGER NOT NULL REFERENCES server_configs(id),\n"
        "    workload TEXT NOT NULL,\n"
        "    record_json TEXT NOT NULL,\n"
        "    finished_at TEXT NOT NULL,\n"
        "    UNIQUE (run_id, config_id, workload))"),
    # 8: JSON written with NaN or Infinity for a figure that is not defined (a cell with one output token has
    # no TPOT, one whose requests all failed no latency) made SQLite's JSON functions refuse the database:
    # those values become null, as tokenbench writes them now (store/records.py `dumps`)
    (8, non_finite_json_to_null),
    # 9: the server's own timings of a request, from its OpenTelemetry span (the trace id the request carried,
    # the span's arrival and phases on the server's clock, the clock offset applied); NULL where none joined
    (9, "ALTER TABLE requests ADD COLUMN trace_id TEXT;\n"
        "ALTER TABLE requests ADD COLUMN server_request_id TEXT;\n"
        "ALTER TABLE requests ADD COLUMN server_arrival_ns INTEGER;\n"
        "ALTER TABLE requests ADD COLUMN server_queue_ns INTEGER;\n"
        "ALTER TABLE requests ADD COLUMN server_prefill_ns INTEGER;\n"
        "ALTER TABLE requests ADD COLUMN server_ttft_ns INTEGER;\n"
        "ALTER TABLE requests ADD COLUMN server_decode_ns INTEGER;\n"
        "ALTER TABLE requests ADD COLUMN server_e2e_ns INTEGER;\n"
        "ALTER TABLE requests ADD COLUMN clock_offset_ns INTEGER;\n"
        "ALTER TABLE requests ADD COLUMN clock_offset_error_ns INTEGER;"),
    # 10: a server config that did not start keeps why (logs/launch.LaunchFailure: the cause read from the
    # engine's log, the line that tells it, an accelerator's error code); '{}' for one that started
    (10, "ALTER TABLE server_configs ADD COLUMN launch_json TEXT NOT NULL DEFAULT '{}';"),
    # 11: a server config whose engine started and then died keeps each death (logs/launch.Death: the launch,
    # the cell it died during, the cause read from its log); '[]' for one that never died (or stored before)
    (11, "ALTER TABLE server_configs ADD COLUMN deaths_json TEXT NOT NULL DEFAULT '[]';"),
]

SCHEMA_VERSION = MIGRATIONS[-1][0]

# table -> columns the code reads; a database without them is not (or no longer) ours
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("id", "created_at", "kind", "status", "target", "tool_version", "spec_json", "command_json",
             "environment_json", "clock_json", "message", "owner_pid", "owner_started"),
    "server_configs": ("id", "run_id", "name", "overrides_json", "profile_json", "facts_json", "status", "message",
                       "launch_json", "deaths_json"),
    "cells": ("id", "run_id", "config_id", "key", "repeat", "input_len", "output_len", "concurrency",
              "request_rate", "status", "message", "kv_demand", "kv_capacity", "over_capacity", "summary_json",
              "started_ns", "finished_at", "superseded"),
    "requests": ("cell_id", "phase", "idx", "token_offsets_json", "token_counts_json", "text", "worker", "sampled",
                 "images", "image_bytes", "image_count", "first_content_offset_ns", "reasoning_tokens", "count_source",
                 "expected_prompt_tokens", "connect_ns", "connect_in_ttft", "trace_id", "server_arrival_ns",
                 "server_queue_ns", "server_prefill_ns", "server_ttft_ns", "server_decode_ns", "server_e2e_ns",
                 "clock_offset_ns", "clock_offset_error_ns", "server_request_id"),
    "samples": ("cell_id", "t_ns", "source", "name", "value", "labels_json"),
    "searches": ("run_id", "config_id", "workload", "record_json", "finished_at"),
}
