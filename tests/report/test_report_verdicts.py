"""Verdicts with 95 % intervals in `compare` and the report, from stored per-request records:
identical servers read "no difference detectable", a 5 % slower token interval is named with an
interval containing 5 %, --strict refuses when nothing is comparable, and each cell has a bottleneck."""

from __future__ import annotations

import random
import re

import pytest

from tokenbench.cli.main import main
from tokenbench.client.records import RequestRecord
from tokenbench.errors import MeasurementError
from tokenbench.metrics.summary import summarize
from tokenbench.report import markdown
from tokenbench.report.compare import compare
from tokenbench.report.document import Cell, Table
from tokenbench.spec.bench import SLO, Load
from tokenbench.store.rows import CellRow

from .report_fixtures import ENV, facts, profile

MS = 1_000_000
N, OUT, C = 160, 24, 4


def jittered(itl_ms: float, seed: int, ttft_ms: float = 20.0) -> list[RequestRecord]:
    """A closed loop of C streams: TTFT and every ITL jittered by 3 % (normal), N requests."""
    rng, out, free = random.Random(seed), [], [1_000 * MS] * C
    for i in range(N):
        slot = min(range(C), key=lambda k: free[k])
        start = free[slot]
        t = start + 20_000 + int(rng.gauss(ttft_ms, 0.03 * ttft_ms) * MS)
        times = [t]
        for _ in range(OUT - 1):
            t += int(rng.gauss(itl_ms, 0.03 * itl_ms) * MS)
            times.append(t)
        out.append(RequestRecord(index=i, phase="measure", input_len=64, output_len=OUT, intended_ns=start,
                                 sent_ns=start + 20_000, end_ns=t + 50_000, status=200, token_times_ns=times,
                                 token_counts=[1] * OUT, prompt_tokens=64, completion_tokens=OUT, cached_tokens=0,
                                 usage_source="server", finish_reason="length"))
        free[slot] = t + 60_000
    return out


def stored(store, run_id: str, itl_ms: float, seed: int, status: str = "ok", slo: SLO | None = None) -> str:
    spec = {"slo": slo.model_dump()} if slo else {}
    store.create_run("sweep", "http://127.0.0.1:8000", spec, ["tokenbench", "sweep"], ENV, run_id=run_id)
    cid = store.upsert_config(run_id, "ref", overrides={}, profile=profile(4), facts=facts(1 << 20), status="done")
    recs = jittered(itl_ms, seed)
    summary = summarize(recs, Load(concurrency=C, num_prompts=N), 64, OUT, slo)
    store.save_cell(run_id, cid, CellRow(key=f"64:{OUT}/c={C}", input_len=64, output_len=OUT, status=status,
                                         summary=summary, concurrency=C,
                                         message="" if status == "ok" else "8/160 requests failed", kv_demand=C * 88,
                                         kv_capacity=1 << 20), recs)
    store.set_run_status(run_id, "done")
    return run_id


def earlier(store, runs: int = 3) -> None:
    """Earlier runs of the same server, engine build and host: what a floor is learned from."""
    for k in range(runs):
        stored(store, f"R-E{k}", 10.0, 100 + k)


def verdict_rows(doc) -> dict[str, str]:
    out = {}
    for b in doc.blocks:
        if isinstance(b, Table) and b.role == "verdicts":
            for row in b.rows:
                if row[1] != "bottleneck":
                    v = row[-1]
                    out[row[1]] = v.text if isinstance(v, Cell) else v
    return out


def test_the_same_server_twice_is_no_difference_on_every_metric(store):
    a, b = stored(store, "R-A1", 10.0, 1), stored(store, "R-A2", 10.0, 2)
    doc, _ = compare(store, [a, b], "en", "T")
    rows = verdict_rows(doc)
    assert len(rows) == 14 and "goodput (req/s)" not in rows          # no SLO: no goodput
    assert all(v.startswith("no difference detectable at this sample size (smallest detectable: ") for v in
               rows.values()), rows
    md = markdown.render(doc)
    assert "R-A1:ref" in md and "verdict R-A2:ref vs R-A1:ref" in md


def test_single_runs_take_the_default_floor_and_say_so(store):
    """Two runs measured once with no earlier runs of that server: the default floor (tens of %) hides a 5 %
    difference their own intervals would call, and every verdict says which noise it took."""
    a, b = stored(store, "R-A", 10.0, 1), stored(store, "R-B", 10.5, 2)
    rows = verdict_rows(compare(store, [a, b], "en", "T")[0])
    assert all(v.startswith("no difference detectable") and v.endswith("[noise: default floor]")
               for v in rows.values()), rows


def test_a_5_percent_slower_token_interval_is_named_with_an_interval_containing_5(store):
    earlier(store)
    a, b = stored(store, "R-A", 10.0, 1), stored(store, "R-B", 10.5, 2)
    rows = verdict_rows(compare(store, [a, b], "en", "T")[0])
    for metric in ("TPOT (ms) mean", "TPOT (ms) p50", "ITL (ms) mean", "ITL (ms) p50"):
        m = re.fullmatch(r"R-A:ref faster by ([\d.]+)% \[([\d.]+)%, ([\d.]+)%\] "
                         r"\[noise: floor learned from earlier runs\]", rows[metric])
        assert m, (metric, rows[metric])
        x, lo, hi = map(float, m.groups())
        assert lo <= 5.0 <= hi and abs(x - 5.0) < 1.0, rows[metric]
    assert rows["TTFT (ms) p50"].startswith("no difference")              # TTFT is the same on both


