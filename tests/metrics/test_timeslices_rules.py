"""metrics/timeslices.py's rules at their edges (docs/metrics.md, "Timeslices, steady state and drift"): a slice is
full from 0.999 of the width, the steady state is judged on the last three full slices' output tok/s within
10 % of their mean, a drift is a move of 10 % or more that its interval tells apart, slices and their latencies
in seconds and milliseconds."""

from __future__ import annotations

import pytest

from tokenbench.metrics import timeslices as ts
from tokenbench.metrics.timeslices import Timeslices


def slices(tps: list[float], spans: list[float] | None = None, width: float = 10.0, **figures) -> Timeslices:
    spans = spans or [width] * len(tps)
    return Timeslices(width_s=width, t0_ns=0, start_s=[k * width for k in range(len(tps))], span_s=spans,
                      output_tps=tps, **figures)


def test_the_constants_are_the_documented_ones():
    assert (ts.STEADY_SLICES, ts.STEADY_SPREAD, ts.DRIFT_MAX, ts.FULL) == (3, 0.10, 0.10, 0.999)


@pytest.mark.parametrize(("last", "full"), [(9.99, True), (9.995, True), (9.989, False), (9.0, False), (10.0, True)])
def test_a_slice_is_full_from_0_999_of_the_width(last, full):
    s = slices([1.0, 1.0], [10.0, last])
    assert s.full() == ([0, 1] if full else [0])
    assert Timeslices().full() == []


@pytest.mark.parametrize(("tps", "want"), [
    ([100.0, 100.0, 104.9, 95.1], (True, pytest.approx(0.098, rel=1e-9))),
    ([100.0, 104.95, 100.0, 94.95], (False, pytest.approx(0.10, rel=0.01))),
    ([50.0, 100.0, 100.0, 110.0], (True, pytest.approx(10 / 103.333333, rel=1e-6))),
    ([100.0, 100.0, 100.0, 111.0], (False, pytest.approx(11 / 103.666667, rel=1e-6))),
    ([0.0, 0.0, 0.0], (False, None)), ([100.0, 100.0], (None, None))])
def test_steady_state_is_the_last_three_full_slices_within_10_percent_of_their_mean(tps, want):
    assert ts.steady(slices(tps)) == want


def test_a_short_last_slice_is_left_out_of_the_steady_state():
    s = slices([100.0, 100.0, 100.0, 50.0], [10.0, 10.0, 10.0, 4.0])
    assert ts.steady(s) == (True, 0.0)


def _drifted(first: list[float], last: list[float]) -> ts.Drift:
    tps = [*first, *([100.0] * 6), *last]             # 12 full slices: a quarter is 3
    [d] = ts.drift(slices(tps), ("output_tps",))
    return d


def test_a_drift_is_a_move_of_10_percent_or_more_between_the_first_and_last_quarters():
    tight = [100.0, 100.01, 99.99]
    up = _drifted(tight, [110.5, 110.51, 110.49])
    assert up.drifted and up.change == pytest.approx(0.105, rel=1e-3) and up.slices == 3
    assert up.first == pytest.approx(100.0) and up.last == pytest.approx(110.5)
    small = _drifted(tight, [109.5, 109.51, 109.49])
    assert not small.drifted and small.change == pytest.approx(0.095, rel=1e-3)
    down = _drifted(tight, [89.5, 89.51, 89.49])
    assert down.drifted and down.change == pytest.approx(-0.105, rel=1e-3)


def test_a_drift_its_interval_cannot_tell_apart_is_no_drift():
    noisy = _drifted([60.0, 140.0, 100.0], [80.0, 160.0, 120.0])
    assert noisy.change == pytest.approx(0.2) and not noisy.drifted and noisy.lo < 0 < noisy.hi


def test_a_drift_of_one_slice_a_side_is_judged_by_its_size():
    """Under 8 full slices a quarter is one slice: no interval, the size alone decides."""
    [d] = ts.drift(slices([100.0, 100.0, 100.0, 111.0]), ("output_tps",))
    assert d.slices == 1 and d.drifted and (d.lo, d.hi) == (None, None)
    [d] = ts.drift(slices([100.0, 100.0, 100.0, 109.0]), ("output_tps",))
    assert not d.drifted


def test_a_figure_that_starts_at_0_has_no_change():
    [d] = ts.drift(slices([0.0, 0.0, 5.0, 5.0]), ("output_tps",))
    assert d.change == 0.0 and not d.drifted


def test_drift_needs_two_full_slices_and_values_on_both_sides():
    assert ts.drift(slices([100.0])) == []
    [d] = ts.drift(slices([1.0, 1.0], ttft_mean_ms=[None, 5.0], tpot_mean_ms=[4.0, 5.0]), ("ttft_mean_ms",
                                                                                             "tpot_mean_ms"))
    assert d.figure == "tpot_mean_ms" and d.change == pytest.approx(0.25)


def test_the_monitor_per_slice_counts_reads_and_takes_means_and_peaks():
    s = slices([1.0, 1.0], [10.0, 10.0])
    got = s.with_monitor([(0, "running", 2.0), (0, "waiting", 1.0), (5 * 10**9, "running", 4.0),
                          (10 * 10**9, "kv_usage", 0.5), (10 * 10**9, "waiting", 3.0), (19 * 10**9, "waiting", 7.0),
                          (20 * 10**9, "running", 9.0), (-1, "running", 9.0)])
    assert got.monitor_samples == [2, 2] and got.running_mean == [3.0, None]
    assert got.waiting_max == [1.0, 7.0] and got.kv_usage_max == [None, 0.5]
    assert Timeslices().with_monitor([(0, "running", 1.0)]) == Timeslices()


def test_slices_in_seconds_and_latencies_in_milliseconds():
    ms, s = 1_000_000, 1_000_000_000
    import numpy as np
    cols = ts.Columns(sent=np.array([0, 12 * s]), end=np.array([3 * s, 25 * s]), intended=np.array([0, 12 * s]),
                      ok_sent=np.array([0, 12 * s]), ok_end=np.array([3 * s, 25 * s]),
                      ok_first=np.array([40 * ms, 12 * s + 80 * ms]), ok_out=np.array([3, 5]),
                      ok_last=np.array([40 * ms + 2 * 20 * ms, 12 * s + 80 * ms + 4 * 30 * ms]))
    got = ts.compute(cols, lambda a, b: 10, 10.0)
    assert got.start_s == [0.0, 10.0, 20.0] and got.span_s == [10.0, 10.0, 5.0]
    assert got.ttft_mean_ms == [40.0, 80.0, None] and got.ttft_p99_ms == [40.0, 80.0, None]
    assert got.tpot_mean_ms == [20.0, 30.0, None] and got.output_tps == [1.0, 1.0, 2.0]
    assert got.sent == [1, 1, 0] and got.completed == [1, 0, 1] and got.errors == [0, 0, 0]
