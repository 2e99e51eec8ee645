"""The results database schema. Bump SCHEMA_VERSION and add a migration when it changes."""

SCHEMA_VERSION = 1

DDL = """
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
