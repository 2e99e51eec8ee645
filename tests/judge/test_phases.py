"""judge/phases.py against the rule docs/metrics.md states ("Where the time went", `compare`): each phase's mean and
its t interval from the measured ok joined requests, B - A with Welch's interval (scipy's Welch-Satterthwaite
degrees of freedom), moved only when the interval excludes 0 and the change is at least --min-effect of A's
time the phase is part of; a cell of one joined request compares (no interval: never moved); the pairs of
cells two columns' phases compare."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tokenbench.client.records import RequestRecord
from tokenbench.judge import phases as ph
from tokenbench.judge.fairness import Column
from tokenbench.judge.views import ConfigInfo, RunData
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.server import ServerTiming, attach
from tokenbench.metrics.summary_groups import LAST_PHASES, PHASES, TTFT_PHASES, PhaseLedger
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store.rows import CellRow

MS = 1_000_000
ms = st.integers(0, 40_000).map(lambda q: q / 40)          # 0 to 1,000 ms in 25 us steps (no near-ties for scipy)
samples = st.lists(ms, min_size=1, max_size=40)


def welch_df(a: list[float], b: list[float]) -> float:
    with warnings.catch_warnings():           # a side of equal values: exact, though scipy warns of precision
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_ind(a, b, equal_var=False).df)


def welch_dfs(a: list[float], b: list[float]) -> set[int]:
    """The whole degrees of freedom Welch's (rounded down, at least 1) may be: both sides of a value that rounding
    leaves a hair below or above a whole number (6.9999999 for 7)."""
    df = welch_df(a, b)
    return {max(1, int(df - 1e-6)), max(1, int(df + 1e-6))}


# ---- one phase's change ------------------------------------------------------------------------
@settings(deadline=None)
@given(samples, samples, st.floats(0.0, 0.2), st.floats(0.0, 2000.0))
def test_a_change_is_b_minus_a_with_welchs_interval_and_the_min_effect_rule(a, b, min_effect, scale):
    c = ph.change("queue", a, b, scale, min_effect)
    ia, ib = u.within(np.asarray(a), "mean"), u.within(np.asarray(b), "mean")
    assert c.phase == "queue" and c.a == ia and c.b == ib
    assert c.delta == pytest.approx(np.mean(b) - np.mean(a), rel=1e-9, abs=1e-9)
    if len(a) < 2 or len(b) < 2:
        assert (c.lo, c.hi, c.moved) == (-math.inf, math.inf, False)
        return
    sa, sb = float(np.std(a, ddof=1)) / math.sqrt(len(a)), float(np.std(b, ddof=1)) / math.sqrt(len(b))
    df = ph._welch_df(ia, ib)
    assert df in (welch_dfs(a, b) if sa or sb else {max(1, min(len(a), len(b)) - 1)})
    half = u.t975(df) * math.hypot(sa, sb)
    assert c.lo == pytest.approx(c.delta - half, rel=1e-6, abs=1e-6)
    assert c.hi == pytest.approx(c.delta + half, rel=1e-6, abs=1e-6)
    if abs(abs(c.delta) - min_effect * scale) > 1e-9 and min(abs(c.lo), abs(c.hi)) > 1e-9:
        assert c.moved == ((c.lo > 0 or c.hi < 0) and abs(c.delta) >= min_effect * scale)


@settings(deadline=None)
@given(st.lists(ms, min_size=2, max_size=30), st.lists(ms, min_size=2, max_size=30))
def test_welchs_degrees_of_freedom_are_scipys_rounded_down_at_least_1(a, b):
    ia, ib = u.within(np.asarray(a), "mean"), u.within(np.asarray(b), "mean")
    if not ia.se and not ib.se:
        assert ph._welch_df(ia, ib) == max(1, min(ia.df, ib.df))
        return
    assert ph._welch_df(ia, ib) in welch_dfs(a, b)


def _other_sides_df(b: list[float], n: int) -> None:
    flat, spread = u.within(np.zeros(n), "mean"), u.within(np.asarray(b), "mean")
    assert ph._welch_df(flat, spread) == len(b) - 1 and ph._welch_df(spread, flat) == len(b) - 1


@pytest.mark.parametrize("b", [[91.1, 74.9, 22.8, 57.6, 97.4, 69.4, 28.8, 92.9],
                               [70.2, 5.6, 15.0, 1.6, 66.6, 93.3, 4.1, 2.3]])
def test_a_side_of_equal_values_leaves_exactly_the_other_sides_degrees_of_freedom(b):
    """No queue in any of A's requests (all 0): Welch's degrees of freedom are B's own, n - 1, never one fewer
    from rounding (6.9999999 read as 6: the t of 6 degrees instead of 7, an interval 3.5 % wider; of 1 instead of 2,
    3 x wider)."""
    _other_sides_df(b, 3)


@settings(deadline=None)
@given(st.lists(ms, min_size=2, max_size=30).filter(lambda b: len(set(b)) > 1), st.integers(2, 30))
def test_any_side_of_equal_values_leaves_the_other_sides_degrees_of_freedom(b, n):
    _other_sides_df(b, n)


@pytest.mark.parametrize(("n_a", "n_b"), [(5, 8), (8, 5), (3, 3), (30, 2)])
def test_two_sides_of_equal_values_take_the_fewer_degrees_of_freedom(n_a, n_b):
    """No spread on either side (Welch's formula is 0 / 0, scipy's NaN): the smaller side's own n - 1, not 1."""
    a, b = u.within(np.full(n_a, 3.0), "mean"), u.within(np.full(n_b, 7.0), "mean")
    assert a.se == b.se == 0.0 and ph._welch_df(a, b) == min(n_a, n_b) - 1 == ph._welch_df(b, a)


