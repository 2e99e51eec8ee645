"""A figure the client's delays may have moved (issue 24, item 2) is marked where that figure is shown and
nowhere else: the cell stays ok, its other figures are plain and get their intervals and verdicts;
`compare` refuses a verdict on the marked figure unless --allow-client-lag, then gives it, marked."""

from __future__ import annotations

import pytest

from tokenbench.cli.main import main
from tokenbench.judge.cells import figure_state_of, state_of
from tokenbench.judge.intervals import FIGURES, Judging
from tokenbench.judge.views import load_run
from tokenbench.metrics.cell_summary import Metric
from tokenbench.metrics.summary import summarize
from tokenbench.metrics.summary_groups import ClientHealth, FigureHealth, FigureMark
from tokenbench.report.build import build_report
from tokenbench.report.compare import compare
from tokenbench.report.document import Cell, Table
from tokenbench.report.i18n import t
from tokenbench.spec.bench import Load
from tokenbench.store.rows import CellRow

from .report_fixtures import ENV, facts, profile, records

MARKED = "p99_ttft_ms"
CLEAN = "mean_ttft_ms"


def stored(store, run_id: str, slots: int, marked: bool) -> str:
    """One config, one cell (128/32 c=2), its p99 TTFT marked moved by host contention when `marked`."""
    store.create_run("sweep", "http://127.0.0.1:8000", {}, ["tokenbench", "sweep"], ENV, run_id=run_id)
    cid = store.upsert_config(run_id, "a", overrides={}, profile=profile(slots), facts=facts(4096), status="done")
    recs = records(2, 128, 32, slots)
    s = summarize(recs, Load(concurrency=2, num_prompts=len(recs)), 128, 32)
    if marked:
        mark = FigureMark(cause="host_contention", bound=38.0, tolerance=s.p99_ttft_ms * 0.05)
        s = s.with_(ClientHealth(client_wait_percent=12.5), FigureHealth(client_marks={MARKED: mark}))
    store.save_cell(run_id, cid, CellRow(key="128:32/c=2", input_len=128, output_len=32, status="ok", summary=s,
                                         repeat=0, concurrency=2, kv_demand=320, kv_capacity=4096), recs)
    store.set_run_status(run_id, "done")
    return run_id


def _rows(doc, role: str) -> list[list]:
    return [row for b in doc.blocks if isinstance(b, Table) and b.role == role for row in b.rows]


def _metric_row(rows: list[list], name: str) -> list:
    return next(r for r in rows if r[1] == name)


def test_only_the_marked_figure_carries_the_mark_and_the_cell_stays_ok(store):
    stored(store, "R1", 2, marked=True)
    run = load_run(store, "R1")
    cell = run.cells_of("a")[0]
    assert state_of(cell).ok
    assert figure_state_of(cell, MARKED).kind == "moved" and figure_state_of(cell, CLEAN).ok
    doc = build_report(run, "en", [], "T")
    [scaling] = [r for r in _rows(doc, "scaling")]
    marked = [c for c in scaling if isinstance(c, Cell) and c.mark == "~"]
    assert len(marked) == 1 and marked[0].why == "moved"                    # the p99 TTFT column alone
    notes = [n for b in doc.blocks if isinstance(b, Table) and b.role == "scaling" for n in b.footnotes]
    assert any("p99_ttft_ms ±38" in n and "host contention" in n and "12.5 %" in n for n in notes)


def test_compare_judges_the_clean_figures_and_the_marked_one_only_when_allowed(store):
    stored(store, "A", 2, marked=False)
    stored(store, "B", 4, marked=True)
    name = lambda m: t("en", f"vm.{m.name}") + f" {m.stat}"                  # noqa: E731
    doc, _ = compare(store, ["A", "B"], "en", "T")
    rows = _rows(doc, "verdicts")
    clean, moved = _metric_row(rows, name(Metric("ttft", "mean"))), _metric_row(rows, name(Metric("ttft", "p99")))
    assert not isinstance(clean[-1], Cell) and not clean[-1].startswith("refused")     # a verdict, plain
    assert isinstance(moved[-1], Cell) and moved[-1].mark == "~" and moved[-1].text.startswith("refused")
    assert "--allow-client-lag" in moved[-1].text
    doc, _ = compare(store, ["A", "B"], "en", "T", judging=Judging(allow_client_lag=True))
    moved = _metric_row(_rows(doc, "verdicts"), name(Metric("ttft", "p99")))
    assert isinstance(moved[-1], Cell) and moved[-1].mark == "~" and not moved[-1].text.startswith("refused")


