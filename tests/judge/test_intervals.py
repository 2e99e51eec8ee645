"""judge/intervals.py: a report's intervals from the stored records, by the rules of docs/metrics.md ("Intervals and
verdicts"): each metric's samples (per request; ITL's gaps grouped by request; a rate's K bins of the measured
window, from the first intended start to the last end), the ok repeats only, a p99 judged by the requests the
repeats completed, a rate's interval scaled onto the stored figure, an interval that does not hold the stated
figure (to 0.1 %) left out, the SLO read from the run's spec, and a verdict refused on a cell or figure not
usable, widened by the larger drift."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tokenbench.client.records import RequestRecord
from tokenbench.judge import intervals as iv
from tokenbench.judge.views import ConfigInfo, RunData
from tokenbench.metrics import noise
from tokenbench.metrics import request as rm
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.cell_summary import CellSummary, Metric
from tokenbench.metrics.summary import summarize
from tokenbench.metrics.summary_groups import FigureHealth, FigureMark
from tokenbench.spec.bench import SLO, Load
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store.rows import CellRow

MS = 1_000_000


def records(seed: int, n: int = 40, ttft_ms: float = 100.0, itl_ms: float = 10.0, failed: int = 2,
            start: int = 0) -> list[RequestRecord]:
    """n requests at concurrency 4 (ttft and gaps drawn around the given ones), the first `failed` failing."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        sent = start + (i // 4) * 400 * MS + rng.randrange(MS)
        first = sent + int(ttft_ms * MS * rng.uniform(0.8, 1.2))
        times = [first]
        for _ in range(rng.randrange(1, 8)):
            times.append(times[-1] + int(itl_ms * MS * rng.uniform(0.5, 1.5)))
        counts = [rng.choice([1, 1, 2]) for _ in times]
        bad = "timeout" if i < failed else None
        out.append(RequestRecord(index=i, phase="measure", input_len=16, output_len=sum(counts),
                                 intended_ns=sent - rng.randrange(2 * MS), sent_ns=sent,
                                 end_ns=times[-1] + MS, status=200, token_times_ns=times if not bad else times[:1],
                                 token_counts=counts if not bad else counts[:1], error_kind=bad))
    return out


def cell(cid: int, recs: list[RequestRecord], status: str = "ok", slo: SLO | None = None,
         repeats: tuple[CellRow, ...] = (), summary: CellSummary | None = None) -> CellRow:
    s = summary or summarize(recs, Load(concurrency=4, num_prompts=max(1, len(recs))), 16, 8, slo)
    return CellRow(key="16:8/c=4", input_len=16, output_len=8, status=status, summary=s, concurrency=4, id=cid,
                   config="default", repeats=repeats)


def run(cells: list[CellRow], store: dict[int, list[RequestRecord]], spec: dict | None = None) -> RunData:
    config = ConfigInfo(id=1, name="default", overrides={}, profile=None,
                        facts=ServerFacts(engine="reference"), status="done", message="")
    return RunData(id="r", created_at="2026-03-01", kind="bench", status="done", target="http://x",
                   tool_version="test", spec=spec or {}, command=[], environment={}, message="", configs=[config],
                   cells=cells, reader=lambda cid: store[cid])


# ---- samples -----------------------------------------------------------------------------------
def test_latency_samples_are_the_ok_requests_per_request_values():
    recs = records(1)
    ok = [r for r in recs if r.ok]
    assert iv.samples(recs, "ttft", None) == [rm.ttft_ms(r) for r in ok]
    assert iv.samples(recs, "e2el", None) == [rm.e2el_ms(r) for r in ok]
    assert iv.samples(recs, "tpot", None) == [t for r in ok if (t := rm.tpot_ms(r)) is not None]
    itl = iv.samples(recs, "itl", None)
    assert isinstance(itl, u.Clusters)
    want = [rm.itl_ms(r) for r in ok if len(r.token_times_ns) > 1]
    assert list(itl.sizes) == [len(g) for g in want] and list(itl.values) == [g for w in want for g in w]