def test_welch_follows_the_spread_side():
    """Three tight values against twelve spread ones: about 11 degrees of freedom (the spread side's), not 13."""
    queued = [400.0, 650.0, 900.0, 520.0, 710.0, 880.0, 610.0, 430.0, 760.0, 690.0, 540.0, 820.0]
    ia, ib = u.within(np.array([0.03, 0.02, 0.04]), "mean"), u.within(np.asarray(queued), "mean")
    assert ph._welch_df(ia, ib) == 11 == int(welch_df([0.03, 0.02, 0.04], queued))
    no_spread = u.within(np.array([2.0, 2.0]), "mean")
    assert ph._welch_df(no_spread, u.within(np.array([1.0, 1.0, 1.0]), "mean")) == 1
    assert ph._welch_df(u.within(np.arange(6.0), "mean"), u.within(np.arange(9.0), "mean")) == int(
        welch_df(list(np.arange(6.0)), list(np.arange(9.0))))


def test_a_cell_of_one_joined_request_compares_and_never_moves():
    """One request on either side: a mean without a standard error; the change is stated, unbounded, not moved."""
    for a, b in (([5.0], [50.0, 52.0, 51.0]), ([50.0, 52.0, 51.0], [5.0]), ([5.0], [50.0])):
        c = ph.change("queue", a, b, 10.0, 0.02)
        assert c.delta == pytest.approx(np.mean(b) - np.mean(a)) and (c.lo, c.hi) == (-math.inf, math.inf)
        assert not c.moved


@pytest.mark.parametrize(("delta", "moved"), [(1.99, False), (2.0, True), (2.01, True), (-2.0, True), (-1.99, False)])
def test_a_change_moves_from_the_min_effect_of_its_scale(delta, moved):
    """Tight samples (the interval excludes 0): moved exactly from 2 % of 100 ms on."""
    a = [50.0, 50.001, 49.999, 50.0]
    c = ph.change("queue", a, [v + delta for v in a], 100.0, 0.02)
    assert c.moved == moved and c.delta == pytest.approx(delta)


def test_a_change_whose_interval_holds_0_does_not_move():
    c = ph.change("queue", [1.0, 30.0, 5.0], [2.0, 40.0, 9.0], 10.0, 0.0)
    assert c.lo < 0 < c.hi and not c.moved and c.delta > 0


