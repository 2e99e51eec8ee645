"""Ctrl-C keeps the truth (docs/reliability.md, "Interruptions"): the first stores the cut cell as
`interrupted` (never ok) and stops the run, `--resume` measures that cell again in full and the complete
cell replaces it in the figures while the attempt stays stored as data; a second Ctrl-C stops at once and
leaves the database intact.

The slow tests run `tokenbench` as a real process in its own process group and send it a real SIGINT, as a
terminal does, at moments they observe (the reference server's arrival log, the process's output), never
after a sleep. The fast ones cancel the study's task as asyncio's Runner does on the first SIGINT."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.client.records import RequestRecord
from tokenbench.errors import Interrupted
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import Interruption
from tokenbench.spec.study import StudySpec
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow
from tokenbench.study import run as study
from tokenbench.study.settings import RunSettings, StudyEvents
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import Child, cells, db_problems, error_lines, wait_arrivals

N = 10                      # requests of the cell that is interrupted


# ---- real processes, real SIGINT -------------------------------------------------------------------------

def cell_args(ref: ReferenceProcess, db: Path, concurrency: str, n: int = N) -> list[str]:
    return ["--base-url", ref.url, "--input-len", "8", "--output-len", "4", "--concurrency", concurrency,
            "--num-prompts", str(n), "--warmup-requests", "0", "--allow-client-lag", "--db", str(db)]


def run_id(db: Path) -> str:
    [(rid,)] = sqlite3.connect(db).execute("SELECT id FROM runs").fetchall()
    return rid


def run_listing(db: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    return row


def report_text(db: Path, rid: str, tmp_path: Path) -> str:
    assert main(["report", rid, "--db", str(db), "--format", "md", "-o", str(tmp_path / "report")]) == 0
    return (tmp_path / "report" / "report.md").read_text()


def assert_one_interrupt_line(child: Child, kind: str, db: Path) -> None:
    """Exit 130 and ONE error line that names the run, the database and the pasteable resume command."""
    [line] = error_lines(child.output)
    rid = run_id(db)
    assert line.startswith("error: interrupted by the user in cell ") and "stored as interrupted" in line, line
    assert f"run {rid} kept in {db}" in line and f"`tokenbench {kind} --resume {rid} --db {db}`" in line, line
    assert "Traceback" not in child.output


KINDS = [pytest.param("bench", "1", (), id="bench"),
         pytest.param("bench", "2", ("--workers", "2"), id="bench-workers"),
         pytest.param("sweep", "1", (), id="sweep")]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("kind", "concurrency", "extra"), KINDS)
def test_sigint_after_the_first_request_then_resume_measures_the_cell_in_full(tmp_path, capsys, kind, concurrency,
                                                                              extra):
    db, c = tmp_path / "r.db", int(concurrency)
    with ReferenceProcess(ReferenceConfig(ttft_ms=20, itl_ms=100)) as ref:
        child = Child(kind, *cell_args(ref, db, concurrency), *extra)
        wait_arrivals(ref, c + 1, child)           # one request finished: the next one was sent
        child.sigint()
        assert child.exit_code() == 130, child.output
        assert_one_interrupt_line(child, kind, db)
        [(key, status, superseded, s)] = cells(db)
        assert (status, superseded) == ("interrupted", 0)          # never ok, whatever finished
        assert 1 <= s["completed"] < N and s["interrupted_planned"] == N
        assert run_listing(db, capsys)["verdict"] == "interrupted" and db_problems(db) == []
        assert f"{s['completed']}/{N}" in report_text(db, run_id(db), tmp_path)     # marked, of the planned

        assert main([kind, "--resume", run_id(db), "--db", str(db), "--output", str(tmp_path / "r.json")]) == 0
    [cell] = json.loads((tmp_path / "r.json").read_text())["cells"]         # the complete cell alone
    assert (cell["status"], len(cell["requests"])) == ("ok", N)
    rows = cells(db)
    current = [r for r in rows if r[2] == 0]
    assert [(r[0], r[1]) for r in current] == [(key, "ok")] and current[0][3]["completed"] == N
    assert [(r[1], r[2]) for r in rows if r[2]] == [("interrupted", 1)]      # the attempt, kept as data
    con = sqlite3.connect(db)
    kept = con.execute("SELECT COUNT(*) FROM requests r JOIN cells c ON c.id = r.cell_id WHERE c.superseded = 1"
                       " AND r.phase = 'measure'").fetchone()[0]
    assert kept == s["completed"] + s["interrupted_cut"] >= 1
    assert re.search(rf"\| c={c}\S* \| {N}/{N}\S* \|", report_text(db, run_id(db), tmp_path))
    listed = run_listing(db, capsys)
    assert (listed["status"], listed["verdict"], listed["cells_done"]) == ("done", "ok", 1)
    assert db_problems(db) == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigint_before_any_request_finished_then_resume_completes_the_run(tmp_path, capsys):
    db = tmp_path / "r.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=3000, itl_ms=10)) as ref:     # nothing finishes for 3 s
        child = Child("bench", *cell_args(ref, db, str(N)))
        wait_arrivals(ref, N, child)               # every request sent, none finished
        child.sigint()
        assert child.exit_code() == 130, child.output
        assert_one_interrupt_line(child, "bench", db)
        [(_, status, _, s)] = cells(db)
        assert status == "interrupted" and s.get("completed", 0) == 0 and s["interrupted_cut"] == N
        assert main(["bench", "--resume", run_id(db), "--db", str(db)]) == 0
    assert [(st, sup, s["completed"]) for _, st, sup, s in cells(db)] == [("interrupted", 1, 0), ("ok", 0, N)]
    assert run_listing(db, capsys)["status"] == "done" and db_problems(db) == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_second_sigint_during_the_save_exits_at_once_and_keeps_the_database(tmp_path, capsys):
    """The first SIGINT comes in the second cell; while its save waits for the database, which this test
    holds (as another tokenbench storing a cell would), a second SIGINT stops the process at once."""
    db, first = tmp_path / "r.db", 4
    with ReferenceProcess(ReferenceConfig(ttft_ms=20, itl_ms=100)) as ref:
        child = Child("bench", *cell_args(ref, db, "1,2", n=first))
        wait_arrivals(ref, first + 3, child)       # cell c=1 stored, one request of cell c=2 finished
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")          # the write lock: the interrupted cell's save must wait
        try:
            child.sigint()
            child.wait_line("interrupted: storing")
            child.sigint()
            asked = time.monotonic()
            code = child.exit_code()
            took = time.monotonic() - asked
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert code == 130 and "Traceback" not in child.output, child.output
        assert took < 20            # a save that waited out SQLite's 30 s for the lock would take longer
        assert db_problems(db) == []
        assert [(k, st) for k, st, _, _ in cells(db)] == [("8:4/c=1", "ok")]      # stored before: kept; the cut cell: not
        assert run_listing(db, capsys)["status"] == "interrupted"
        assert main(["bench", "--resume", run_id(db), "--db", str(db)]) == 0
    assert [(k, st) for k, st, _, _ in cells(db)] == [("8:4/c=1", "ok"), ("8:4/c=2", "ok")]


# ---- in this process: the task cancelled as asyncio's Runner cancels it on the first SIGINT ----------------

class CancelAt:
    """Study events that cancel the study's task once `phase` has `done` requests finished."""

    def __init__(self, phase: str, done: int) -> None:
        self.phase, self.done, self.task = phase, done, None
        self.events = StudyEvents(log=lambda m: None, cell_started=self.started, cell_progress=self.progress)

    def started(self, cell) -> None:
        self.task = asyncio.current_task()

    def progress(self, cell, p) -> None:
        if p.phase == self.phase and p.done >= self.done and self.task is not None:
            self.task.cancel()
            self.task = None