def test_goodput_and_slo_attainment_with_an_slo(store):
    slo = SLO(tpot_ms=10.5)                # A (10 ms) meets it, B (10.5 ms) half the time
    for k in range(3):
        stored(store, f"R-E{k}", 10.0, 100 + k, slo=slo)
    a, b = stored(store, "R-A", 10.0, 1, slo=slo), stored(store, "R-B", 10.5, 2, slo=slo)
    doc, _ = compare(store, [a, b], "en", "T")
    rows = verdict_rows(doc)
    assert rows["goodput (req/s)"].startswith("R-A:ref faster by")
    md = markdown.render(doc)
    assert re.search(r"\| c=4 \| SLO attainment \| 100\.0% \| \d\d\.\d% \|", md)


def test_zh_verdicts_and_strict_refuses_when_no_cell_is_comparable(store):
    a, b = stored(store, "R-A", 10.0, 1), stored(store, "R-B", 10.5, 2, status="failed")
    doc, _ = compare(store, [a, b], "zh", "T")
    assert "拒绝：有单元不合格" in markdown.render(doc)
    with pytest.raises(MeasurementError, match="no comparable cell"):
        compare(store, [a, b], "en", "T", strict=True)


def test_compare_prints_a_terminal_table(store, db_path, tmp_path, capsys):
    earlier(store)
    a, b = stored(store, "R-A", 10.0, 1), stored(store, "R-B", 10.5, 2)
    assert main(["compare", a, b, "--db", str(db_path), "-o", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "R-A:ref faster by" in printed and "TPOT (ms) p50" in printed and "bottleneck" in printed
    assert (tmp_path / "compare.md").is_file()
    svgs = re.findall(r"<svg", (tmp_path / "compare.html").read_text())
    assert len(svgs) == 4                              # both runs on the same axes: three plots and the frontier


def _role(doc, role: str) -> list[Table]:
    return [b for b in doc.blocks if isinstance(b, Table) and b.role == role]


def _bounds(cell: Cell) -> tuple[float, float, float]:
    lo, hi = re.fullmatch(r"\[([\d.,]+), ([\d.,]+)\]◊?", cell.interval).groups()
    return tuple(float(v.replace(",", "")) for v in (cell.text, lo, hi))


def test_headline_tables_show_each_figure_with_its_interval_and_none_for_a_cell_not_ok(store):
    from tokenbench.judge.plausibility import check_run
    from tokenbench.judge.views import load_run
    from tokenbench.report import html_page
    from tokenbench.report.build import build_report
    run = load_run(store, stored(store, "R-A", 10.0, 1))
    doc = build_report(run, "en", check_run(run), "T")
    (scaling,) = _role(doc, "scaling")
    row = scaling.rows[0]
    for col in (2, 3, 5, 6, 7, 8, 9):                # req/s, out tok/s, TTFT mean/p99, TPOT mean/p99, E2E mean
        v, lo, hi = _bounds(row[col])
        assert lo <= v <= hi and lo < hi, (scaling.headers[col], row[col])
    assert 9.9 < _bounds(row[7])[1] < _bounds(row[7])[2] < 10.2          # TPOT mean of a 10 ms token interval
    # 160 requests: no order statistic is a 97.5 % upper bound of a p99 (0.99^160 > 0.025), so it is marked
    assert row[6].interval.endswith("◊") and row[8].interval.endswith("◊") and not row[7].interval.endswith("◊")
    assert '<span class="iv">[' in html_page.render(doc)                  # HTML: the interval under the figure
    bad = load_run(store, stored(store, "R-B", 10.0, 1, status="failed"))
    (scaling,) = _role(build_report(bad, "en", check_run(bad), "T"), "scaling")
    assert all(c.interval == "" and c.mark == "✗" for c in scaling.rows[0][2:10])


def test_compare_side_by_side_tables_carry_intervals(store):
    a, b = stored(store, "R-A", 10.0, 1), stored(store, "R-B", 10.5, 2)
    doc, _ = compare(store, [a, b], "en", "T")
    for table in _role(doc, "compare"):
        for cell in table.rows[0][1:3]:
            v, lo, hi = _bounds(cell)
            assert lo <= v <= hi


def test_compare_footnotes_name_the_run_of_a_marked_cell(store):
    a, b = stored(store, "R-A", 10.0, 1), stored(store, "R-B", 10.5, 2, status="failed")
    doc, _ = compare(store, [a, b], "en", "T")
    notes = [n for table in _role(doc, "verdicts") + _role(doc, "compare") for n in table.footnotes
             if not n.startswith("◊")]                  # the legend of unreliable p99s names no cell
    assert notes and all(n.startswith("✗ R-B:ref 64/24 c=4:") for n in notes), notes