def _rate_reference(recs: list[RequestRecord], name: str, slo: SLO | None) -> list[float]:
    ok = [r for r in recs if r.ok]
    if name == "output_throughput":
        events = [(t, float(n)) for r in ok for t, n in zip(r.token_times_ns, r.token_counts, strict=True)]
    elif name == "request_throughput":
        events = [(r.end_ns, 1.0) for r in ok]
    else:
        events = [(r.end_ns, 1.0) for r in ok if rm.meets_slo(r, slo)]
    start, end = min(r.intended_ns for r in recs), max(r.end_ns for r in recs)
    count = max(5, min(30, len(recs) // 4))
    width = (end - start) / count
    out = [0.0] * count
    for when, amount in events:
        out[min(count - 1, int((when - start) // width))] += amount
    return [x / width * 1e9 for x in out]


@pytest.mark.parametrize("n", [8, 40, 200])
@pytest.mark.parametrize("name", ["output_throughput", "request_throughput", "request_goodput"])
def test_rate_samples_are_k_bins_of_the_window_from_the_first_intended_start_to_the_last_end(name, n):
    recs = records(2, n=n)
    slo = SLO(ttft_ms=105.0)
    got = iv.samples(recs, name, slo)
    assert got == pytest.approx(_rate_reference(recs, name, slo), rel=1e-9)
    assert len(got) == max(5, min(30, n // 4))


def test_goodput_has_no_samples_without_a_per_request_slo_and_nothing_has_without_requests():
    recs = records(3)
    assert iv.samples(recs, "request_goodput", None) == []
    assert iv.samples(recs, "request_goodput", SLO(limits=["ttft:p99<=100"])) == []
    assert iv.samples([], "output_throughput", None) == [] and iv.samples([], "ttft", None) == []


# ---- a cell's interval -------------------------------------------------------------------------
@pytest.mark.parametrize("metric", [Metric("ttft", "mean"), Metric("ttft", "p90"), Metric("itl", "p50"),
                                    Metric("tpot", "mean"), Metric("e2el", "p99")])
def test_a_latencys_interval_is_that_of_the_ok_repeats_samples(metric):
    a, b, c = records(4), records(5), records(6)
    reps = (cell(1, a), cell(2, b), cell(3, c, status="failed"))
    merged = cell(1, a, repeats=reps, summary=reps[0].summary.model_copy(
        update={metric.key: float(np.mean([u.point([iv.samples(x, metric.name, None)], metric.stat) for x in (a, b)]))}))
    book = iv.Book(run([merged], {1: a, 2: b, 3: c}))
    want = u.interval([iv.samples(a, metric.name, None), iv.samples(b, metric.name, None)], metric.stat,
                      requests=int(reps[0].summary.completed + reps[1].summary.completed))
    assert book.interval(merged, metric) == want
    assert book.interval(merged, metric) is book.interval(merged, metric)        # computed once


def test_a_p99_is_judged_by_the_requests_the_repeats_completed_not_the_reservoir():
    recs = records(7, n=60, failed=0)
    metric = Metric("ttft", "p99")
    few = cell(1, recs)
    many = cell(1, recs, summary=few.summary.model_copy(update={"completed": 100}))
    edge = cell(1, recs, summary=few.summary.model_copy(update={"completed": 99}))
    assert iv.Book(run([few], {1: recs})).interval(few, metric).unreliable
    got = iv.Book(run([many], {1: recs})).interval(many, metric)
    assert got.unreliable == u.within(np.asarray(iv.samples(recs, "ttft", None)), "p99").unreliable
    assert iv.Book(run([edge], {1: recs})).interval(edge, metric).unreliable


def test_a_repeat_that_states_no_count_adds_no_request_to_the_p99s_judgement():
    """Two ok repeats, one stating 99 completed requests and one stating none: 99 in all, under 100: marked."""
    recs = records(16, n=60, failed=0)
    one = cell(1, recs, summary=cell(1, recs).summary.model_copy(update={"completed": 99}))
    untold = cell(2, recs, summary=cell(2, recs).summary.model_copy(update={"completed": None}))
    merged = cell(1, recs, repeats=(one, untold), summary=one.summary)
    assert iv.Book(run([merged], {1: recs, 2: recs})).interval(merged, Metric("ttft", "p99")).unreliable


def test_a_p99_over_enough_samples_is_judged_by_the_stated_count_whatever_the_samples():
    """600 requests read back (the p99's band well inside the samples): a cell stating 99 completed is marked all
    the same; two repeats stating 99 and none are 99 in all (marked), 100 and none 100 (judged by the samples alone:
    not marked)."""
    recs = records(17, n=600, failed=0)
    metric = Metric("ttft", "p99")
    assert not u.within(np.asarray(iv.samples(recs, "ttft", None)), "p99").unreliable
    base = cell(1, recs).summary
    stated = cell(1, recs, summary=base.model_copy(update={"completed": 99}))
    assert iv.Book(run([stated], {1: recs})).interval(stated, metric).unreliable
    untold = cell(2, recs, summary=base.model_copy(update={"completed": None}))
    for told, marked in ((99, True), (100, False)):
        one = cell(1, recs, summary=base.model_copy(update={"completed": told}))
        merged = cell(1, recs, repeats=(one, untold), summary=one.summary)
        assert iv.Book(run([merged], {1: recs, 2: recs})).interval(merged, metric).unreliable is marked


@pytest.mark.parametrize("stat", ["mean", "p50", "p99"])
def test_a_job_figures_interval_is_that_of_each_complete_jobs_figure_over_the_jobs(stat):
    from tokenbench.metrics.summary_groups import JobFigures
    recs = records(18, n=40, failed=0)
    each = [900.0, 1200.0, 1100.0, 950.0, 1500.0]
    jobs = JobFigures(started=6, complete=5, incomplete=1, each_completion_ms=each)
    c = cell(1, recs, summary=cell(1, recs).summary.model_copy(update={"jobs": jobs}))
    got = iv.Book(run([c], {1: recs})).interval(c, Metric("job", stat))
    assert got == u.interval([each], stat, requests=5) and got.n == 5                # over the 5 jobs, not 40 requests


@pytest.mark.parametrize("name", ["output_throughput", "request_throughput"])
def test_a_rates_interval_is_scaled_onto_the_stored_figure(name):
    recs = records(8, failed=0)
    metric = Metric(name)
    base = cell(1, recs)
    groups = [iv.samples(recs, name, None)]
    point = u.point(groups, "mean")
    stored = point * 1.0004                                   # the server's token count, 0.04 % above the chunks'
    c = cell(1, recs, summary=base.summary.model_copy(update={name: stored}))
    book = iv.Book(run([c], {1: recs}))
    want = u.interval(groups, "mean", requests=len(recs)).scaled(stored / point)
    got = book.interval(c, metric)
    assert (got.value, got.lo, got.hi, got.se) == pytest.approx((want.value, want.lo, want.hi, want.se), rel=1e-12)
    assert book.scale(c, metric) == pytest.approx(stored / point, rel=1e-12)
    assert book.scale(c, Metric("ttft")) == 1.0


def test_a_rate_stored_as_0_or_missing_is_not_scaled():
    recs = records(9, failed=0)
    c = cell(1, recs, summary=cell(1, recs).summary.model_copy(update={"request_throughput": 0.0}))
    assert iv.Book(run([c], {1: recs})).scale(c, Metric("request_throughput")) == 1.0


@pytest.mark.parametrize(("factor", "shown"), [(1.0, True), (1.0009, True), (1.0011, False), (0.9989, False)])
def test_an_interval_that_does_not_hold_the_stated_figure_to_0_1_percent_is_not_shown(factor, shown):
    recs = records(10, failed=0)
    metric = Metric("ttft", "mean")
    plain = iv.Book(run([cell(1, recs)], {1: recs})).interval(cell(1, recs), metric)
    stated = plain.hi * factor if factor >= 1 else plain.lo * factor
    c = cell(1, recs, summary=cell(1, recs).summary.model_copy(update={"mean_ttft_ms": stated}))
    assert (iv.Book(run([c], {1: recs})).interval(c, metric) is not None) == shown


def test_holding_the_figure_has_a_slack_of_0_1_percent_of_it():
    one = u.Interval(value=10.0, lo=9.0, hi=11.0, n=5)
    assert iv._holds(one, 11.011) and not iv._holds(one, 11.0111)
    assert iv._holds(one, 8.9911) and not iv._holds(one, 8.9909)
    assert iv._holds(one, None) and iv._holds(one, math.nan)
    tiny = u.Interval(value=0.0, lo=0.0, hi=0.0, n=5)
    assert iv._holds(tiny, 1e-12) and not iv._holds(tiny, 1e-11)
    negative = u.Interval(value=-10.0, lo=-11.0, hi=-9.0, n=5)
    assert iv._holds(negative, -11.011) and not iv._holds(negative, -11.012)
    edge = u.Interval(value=1001.0, lo=1001.0, hi=1002.0, n=5)       # 1000 lies exactly its slack (1.0) below
    assert iv._holds(edge, 1000.0) and iv._holds(u.Interval(value=998.0, lo=998.0, hi=999.0, n=5), 1000.0)


def test_a_cell_without_ok_repeats_or_samples_has_no_interval():
    recs = records(11)
    failed = cell(1, recs, status="failed")
    assert iv.Book(run([failed], {1: recs})).interval(failed, Metric("ttft")) is None
    empty = cell(2, [])
    assert iv.Book(run([empty], {2: []})).interval(empty, Metric("ttft")) is None
    assert iv.Book(run([empty], {2: []})).groups(empty, Metric("itl")) == []


def test_a_merged_cell_is_keyed_by_its_repeats():
    a, b = records(12), records(13, ttft_ms=300.0)
    one, two = cell(5, a), cell(6, b)
    merged = cell(5, a, repeats=(one, two), summary=one.summary.model_copy(update={"mean_ttft_ms": 200.0}))
    book = iv.Book(run([merged], {5: a, 6: b}))
    assert iv._ids(merged) == (5, 6) and iv._ids(one) == (5,)
    assert book.groups(merged, Metric("ttft")) != book.groups(one, Metric("ttft"))
    assert book.records(one) is book.records(one)


# ---- the SLO and the verdict -------------------------------------------------------------------
@pytest.mark.parametrize(("spec", "want"), [
    ({"slo": {"ttft_ms": 50.0}}, SLO(ttft_ms=50.0)),
    ({"bench": {"slo": {"e2el_ms": 9.0}}}, SLO(e2el_ms=9.0)),
    ({"slo": {"ttft_ms": 50.0}, "bench": {"slo": {"e2el_ms": 9.0}}}, SLO(ttft_ms=50.0)),
    ({"slo": {}}, None), ({"slo": {"ttft_ms": -1}}, None), ({"slo": "fast"}, None), ({}, None)])
def test_the_slo_is_read_from_the_runs_spec(spec, want):
    assert iv._slo(run([], {}, spec)) == want


def _verdict_cells(shift: float, marked: bool = False, status: str = "ok") -> tuple[iv.Book, CellRow, iv.Book, CellRow]:
    a_recs, b_recs = records(14, n=120, failed=0), records(15, n=120, failed=0, ttft_ms=100.0 * (1 + shift))
    a, b = cell(1, a_recs), cell(2, b_recs, status=status)
    if marked:
        mark = FigureMark(cause="host_contention", bound=9.0, tolerance=1.0)
        b = cell(2, b_recs, summary=b.summary.with_(FigureHealth(client_marks={"mean_ttft_ms": mark})))
    return iv.Book(run([a], {1: a_recs})), a, iv.Book(run([b], {2: b_recs})), b


def _quiet(run: RunData, cell: CellRow, metric: Metric, exclude=()) -> noise.Noise:
    """A floor of no between-run noise, known exactly: each side's own interval alone."""
    return noise.Noise(0.0, math.inf, "default", 0)


QUIET = iv.Judging(floor=_quiet)


def test_a_verdict_is_the_intervals_verdict_widened_by_the_larger_drift_and_the_between_run_noise():
    ab, a, bb, b = _verdict_cells(0.3)
    metric = Metric("ttft", "mean")
    got = iv.verdict(ab, a, bb, b, metric, iv.Judging(min_effect=0.05))
    floor = max(u.drift(ab.groups(a, metric), "mean"), u.drift(bb.groups(b, metric), "mean"))
    assert floor > 0
    each = ab.interval(a, metric), bb.interval(b, metric)
    between = iv.between(((ab, a), (bb, b)), metric, iv.default_floor)
    assert between.source == "default" and between.variance > 0      # each side measured once
    assert got == u.verdict(*each, False, 0.05, floor, between) and got.winner is None
    quiet = iv.verdict(ab, a, bb, b, metric, iv.Judging(min_effect=0.05, floor=_quiet))
    assert quiet == u.verdict(*each, False, 0.05, floor, iv.between(((ab, a), (bb, b)), metric, _quiet))
    assert quiet.winner == "A" and quiet.hi - quiet.lo < got.hi - got.lo


def test_a_verdict_is_refused_on_a_cell_not_ok_or_a_moved_figure_unless_allowed():
    metric = Metric("ttft", "mean")
    assert iv.verdict(*_verdict_cells(0.3, status="failed"), metric, QUIET) is None
    moved = _verdict_cells(0.3, marked=True)
    assert iv.verdict(*moved, metric, QUIET) is None
    assert iv.verdict(*moved, metric, iv.Judging(allow_client_lag=True, floor=_quiet)).winner == "A"
    assert iv.verdict(*moved, Metric("ttft", "p50"), QUIET).winner == "A"          # the other figures stay usable


def test_a_verdict_needs_an_interval_on_both_sides():
    ab, a, _, _ = _verdict_cells(0.0)
    empty = cell(9, [])
    assert iv.verdict(ab, a, iv.Book(run([empty], {9: []})), empty, Metric("ttft")) is None


def test_the_judged_figures_and_the_default_judging():
    assert iv.FIGURES[:3] == (Metric("request_throughput"), Metric("output_throughput"), Metric("request_goodput"))
    assert iv.FIGURES[3:6] == tuple(Metric("ttft", s) for s in ("mean", "p50", "p99"))
    assert [m.name for m in iv.FIGURES[3:15]] == [n for n in ("ttft", "tpot", "itl", "e2el") for _ in range(3)]
    assert len(iv.FIGURES) == 20 and len(set(iv.FIGURES)) == 20
    assert iv.Judging() == iv.Judging(False, u.MIN_EFFECT, False, iv.default_floor)