def _study(tmp_path: Path, ref: ReferenceProcess, warmup: int) -> tuple[Store, study.Study]:
    spec = StudySpec(target={"base_url": ref.url}, pairs=[(8, 4)], concurrency=[1], requests={"num_prompts": N},
                     warmup_requests=warmup)
    store = Store(tmp_path / "r.db")
    return store, study.start(spec, store, RunSettings(kind="bench"))


@pytest.mark.slow
@pytest.mark.parametrize(("phase", "warmup"), [("warmup", 3), ("measure", 0)])
def test_a_stop_in_the_warmup_or_the_measured_phase_is_an_interrupted_cell(tmp_path, phase, warmup):
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=20)) as ref:
        store, planned = _study(tmp_path, ref, warmup)
        with pytest.raises(Interrupted) as stop:
            study.execute(planned, CancelAt(phase, 1).events)
        [cell] = store.cells(planned.run_id)
        assert cell.status == "interrupted" and "--resume" in cell.message
        assert f"bench --resume {planned.run_id} --db {store.path}" in stop.value.one_line()
        finished = store.request_count(cell.id or 0)
        warm = store.requests(cell.id or 0, "warmup")
        if phase == "warmup":               # nothing measured; the warmup's requests are stored as they ended
            assert finished == 0 and not cell.summary.completed and 1 <= len(warm) < 3
        else:
            assert 1 <= (cell.summary.completed or 0) < N
            assert cell.summary.interruption is not None and cell.summary.interruption.planned == N
        assert store.run(planned.run_id).status == "interrupted" and store.done_keys(planned.run_id) == set()
        resumed = study.start(study.stored_spec(store, planned.run_id, "bench"), store, RunSettings(kind="bench"),
                              resume=planned.run_id)
        study.execute(resumed, StudyEvents(log=lambda m: None))
    [cell] = store.cells(planned.run_id)
    assert (cell.status, cell.summary.completed, cell.summary.interruption) == ("ok", N, None)
    assert store.run(planned.run_id).status == "done" and db_problems(store.path) == []


