"""Repeated cells: tables show the mean over the ok repeats, a Repeatability section their spread,
and the plausibility check sees every repeat."""

from __future__ import annotations

import statistics

from tokenbench.judge.cells import ok_repeats, value_of
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run, spread_of
from tokenbench.metrics.cell_summary import Metric
from tokenbench.metrics.summary import summarize
from tokenbench.report import render
from tokenbench.report.build import build_report
from tokenbench.spec.bench import Load
from tokenbench.store.rows import CellRow

from .report_fixtures import ENV, facts, profile, records

OUTPUT = Metric("output_throughput")
RUN = "20260103-000000-repeat"


def stored_repeats(store, slots_per_repeat=(1, 2, 4), failed=(2,)) -> list[dict]:
    """One cell (128:32 at c=4) measured once per entry of `slots_per_repeat` (so the numbers differ);
    the repeats listed in `failed` are stored as failed cells."""
    store.create_run("sweep", "http://127.0.0.1:8000", {"repeats": len(slots_per_repeat)}, ["tokenbench"], ENV,
                     run_id=RUN)
    cid = store.upsert_config(RUN, "base", overrides={}, profile=profile(2), facts=facts(4096), status="done")
    summaries = []
    for rep, slots in enumerate(slots_per_repeat):
        recs = records(4, 128, 32, slots, fail=rep in failed)
        summary = summarize(recs, Load(concurrency=4, num_prompts=len(recs)), 128, 32)
        summaries.append(summary)
        store.save_cell(RUN, cid, CellRow(key="128:32/c=4", input_len=128, output_len=32,
                                          status="failed" if rep in failed else "ok", summary=summary, repeat=rep,
                                          concurrency=4, message="too many errors" if rep in failed else "",
                                          kv_demand=640, kv_capacity=4096), recs)
    store.set_run_status(RUN, "done")
    return summaries


def test_tables_show_the_mean_of_the_ok_repeats(store):
    summaries = stored_repeats(store)
    run = load_run(store, RUN)
    [cell] = run.cells_of("base")
    ok = [summaries[0], summaries[1]]
    assert len(cell.repeats) == 3 and [c.repeat for c in ok_repeats(cell)] == [0, 1]
    assert cell.status == "ok"
    for m in (OUTPUT, Metric("ttft"), Metric("tpot", "p99")):
        assert value_of(cell, m) == statistics.fmean(m.of(s) for s in ok)
    assert value_of(cell, OUTPUT) != summaries[0].output_throughput     # not the first repeat
    spread = spread_of(cell, OUTPUT)
    vals = [s.output_throughput for s in ok]
    assert (spread.n, spread.lo, spread.hi) == (2, min(vals), max(vals))
    assert spread.cv == statistics.stdev(vals) / statistics.fmean(vals)
    # failures are counted over every repeat, the failed one included
    assert cell.summary.to_dict()["failed_by_kind"] == {"timeout": 1}


def test_report_has_a_repeatability_section_and_marks_noisy_cells(store, tmp_path):
    stored_repeats(store)
    run = load_run(store, RUN)
    md = render.write(build_report(run, "en", check_run(run), "TEST"), tmp_path, ["md"])[0].read_text()
    assert "Repeatability" in md and "mean over the repeats that measured ok" in md
    row = next(line for line in md.splitlines() if line.startswith("| base | 128/32 c=4 | 2/3"))
    cv = spread_of(run.cells_of("base")[0], OUTPUT).cv
    assert (cv > 0.05) == ("†" in row.split("|")[6])
    # the failed repeat is listed on its own, named by its number
    assert "128/32 c=4 #3" in md and "too many errors" in md
    zh = render.write(build_report(run, "zh", check_run(run), "TEST"), tmp_path / "zh", ["md"])[0].read_text()
    assert "重复测量的一致性" in zh


def test_identical_repeats_have_zero_spread_and_no_mark(store, tmp_path):
    stored_repeats(store, slots_per_repeat=(2, 2), failed=())
    run = load_run(store, RUN)
    [cell] = run.cells_of("base")
    assert spread_of(cell, OUTPUT).cv == 0
    md = render.write(build_report(run, "en", check_run(run), "TEST"), tmp_path, ["md"])[0].read_text()
    row = next(line for line in md.splitlines() if line.startswith("| base | 128/32 c=4 | 2/2"))
    assert "†" not in row and "0.0%" in row


def test_plausibility_checks_every_repeat(store):
    stored_repeats(store)
    run = load_run(store, RUN)
    [chk] = check_run(run)
    assert chk.cells == 3
