"""`tokenbench runs`: each run's study name and one-word verdict (judge/run_verdict.py), and the filters by
name, target and date, with one-line errors on bad input (docs/reports.md, "`tokenbench runs`")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow

# run id -> (study name, target, created at, run status, cell statuses)
RUNS = {
    "r-ok": ("llama-sweep", "http://10.0.0.1:8000", "2025-06-01T10:00:00+00:00", "done", ["ok", "ok"]),
    "r-marked": ("Qwen_100%", "cpu-gemma3-vllm", "2025-06-02T23:59:59+00:00", "done", ["ok", "invalid"]),
    "r-skipped": ("llama-long", "http://10.0.0.2:8000", "2025-06-03T00:00:00+00:00", "done", ["ok", "skipped"]),
    "r-cell-failed": ("qwen", "http://10.0.0.1:8000", "2025-06-04T12:00:00+00:00", "failed", ["ok", "failed"]),
    "r-run-failed": ("qwen", "http://10.0.0.1:8000", "2025-06-05T12:00:00+00:00", "failed", ["ok"]),
    "r-interrupted": ("llama-sweep", "http://10.0.0.1:8000", "2025-06-06T12:00:00+00:00", "interrupted",
                      ["ok", "interrupted"]),
    "r-empty": ("bench", "http://10.0.0.3:8000", "2025-06-07T12:00:00+00:00", "done", []),
}
VERDICT = {"r-ok": "ok", "r-marked": "marked", "r-skipped": "marked", "r-cell-failed": "failed",
           "r-run-failed": "failed", "r-interrupted": "interrupted", "r-empty": "empty"}


def _cell(i: int, status: str) -> CellRow:
    return CellRow(key=f"8:4/c={2 ** i}", input_len=8, output_len=4, status=status,
                   summary=CellSummary(num_prompts=0, completed=0, failed=0), concurrency=2 ** i,
                   message="why" if status != "ok" else "")


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "runs.db"
    store = Store(path)
    for run_id, (name, target, created, status, statuses) in RUNS.items():
        store.create_run("sweep", target, {"name": name}, ["tokenbench"], {}, run_id=run_id)
        store.db.execute("UPDATE runs SET created_at=? WHERE id=?", (created, run_id))
        config = store.upsert_config(run_id, "default")
        for i, st in enumerate(statuses):
            store.save_cell(run_id, config, _cell(i, st), [])
        store.set_run_status(run_id, status)
    store.close()
    return path


def listed(db, capsys, *flags: str) -> dict[str, dict]:
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--json", *flags]) == 0
    return {r["id"]: r for r in json.loads(capsys.readouterr().out)}


def test_each_run_has_its_name_and_one_word_verdict(db, capsys):
    rows = listed(db, capsys)
    assert {k: r["verdict"] for k, r in rows.items()} == VERDICT
    assert {k: r["name"] for k, r in rows.items()} == {k: v[0] for k, v in RUNS.items()}
    assert rows["r-interrupted"]["cells_done"] == 1           # an interrupted cell is not done
    assert main(["runs", "--db", str(db)]) == 0
    table = capsys.readouterr().out
    assert "verdict" in table and "llama-sweep" in table and "interrupted" in table


def test_a_running_run_and_one_whose_process_died(tmp_path, capsys):
    store = Store(tmp_path / "r.db")
    store.create_run("bench", "http://x", {"name": "live"}, [], {}, run_id="live")       # owned by this process
    store.create_run("bench", "http://x", {"name": "dead"}, [], {}, run_id="dead")
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1          # a pid no process can have
    store.db.execute("UPDATE runs SET owner_pid=? WHERE id='dead'", (dead,))
    store.close()
    rows = listed(tmp_path / "r.db", capsys)
    assert (rows["live"]["verdict"], rows["dead"]["verdict"]) == ("running", "interrupted")


@pytest.mark.parametrize(("flags", "want"), [
    (["--name", "LLAMA"], {"r-ok", "r-skipped", "r-interrupted"}),                 # any case, anywhere in it
    (["--name", "qwen_100%"], {"r-marked"}),                                        # % and _ are literal
    (["--name", "_"], {"r-marked"}),
    (["--target", "10.0.0.1"], {"r-ok", "r-cell-failed", "r-run-failed", "r-interrupted"}),
    (["--target", "GEMMA"], {"r-marked"}),
    (["--since", "2025-06-04"], {"r-cell-failed", "r-run-failed", "r-interrupted", "r-empty"}),
    (["--until", "2025-06-02"], {"r-ok", "r-marked"}),                              # a date: up to its end
    (["--since", "2025-06-02", "--until", "2025-06-03"], {"r-marked", "r-skipped"}),
    (["--since", "2025-06-03T02:00+02:00"], {"r-skipped", "r-cell-failed", "r-run-failed", "r-interrupted",
                                             "r-empty"}),                           # 00:00 UTC: included
    (["--until", "2025-06-03T00:00:00Z"], {"r-ok", "r-marked", "r-skipped"}),
    (["--name", "qwen", "--target", "10.0.0.1", "--until", "2025-06-04"], {"r-cell-failed"}),
    (["--since", "1d"], set()),                                                     # all of them are older
    (["--since", "520w"], set(RUNS)),
])
def test_filters_by_name_target_and_date(db, capsys, flags, want):
    assert set(listed(db, capsys, *flags)) == want


def test_no_match_says_so(db, capsys):
    assert main(["runs", "--db", str(db), "--name", "nothing-like-it"]) == 0
    assert "no run matches" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "names"), [
    (["--since", "yesterday"], "--since 'yesterday'"),
    (["--until", "2025-13-01"], "--until '2025-13-01'"),
    (["--since", "7x"], "--since '7x'"),
    (["--since", "2025-06-05", "--until", "2025-06-01"], "--since 2025-06-05 is after --until 2025-06-01"),
])
def test_bad_dates_are_one_line_errors(db, capsys, flags, names):
    assert main(["runs", "--db", str(db), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {names}") and " -- " in err[0], err