def _record(i: int, kind: str | None = None) -> RequestRecord:
    return RequestRecord(index=i, phase="measure", input_len=8, output_len=4, intended_ns=i, sent_ns=i, end_ns=i + 9,
                         status=200, error_kind=kind, token_times_ns=[i + 5] if kind is None else [])


def _row(status: str, completed: int, cut: int = 0) -> CellRow:
    s = CellSummary(num_prompts=completed, completed=completed, failed=0,
                    interruption=Interruption(planned=N, cut=cut) if status == "interrupted" else None)
    return CellRow(key="8:4/c=1", input_len=8, output_len=4, status=status, summary=s, concurrency=1)


def test_a_complete_cell_supersedes_an_interrupted_one_and_keeps_its_requests(tmp_path):
    store = Store(tmp_path / "r.db")
    rid = store.create_run("bench", "http://x", {"name": "t"}, [], {})
    config = store.upsert_config(rid, "default")
    store.save_cell(rid, config, _row("interrupted", 1, 1), [_record(0), _record(1, "cancelled")])
    assert [c.status for c in store.cells(rid)] == ["interrupted"] and store.done_keys(rid) == set()
    store.save_cell(rid, config, _row("interrupted", 2, 1), [_record(0), _record(1), _record(2, "cancelled")])
    store.save_cell(rid, config, _row("ok", N), [_record(i) for i in range(N)])
    [cell] = store.cells(rid)
    assert (cell.status, cell.summary.completed) == ("ok", N) and store.done_keys(rid) == {("default", "8:4/c=1", 0)}
    assert store.request_count(cell.id or 0) == N
    con = sqlite3.connect(store.path)
    kept = con.execute("SELECT c.superseded, c.status, COUNT(r.idx) FROM cells c JOIN requests r ON r.cell_id = c.id"
                       " WHERE c.superseded > 0 GROUP BY c.id ORDER BY c.superseded").fetchall()
    assert kept == [(1, "interrupted", 2), (2, "interrupted", 3)]     # each attempt, with its requests
    store.save_cell(rid, config, _row("ok", N), [_record(i) for i in range(N)])      # a complete cell is replaced
    assert con.execute("SELECT superseded, status FROM cells ORDER BY superseded").fetchall() == [
        (0, "ok"), (1, "interrupted"), (2, "interrupted")]
    assert [r.cells_done for r in store.runs()] == [1] and db_problems(store.path) == []
