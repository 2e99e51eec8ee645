"""Cells that are not ok (failed, invalid, tolerated length mismatch) never show as plain figures: every
figure is marked with a footnote saying why (en and zh), plots draw them hollow, ratios on them are
refused unless asked, exports carry the verdict, and a repeat that is not ok never enters a mean."""

from __future__ import annotations

import csv
import io
import re

from tokenbench.formats.export import to_csv
from tokenbench.judge.cells import ok_repeats, state_of, value_of
from tokenbench.judge.intervals import Judging
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.status import judge
from tokenbench.judge.views import load_run
from tokenbench.metrics.cell_summary import CellSummary, Metric
from tokenbench.metrics.summary import summarize
from tokenbench.report import html_page, markdown
from tokenbench.report.build import build_report
from tokenbench.report.compare import compare
from tokenbench.report.document import Cell, Table
from tokenbench.report.i18n import t
from tokenbench.spec.bench import Load
from tokenbench.store.rows import CellRow

from .report_fixtures import ENV, facts, profile, records

RUN = "20260104-000000-allbad"
FIGURE_TABLES = ("baseline", "scaling", "matrix", "configcmp", "compare", "latency", "repeats", "intervals",
                 "verdicts")
VERDICTS = ((1, "failed", "8/8 requests failed (reset=8); first: connection reset (raise --max-error-rate ...)"),
            (2, "invalid", "client overloaded: event-loop lag p99 80.0 ms > 50 ms"),
            (4, "ok", ""))            # c=4 is "ok" but with a tolerated length mismatch


def _summary(c: int, slots: int, mismatch: bool) -> CellSummary:
    recs = records(c, 128, 32, slots)
    s = summarize(recs, Load(concurrency=c, num_prompts=len(recs)), 128, 32)
    return s.model_copy(update={"length_mismatches": 2}) if mismatch else s


def stored_bad_run(store, repeats: int = 1) -> str:
    """Two configs, one pair, c = 1, 2, 4: no cell is ok (see VERDICTS)."""
    store.create_run("sweep", "http://127.0.0.1:8000", {}, ["tokenbench", "sweep"], ENV, run_id=RUN)
    for name, slots in (("a", 2), ("b", 4)):
        cid = store.upsert_config(RUN, name, overrides={"slots": slots}, profile=profile(slots), facts=facts(4096),
                                  status="done")
        for c, status, message in VERDICTS:
            for rep in range(repeats):
                cell = CellRow(key=f"128:32/c={c}", input_len=128, output_len=32, status=status,
                               summary=_summary(c, slots, status == "ok"), repeat=rep, concurrency=c, message=message,
                               kv_demand=c * 160, kv_capacity=4096)
                store.save_cell(RUN, cid, cell, records(c, 128, 32, slots))
    store.set_run_status(RUN, "done")
    return RUN


def _figures(table: Table):
    """The cell figures of a table (not the matrix's last column: a config fact, the largest fitting c)."""
    skip = {i for i, h in enumerate(table.headers) if h in (t("en", "col.max_fit"), t("zh", "col.max_fit"))}
    for row in table.rows:
        for i, c in enumerate(row):
            if i >= table.left and i not in skip:
                yield c


def unmarked_figures(doc) -> list[str]:
    """Entries of figure tables that show a number but carry no not-ok mark."""
    out = []
    for b in doc.blocks:
        if isinstance(b, Table) and b.role in FIGURE_TABLES:
            for c in _figures(b):
                text = c.text if isinstance(c, Cell) else c
                if re.search(r"\d", text) and not (isinstance(c, Cell) and c.mark):
                    out.append(f"{b.role}: {text}")
    return out


def test_judge_names_each_kind():
    assert judge("ok", "", CellSummary()).ok and judge("ok", "", CellSummary()).mark == ""
    assert judge("failed", "3/16 requests failed (timeout=3); first ...", CellSummary()).kind == "errors"
    assert judge("failed", "2/16 requests had the wrong length: ...", CellSummary()).kind == "length"
    assert judge("failed", "server died during the cell: exit 1", CellSummary()).kind == "failed"
    assert judge("invalid", "client overloaded", CellSummary()).mark == "‡"
    tolerated = judge("ok", "", CellSummary(length_mismatches=3, num_prompts=16))
    assert (tolerated.kind, tolerated.mark, tolerated.reason) == ("mismatch", "≠", "3/16")
    assert judge("weird", "x", CellSummary()).kind == "unknown"


def test_report_of_an_all_bad_sweep_has_no_unmarked_figure(store):
    stored_bad_run(store)
    run = load_run(store, RUN)
    for lang, word in (("en", "the client could not keep up"), ("zh", "客户端跟不上")):
        doc = build_report(run, lang, check_run(run), "T")
        roles = {b.role for b in doc.blocks if isinstance(b, Table)}
        assert {"baseline", "scaling", "matrix", "configcmp"} <= roles
        assert unmarked_figures(doc) == []
        md, html = markdown.render(doc), html_page.render(doc)
        for text in (md, html):
            assert word in text and "✗" in text and "≠" in text and "‡" in text
        assert "n/a" in md                        # config-comparison ratios are refused
        # every scaling row of the markdown shows the mark next to each of its figures
        rows = [line for line in md.splitlines() if line.startswith("| c=") and "/ 4,096" in line]
        assert rows and all(line.count("✗") + line.count("‡") + line.count("≠") >= 9 for line in rows)
        assert html.count('class="notok"') >= 30 and html.count("<circle class=\"notok\"") >= 6