def test_no_value_on_either_side_is_no_change():
    assert ph.change("queue", [], [1.0], 1.0, 0.02) is None and ph.change("queue", [1.0], [], 1.0, 0.02) is None


# ---- a cell's values, its scale, its changes ---------------------------------------------------
def _request(i: int, queue_ms: float, phase: str = "measure", error: str | None = None, joined: bool = True,
             offset: int | None = 0) -> RequestRecord:
    sent, ttft, decode = 1_000 * MS * i, int((queue_ms + 20) * MS), 30 * MS
    r = RequestRecord(index=i, phase=phase, input_len=8, output_len=4, intended_ns=sent, sent_ns=sent,
                      end_ns=sent + ttft + decode + 2 * MS, status=200,
                      token_times_ns=[sent + ttft + MS, sent + ttft + decode + MS], token_counts=[1, 1],
                      error_kind=error)
    if joined:
        attach(r, ServerTiming(arrival_ns=sent, ttft_ns=ttft, e2e_ns=ttft + decode, queue_ns=int(queue_ms * MS),
                               prefill_ns=20 * MS, decode_ns=decode))
        r.clock_offset_ns, r.clock_offset_error_ns = offset, 0 if offset is not None else None
    return r


def test_a_cells_values_are_its_measured_ok_joined_requests_in_ms():
    recs = [_request(0, 10.0), _request(1, 12.5), _request(2, 99.0, phase="warmup"), _request(3, 99.0, error="x"),
            _request(4, 99.0, joined=False), _request(5, 99.0, offset=None)]
    assert ph.phase_values(recs, "queue") == [10.0, 12.5]
    assert ph.phase_values(recs, "prefill") == [20.0, 20.0]
    assert ph.phase_values(recs, "delivery") == [1.0, 1.0]


def test_a_phase_the_span_does_not_tell_has_no_values():
    r = _request(0, 10.0)
    r.server_queue_ns = None
    assert ph.phase_values([r], "queue") == [] and ph.phase_values([r], "server_other") == []


def _cell(ledger: PhaseLedger | None, status: str = "ok", concurrency: int = 4, lengths: tuple[int, int] = (8, 4),
          cid: int = 1) -> CellRow:
    summary = CellSummary().with_(ledger) if ledger is not None else CellSummary()
    return CellRow(key=f"{lengths[0]}:{lengths[1]}/c={concurrency}", input_len=lengths[0], output_len=lengths[1],
                   status=status, summary=summary, concurrency=concurrency, id=cid, config="default")


LEDGER = PhaseLedger(requests=3, joined=3, client_ttft_mean_ms=40.0,
                     mean_ms={"network": 1.0, "queue": 10.0, "prefill": 20.0, "server_other": 2.0, "delivery": 7.0,
                              "decode": 100.0, "decode_other": 3.0, "last_delivery": 4.0})


@pytest.mark.parametrize("phase", PHASES)
def test_a_phase_is_scaled_by_a_ttft_or_the_time_to_the_last_token(phase):
    want = 40.0 if phase in TTFT_PHASES else sum(LEDGER.mean_ms[p] for p in LAST_PHASES)
    assert ph._scale(_cell(LEDGER), phase) == want
    assert ph._scale(_cell(None), phase) == 0.0
    partial = LEDGER.model_copy(update={"client_ttft_mean_ms": None, "mean_ms": {"decode": 5.0}})
    assert ph._scale(_cell(partial), phase) == (0.0 if phase in TTFT_PHASES else 5.0)


def test_changes_come_in_the_order_of_the_phases_each_scaled_by_cell_a():
    a = [_request(i, 10.0 + 0.01 * i) for i in range(6)]
    b = [_request(i, 11.0 + 0.01 * i) for i in range(6)]          # the queue 1 ms longer: 2.5 % of A's TTFT 40
    found = ph.changes(_cell(LEDGER), a, b, 0.02)
    assert [c.phase for c in found] == list(PHASES)
    by = {c.phase: c for c in found}
    assert by["queue"].delta == pytest.approx(1.0) and by["queue"].moved
    assert not ph.changes(_cell(LEDGER), a, b, 0.03)[1].moved      # 3 % of 40 ms: 1.2 ms
    assert by["decode"].delta == 0.0 and not by["decode"].moved
    assert ph.changes(_cell(LEDGER), a, [], 0.02) == []


