"""The results database: migrations keyed by PRAGMA user_version (a version-1 database opens and is
upgraded in place), foreign or damaged files refused with one line, and a run whose process died shown
"interrupted"."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tokenbench.errors import StoreError
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow
from tokenbench.store.schema import SCHEMA_VERSION, V1_DDL


def v1_database(path) -> None:
    """A database exactly as tokenbench 0.x (schema 1) left it: one finished run, one running."""
    con = sqlite3.connect(path)
    con.executescript(V1_DDL)
    for run_id, status in (("old-done", "done"), ("old-running", "running")):
        con.execute("INSERT INTO runs (id, created_at, kind, status, target, tool_version, spec_json, command_json,"
                    " environment_json, clock_json) VALUES (?, '2026-01-01', 'bench', ?, 'http://x', '0.1', '{}',"
                    " '[]', '{}', '{}')", (run_id, status))
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()


def test_a_version_1_database_is_migrated_in_place(tmp_path):
    path = tmp_path / "v1.db"
    v1_database(path)
    store = Store(path)
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 11
    runs = {r.id: r for r in store.runs()}
    assert runs["old-done"].status == "done"
    assert runs["old-running"].status == "running"     # no owner recorded then: cannot tell, left as is
    new = store.create_run("bench", "http://y", {}, ["tokenbench"], {})
    assert store.run(new).owner_pid is not None
    store.close()
    assert Store(path).db.execute("PRAGMA user_version").fetchone()[0] == 11       # reopening is a no-op


def test_migration_5_rebuilds_cells_and_keeps_them_with_their_requests(tmp_path):
    """Cells get `superseded` (an interrupted attempt measured again is kept); SQLite rebuilds the table for
    its new UNIQUE constraint: every cell and request stays, and deleting a cell still takes its requests."""
    path = tmp_path / "v1.db"
    v1_database(path)
    con = sqlite3.connect(path)
    con.execute("INSERT INTO server_configs (id, run_id, name) VALUES (1, 'old-done', 'default')")
    con.execute("INSERT INTO cells (id, run_id, config_id, key, input_len, output_len, status, summary_json,"
                " finished_at) VALUES (7, 'old-done', 1, '8:4/c=1', 8, 4, 'ok', '{\"completed\": 2}', 'then')")
    con.executemany("INSERT INTO requests (cell_id, phase, idx, input_len, output_len, intended_ns, sent_ns, end_ns,"
                    " usage_source, token_offsets_json, token_counts_json) VALUES (7, 'measure', ?, 8, 4, 0, 0, 1,"
                    " 'server', '[]', '[]')", [(0,), (1,)])
    con.commit()
    con.close()
    store = Store(path)
    [cell] = store.cells("old-done")
    assert (cell.id, cell.key, cell.summary.completed, store.request_count(7)) == (7, "8:4/c=1", 2, 2)
    assert store.db.execute("PRAGMA foreign_key_check").fetchall() == []
    store.db.execute("DELETE FROM cells WHERE id = 7")
    assert store.db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 0      # ON DELETE CASCADE holds


def test_a_new_database_takes_the_same_migration_path(tmp_path):
    store = Store(tmp_path / "new.db")
    cols = {r[1] for r in store.db.execute("PRAGMA table_info(runs)")}
    assert {"owner_pid", "owner_started"} <= cols


def damaged(tmp_path, kind: str):
    path = tmp_path / f"{kind}.db"
    if kind == "not_sqlite":
        path.write_text("this is a text file, not a database\n" * 50)
    elif kind == "truncated":
        Store(path).create_run("bench", "http://x", {}, [], {})
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3] or b"SQLite format 3\x00")
        for extra in (tmp_path / f"{kind}.db-wal", tmp_path / f"{kind}.db-shm"):
            extra.unlink(missing_ok=True)
    elif kind == "foreign":
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE runs (id INTEGER, name TEXT)")
        con.commit()
        con.close()
    elif kind == "wrong_schema":
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE runs (id TEXT)")
        con.execute("PRAGMA user_version = 1")
        con.commit()
        con.close()
    elif kind == "newer":
        con = sqlite3.connect(path)
        con.execute("PRAGMA user_version = 99")
        con.commit()
        con.close()
    return path


@pytest.mark.parametrize("kind", ["not_sqlite", "truncated", "foreign", "wrong_schema", "newer"])
def test_a_damaged_or_foreign_database_is_refused_in_one_line(tmp_path, kind):
    path = damaged(tmp_path, kind)
    with pytest.raises(StoreError) as exc:
        Store(path).runs()
    line = exc.value.one_line()
    assert str(path) in line and exc.value.hint and "\n" not in line


def test_a_run_whose_process_died_is_shown_interrupted(tmp_path):
    """The owner's pid is one no process can have (above the kernel's pid_max)."""
    store = Store(tmp_path / "r.db")
    run_id = store.create_run("sweep", "http://x", {}, [], {})
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    store.db.execute("UPDATE runs SET owner_pid=? WHERE id=?", (dead, run_id))
    [row] = store.runs()
    assert row.status == "interrupted" and f"pid {dead}" in row.message
    assert store.run(run_id).status == "interrupted"
    store.set_run_status(run_id, "running")            # a resume takes the run over: this process owns it
    assert store.run(run_id).status == "running"


def test_a_reused_pid_is_not_taken_for_the_owner(tmp_path):
    """Same pid, different start time: another process, so the run is interrupted."""
    store = Store(tmp_path / "r.db")
    run_id = store.create_run("sweep", "http://x", {}, [], {})
    store.db.execute("UPDATE runs SET owner_started = owner_started - 3600 WHERE id=?", (run_id,))
    assert store.run(run_id).status == "interrupted"


def test_a_resume_runs_again_every_cell_that_did_not_end_ok(tmp_path):
    """Failed (for any cause), cut short by a server that went away, interrupted: run again; ok and skipped
    on purpose (saturation): kept."""
    store = Store(tmp_path / "r.db")
    run_id = store.create_run("sweep", "http://x", {}, [], {})
    config = store.upsert_config(run_id, "default")
    why = "server unreachable at http://x"
    store.save_cell(run_id, config, CellRow(key="8:8/c=1", input_len=8, output_len=8, status="failed", message="2/4 requests failed"), [])
    store.save_cell(run_id, config, CellRow(key="8:8/c=2", input_len=8, output_len=8, status="failed",
                                            summary=CellSummary(server_unreachable=True),
                                            message=why), [])
    store.save_cell(run_id, config, CellRow(key="8:8/c=3", input_len=8, output_len=8, status="interrupted", message="interrupted"), [])
    store.save_cell(run_id, config, CellRow(key="8:8/c=4", input_len=8, output_len=8, status="ok"), [])
    store.save_cell(run_id, config, CellRow(key="8:8/c=5", input_len=8, output_len=8, status="skipped", message="skipped: saturated"), [])
    assert store.done_keys(run_id) == {("default", "8:8/c=4", 0), ("default", "8:8/c=5", 0)}


def test_migration_11_keeps_each_death_of_a_configs_engine_in_order(tmp_path):
    """A config stored before migration 11 reads as one whose engine never died; each death added after it is
    kept in order with its launch, cell and cause, and a death stored by another version reads as a death of
    unknown cause (that it died is the fact)."""
    from tokenbench.logs.launch import Death, LaunchFailure
    path = tmp_path / "v1.db"
    v1_database(path)
    con = sqlite3.connect(path)
    con.execute("INSERT INTO server_configs (id, run_id, name) VALUES (1, 'old-done', 'slots=4')")
    con.commit()
    con.close()
    store = Store(path)
    [config] = store.configs("old-done")
    assert config.deaths == () and config.launch is None
    oom = LaunchFailure(cause="out_of_memory", evidence="CUDA out of memory", exit_code=1, log="/x.log")
    store.add_config_death("old-done", "slots=4", Death(launch=1, cell="32:16/c=8", failure=oom))
    store.add_config_death("old-done", "slots=4", Death(launch=3, cell="32:16/c=4", sustain=True,
                                                        failure=LaunchFailure(cause="exited", exit_code=-9)))
    store.db.execute("UPDATE server_configs SET deaths_json=json_insert(deaths_json, '$[#]', json('{\"x\": 1}'))")
    [config] = store.configs("old-done")
    assert [(d.launch, d.cell, d.sustain, d.failure.cause) for d in config.deaths] == [
        (1, "32:16/c=8", False, "out_of_memory"), (3, "32:16/c=4", True, "exited"), (None, "", False, "exited")]
    assert config.deaths[0].failure == oom