def test_compare_cli_takes_allow_client_lag(store, tmp_path, capsys):
    stored(store, "A", 2, marked=False)
    stored(store, "B", 4, marked=True)
    assert main(["compare", "A", "B", "--db", str(store.path), "-o", str(tmp_path / "cmp"), "--format", "md"]) == 0
    refused = capsys.readouterr().out.count("refused: the client's")
    assert main(["compare", "A", "B", "--db", str(store.path), "-o", str(tmp_path / "cmp2"), "--format", "md",
                 "--allow-client-lag"]) == 0
    assert refused >= 1 and capsys.readouterr().out.count("refused: the client's") == 0


def test_the_terminal_table_marks_the_figure_alone(capsys):
    from tokenbench.cli import progress
    from tokenbench.metrics.cell_summary import CellSummary
    from tokenbench.study.run import Outcome
    s = CellSummary(completed=16, failed=0, output_throughput=41.25, mean_ttft_ms=401.5, p99_ttft_ms=612.0)
    s = s.with_(ClientHealth(client_wait_percent=9.0), FigureHealth(client_marks={
        MARKED: FigureMark(cause="host_contention", bound=40.0, tolerance=30.6)}))
    progress.matrix(Outcome(run_id="R", store=None,
                            cells=[CellRow(key="128:32/c=4", input_len=128, output_len=32, status="ok", summary=s,
                                           config="a")],
                            problems=[]))
    printed = capsys.readouterr().out
    assert "612.00~" in printed and "41.25 " in printed and "401.50 " in printed
    assert "p99_ttft_ms ±40" in printed and "waited 9.0 %" in printed


def _bench(ref_url: str, db: str, name: str) -> None:
    assert main(["bench", "--base-url", ref_url, "--input-len", "16", "--output-len", "48", "--concurrency", "4",
                 "--num-prompts", "12", "--warmup-requests", "0", "--db", db, "--name", name]) == 0


@pytest.mark.slow
@pytest.mark.client_health
def test_compare_of_two_measured_runs_judges_the_clean_figures_and_names_a_buffering_proxy(store):
    """Two runs measured against the reference server, the second behind a proxy that buffers the stream
    in 4 KiB pieces: its ITL percentiles are marked with buffering (the cause named: delivered in pieces
    upstream, no advice to add workers), the cell stays ok, and `compare` refuses a verdict exactly on the
    figures marked in either run and gives one on every other; TTFT and TPOT time the proxy's pieces and are
    marked with buffering too. Buffering marks only latencies whose stamps a hold can move (a throughput
    moves only by its last end's hold over the cell, within its tolerance here)."""
    from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess
    buffered = ReferenceConfig(ttft_ms=50, itl_ms=10, faults={"proxy_buffer": 1.0})
    with ReferenceProcess(ReferenceConfig(ttft_ms=50, itl_ms=10)) as plain, ReferenceProcess(buffered) as proxy:
        _bench(plain.url, str(store.path), "plain")
        _bench(proxy.url, str(store.path), "buffered")
    ids = {r.spec.get("name"): r.id for r in store.runs()}
    cells = {name: load_run(store, ids[name]).cells_of("default")[0] for name in ("plain", "buffered")}
    b = cells["buffered"]
    assert state_of(b).ok and {"median_itl_ms", "p99_itl_ms"} <= set(b.summary.figures.client_marks)
    causes = {k: m.cause for c in cells.values() for k, m in (c.summary.figures.client_marks or {}).items()}
    assert figure_state_of(b, "p99_itl_ms").reason == "buffering"
    assert all(k.endswith("_ms") for k, c in causes.items() if c == "buffering")
    assert b.summary.figures.held_upstream and b.summary.figures.burst_source == "upstream"
    assert figure_state_of(b, "mean_tpot_ms").reason == "buffering"
    doc, _ = compare(store, [ids["plain"], ids["buffered"]], "en", "T")
    rows, verdicts = _rows(doc, "verdicts"), [b for b in doc.blocks if isinstance(b, Table) and b.role == "verdicts"]
    judged = 0
    for m in FIGURES:
        row = next((r for r in rows if r[1] == t("en", f"vm.{m.name}") + f" {m.stat}"), None)
        if row is None:
            continue
        moved = any(figure_state_of(c, m.key).kind == "moved" for c in cells.values())
        refused = isinstance(row[-1], Cell) and row[-1].text.startswith("refused")
        assert refused == moved, (m.key, row[-1])
        judged += not refused
    assert judged >= 1
    notes = " ".join(n for tb in verdicts for n in tb.footnotes)
    assert "delivered in pieces upstream" in notes and "a token may have been held" in notes
    if "client_cpu" not in causes.values():
        assert "--workers" not in notes
