"""Issue 20: each stored cell keeps a bounded reservoir of requests (flagged when the cell is stored),
spread over the cell, so per-request report views cost the same for any cell size; a version-2 database
gets its reservoirs by migration."""

from __future__ import annotations

import sqlite3

from tokenbench.client.records import RequestRecord
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow
from tokenbench.store.schema import MIGRATIONS, RESERVOIR, V1_DDL


def rec(i: int, phase: str = "measure") -> RequestRecord:
    return RequestRecord(index=i, phase=phase, input_len=4, output_len=2, intended_ns=i, sent_ns=i, end_ns=i + 9,
                         status=200, token_times_ns=[i + 3, i + 5], token_counts=[1, 1])


def cell(store: Store, n: int, key: str = "4:2/c=1") -> int:
    run = store.create_run("bench", "http://x", {}, [], {})
    config = store.upsert_config(run, "target")
    return store.save_cell(run, config, CellRow(key=key, input_len=4, output_len=2, status="ok"),
                           [*(rec(i) for i in range(n)), *(rec(i, "warmup") for i in range(3))])


def test_a_large_cell_keeps_a_spread_reservoir(tmp_path):
    store = Store(tmp_path / "r.db")
    cid = cell(store, 3 * RESERVOIR)
    got = [r.index for r in store.sampled_requests(cid)]
    assert len(got) == len(set(got)) == RESERVOIR and store.request_count(cid) == 3 * RESERVOIR
    assert got == sorted(got)
    thirds = [sum(1 for i in got if k * RESERVOIR <= i < (k + 1) * RESERVOIR) for k in range(3)]
    assert all(abs(t - RESERVOIR / 3) < RESERVOIR * 0.05 for t in thirds)       # spread over the cell
    assert [r.index for r in store.sampled_requests(cid, "warmup")] == [0, 1, 2]
    assert store.sampled_requests(cid)[5] == next(r for r in store.requests(cid) if r.index == got[5])


def test_a_small_cell_is_its_own_reservoir(tmp_path):
    store = Store(tmp_path / "s.db")
    cid = cell(store, 37)
    assert [r.index for r in store.sampled_requests(cid)] == list(range(37))


def test_a_version_2_database_gets_reservoirs(tmp_path):
    path = tmp_path / "v2.db"
    con = sqlite3.connect(path)
    con.executescript(V1_DDL)
    for version, sql in MIGRATIONS:
        if version <= 2:
            con.executescript(sql)
    con.execute("INSERT INTO runs (id, created_at, kind, status, target, tool_version, spec_json, command_json,"
                " environment_json, clock_json) VALUES ('r', '2026', 'bench', 'done', 'x', '0', '{}', '[]', '{}', '{}')")
    con.execute("INSERT INTO server_configs (id, run_id, name) VALUES (1, 'r', 'target')")
    con.execute("INSERT INTO cells (id, run_id, config_id, key, input_len, output_len, status, summary_json,"
                " finished_at) VALUES (1, 'r', 1, 'k', 4, 2, 'ok', '{}', '2026')")
    con.executemany("INSERT INTO requests (cell_id, phase, idx, input_len, output_len, intended_ns, sent_ns, end_ns,"
                    " usage_source, token_offsets_json, token_counts_json) VALUES (1, 'measure', ?, 4, 2, 0, 0, 1,"
                    " 'none', '[]', '[]')", [(i,) for i in range(RESERVOIR + 250)])
    con.execute("PRAGMA user_version = 2")
    con.commit()
    con.close()
    assert len(Store(path).sampled_requests(1)) == RESERVOIR


def test_cache_totals_read_the_reservoir_only(tmp_path):
    """The report's prefix-cache share is read from the reservoir, so its cost does not grow with the cell."""
    store = Store(tmp_path / "c.db")
    cid = cell(store, RESERVOIR + 500)
    store.db.execute("UPDATE requests SET cached_tokens = 1, prompt_tokens = 4 WHERE cell_id = ?", (cid,))
    run = store.db.execute("SELECT run_id FROM cells WHERE id = ?", (cid,)).fetchone()[0]
    assert store.cache_totals(run)[cid] == (RESERVOIR, 4 * RESERVOIR, RESERVOIR)