def _pc(phase: str, delta: float, moved: bool) -> ph.PhaseChange:
    iv = u.Interval(value=0.0, lo=0.0, hi=0.0, n=1)
    return ph.PhaseChange(phase=phase, a=iv, b=iv, delta=delta, lo=delta - 1, hi=delta + 1, moved=moved)


def test_the_phase_that_grew_most_among_those_that_moved_up():
    found = [_pc("queue", 5.0, True), _pc("prefill", 9.0, False), _pc("decode", 7.0, True), _pc("delivery", -20.0, True)]
    assert ph.grew(found).phase == "decode"
    assert ph.grew([_pc("queue", -5.0, True), _pc("prefill", 9.0, False)]) is None
    assert ph.grew([_pc("queue", 0.0, True)]) is None and ph.grew([]) is None


def test_a_phase_that_moved_up_by_less_than_a_millisecond_grew():
    """Growth is any moved change above 0 ms, however small (a queue of 0.4 ms against one of 0.25 ms)."""
    assert ph.grew([_pc("queue", 0.4, True), _pc("prefill", 0.25, True)]).phase == "queue"
    assert ph.grew([_pc("delivery", 1e-3, True), _pc("decode", -0.5, True)]).phase == "delivery"


# ---- pairs of cells --------------------------------------------------------------------------
def _column(cells: list[CellRow], name: str = "default") -> Column:
    config = ConfigInfo(id=1, name="default", overrides={}, profile=None,
                        facts=ServerFacts(engine="reference"), status="done", message="")
    run = RunData(id=name, created_at="2026-03-01", kind="bench", status="done", target="http://x",
                  tool_version="test", spec={}, command=[], environment={}, message="", configs=[config],
                  cells=cells)
    return Column(run, config, name)


def _traced(concurrency: int, lengths: tuple[int, int] = (8, 4), status: str = "ok", joined: int = 3,
            cid: int = 1) -> CellRow:
    return _cell(LEDGER.model_copy(update={"joined": joined}), status, concurrency, lengths, cid)


def test_common_traced_cells_pair_at_their_load():
    a = [_traced(1, cid=1), _traced(4, cid=2), _traced(8, cid=3, joined=0), _cell(None, concurrency=16, cid=4)]
    b = [_traced(1, cid=5), _traced(4, cid=6, status="failed"), _traced(8, cid=7), _traced(16, cid=8)]
    got = ph.pairs(_column(a, "a"), _column(b, "b"))
    assert [(x.id, y.id) for x, y in got] == [(1, 5)]


def test_with_no_common_traced_cell_each_columns_one_traced_cell_of_a_length_pair_pairs_across_loads():
    a = [_traced(1, cid=1), _traced(2, lengths=(16, 4), cid=2), _traced(4, lengths=(16, 4), cid=3)]
    b = [_traced(8, cid=4), _traced(8, lengths=(16, 4), cid=5)]
    got = ph.pairs(_column(a, "a"), _column(b, "b"))
    assert [(x.id, y.id) for x, y in got] == [(1, 4)]         # (16, 4): two traced cells in A, no pair
    assert ph.pairs(_column([_traced(1)], "a"), _column([_traced(2, lengths=(16, 4))], "b")) == []


@pytest.mark.parametrize("value", [5.0, 0.0])
def test_a_phase_equal_on_both_sides_did_not_move_even_with_no_min_effect(value):
    """Every value equal on both sides: a difference of exactly 0 with an interval of no width, [0, 0]; an
    interval that reaches 0 does not exclude it, so the phase did not move, whatever the min effect."""
    c = ph.change("queue", [value] * 4, [value] * 5, 10.0, 0.0)
    assert c is not None and (c.delta, c.lo, c.hi) == (0.0, 0.0, 0.0) and not c.moved