def test_plots_draw_not_ok_cells_hollow_and_do_not_join_them(store):
    stored_bad_run(store)
    run = load_run(store, RUN)
    doc = build_report(run, "en", check_run(run), "T")
    svg = next(f.svg for f in doc.figures() if f.name == "throughput")
    assert svg.count('class="notok"') == 6 and "<polyline" not in svg
    assert "Hollow points are cells that are not ok" in markdown.render(doc)


def test_compare_refuses_ratios_on_not_ok_cells_unless_asked(store):
    stored_bad_run(store)
    for lang in ("en", "zh"):
        doc, _ = compare(store, [f"{RUN}:a", f"{RUN}:b"], lang, "T")
        assert unmarked_figures(doc) == []
        md = markdown.render(doc)
        assert "n/a" in md and not re.search(r"\d\.\d\dx", md)
    doc, _ = compare(store, [f"{RUN}:a", f"{RUN}:b"], "en", "T", judging=Judging(allow_not_ok=True))
    md = markdown.render(doc)
    assert re.search(r"\d\.\d\dx✗", md) and unmarked_figures(doc) == []


def test_not_ok_repeats_never_enter_a_mean(store):
    stored_bad_run(store, repeats=2)
    run = load_run(store, RUN)
    cell = run.cell_at("a", (128, 32), 1)
    assert len(cell.repeats) == 2 and ok_repeats(cell) == []
    assert value_of(cell, Metric("output_throughput")) is None and value_of(cell, Metric("ttft")) is None
    assert cell.summary.num_prompts == 4 and not state_of(cell).ok      # counts summed, verdict kept
    doc = build_report(run, "en", check_run(run), "T")
    assert unmarked_figures(doc) == []


def test_one_ok_repeat_is_the_mean_and_an_invalid_one_is_left_out(store):
    store.create_run("sweep", "http://x", {}, ["tokenbench"], ENV, run_id=RUN)
    cid = store.upsert_config(RUN, "a", overrides={}, profile=profile(2), facts=facts(4096), status="done")
    sums = [_summary(2, slots, False) for slots in (1, 2)]
    for rep, (status, s) in enumerate(zip(("ok", "invalid"), sums, strict=True)):
        store.save_cell(RUN, cid, CellRow(key="128:32/c=2", input_len=128, output_len=32, status=status, summary=s,
                                          repeat=rep, concurrency=2, kv_demand=320, kv_capacity=4096),
                        records(2, 128, 32, 1))
    cell = load_run(store, RUN).cell_at("a", (128, 32), 2)
    assert state_of(cell).ok and cell.summary.output_throughput == sums[0].output_throughput
    assert sums[1].output_throughput != sums[0].output_throughput


def test_export_rows_carry_the_verdict(store):
    stored_bad_run(store)
    rows = list(csv.DictReader(io.StringIO(to_csv(store, RUN, requests=False))))
    verdicts = {(r["config"], r["concurrency"]): (r["verdict"], r["verdict_mark"]) for r in rows}
    assert verdicts[("a", "1")] == ("errors", "✗") and verdicts[("a", "2")] == ("invalid", "‡")
    assert verdicts[("b", "4")] == ("mismatch", "≠")
    assert list(rows[0])[:11][-3:] == ["verdict", "verdict_mark", "verdict_reason"]


def test_the_terminal_table_of_bench_and_sweep_marks_cells_that_are_not_ok(capsys):
    """The summary table printed after bench/sweep takes the report's verdict: no plain figure of a cell
    that is not ok, and a line that says why."""
    from tokenbench.cli import progress
    from tokenbench.study.run import Outcome
    ok = {"completed": 16, "failed": 0, "output_throughput": 41.25, "mean_ttft_ms": 401.5}
    invalid = {"completed": 16, "failed": 0, "output_throughput": 5.51, "mean_ttft_ms": 2219.0}
    failed = {"completed": 8, "failed": 8, "output_throughput": 7.75, "mean_ttft_ms": 733.5}
    cells = [CellRow(key="128:32/c=4", input_len=128, output_len=32, status="ok", summary=CellSummary(**ok),
                     config="a"),
             CellRow(key="128:32/c=1", input_len=128, output_len=32, status="invalid", summary=CellSummary(**invalid),
                     config="a", message="client overloaded: event-loop lag p99 8.5 ms"),
             CellRow(key="128:32/c=8", input_len=128, output_len=32, status="failed", summary=CellSummary(**failed),
                     config="a", message="8/16 requests failed (timeout=8)")]
    progress.matrix(Outcome(run_id="R", store=None, cells=cells, problems=[]))
    printed = capsys.readouterr().out
    assert "41.25 " in printed and "41.25‡" not in printed                         # ok: plain
    assert "5.51‡" in printed and "2,219‡" in printed and "5.51 " not in printed      # invalid: marked
    assert "7.75✗" in printed and "733.50✗" in printed and "7.75 " not in printed     # failed: marked
    assert "‡ 128:32/c=1: invalid, the client could not keep up" in printed
    assert "event-loop lag p99 8.5 ms" in printed and "8/16 requests failed (timeout=8)" in printed
