"""monitor/window.py against references written from docs/monitoring.md ("Cell summary", "Coverage", "Energy"),
over any series hypothesis draws on a small integer clock: coverage as the unit
steps of the window within one interval of a sample, the longest gap by brute force, a series' value by numpy's
interp, its integral by numpy's trapezoid, a counter's increase from the readings around each edge, the samples
that describe a window; each edge (a sample on the window's edge, one interval away) on both sides."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tokenbench.monitor import window as win
from tokenbench.monitor.window import CellWindow

S = 1_000_000_000
times = st.lists(st.integers(0, 120), max_size=15, unique=True).map(sorted)


@st.composite
def windows(draw) -> CellWindow:
    start = draw(st.integers(0, 100))              # a window may start at 0 on the clock
    reach = draw(st.integers(1, 20))
    w = CellWindow(start, start + draw(st.integers(0, 60)), interval_s=reach / 1e9)
    assume(w.interval_ns == reach)
    return w


def test_the_window_in_seconds_and_its_interval_in_ns():
    w = CellWindow(2 * S, 5 * S + S // 2, interval_s=0.25)
    assert w.known and w.seconds == 3.5 and w.interval_ns == S // 4
    assert CellWindow(5, 5).known and CellWindow(5, 5).seconds == 0.0
    assert not CellWindow(6, 5).known and CellWindow(6, 5).seconds is None
    assert not CellWindow(None, 5).known and not CellWindow(5, None).known and CellWindow().interval_ns == S


@settings(deadline=None)
@given(times, windows())
def test_pick_keeps_the_samples_within_else_the_nearest_within_an_interval_on_each_side(ts, w):
    within = [t for t in ts if w.start_ns <= t <= w.end_ns]
    before = [t for t in ts if w.start_ns - w.interval_ns <= t < w.start_ns]
    after = [t for t in ts if w.end_ns < t <= w.end_ns + w.interval_ns]
    assert win.pick(ts, w) == (within or before[-1:] + after[:1])
    assert win.pick(ts, CellWindow(interval_s=w.interval_s)) == ts


def test_pick_at_an_interval_from_the_window_and_on_its_edges():
    w = CellWindow(100, 110, interval_s=10 / 1e9)
    assert win.pick([90, 120], w) == [90, 120] and win.pick([89, 121], w) == []
    assert win.pick([100], w) == [100] and win.pick([110], w) == [110]
    assert win.pick([80, 90, 95, 115, 118], w) == [95, 115]


@settings(deadline=None)
@given(times, windows())
def test_coverage_is_the_share_of_the_window_within_an_interval_of_a_sample(ts, w):
    start, end, reach = w.start_ns, w.end_ns, w.interval_ns
    if end == start:
        want = 100.0 if any(abs(t - start) <= reach for t in ts) else 0.0
    else:
        steps = [x for x in range(start, end) if any(t - reach <= x and x + 1 <= t + reach for t in ts)]
        want = 100.0 * len(steps) / (end - start)
    assert win.coverage_pct(ts, w) == pytest.approx(want, rel=1e-12, abs=1e-12)


def _gaps_reference(ts: list[int], w: CellWindow) -> float:
    """The longest stretch of [start, end] with no sample inside it, bounded by the nearest samples outside (or the
    window's edge where none lies beyond it)."""
    before = [t for t in ts if t <= w.start_ns]
    after = [t for t in ts if t >= w.end_ns]
    lo = before[-1] if before else w.start_ns
    hi = after[0] if after else w.end_ns
    points = sorted({lo, hi, *(t for t in ts if w.start_ns < t < w.end_ns)})
    if not ts or not any(w.start_ns <= t <= w.end_ns for t in ts) and not before and not after:
        return (w.end_ns - w.start_ns) / S
    return max((b - a for a, b in zip(points, points[1:], strict=False)), default=0) / S


@settings(deadline=None)
@given(times, windows())
def test_the_longest_gap_runs_between_samples_or_from_an_edge_without_one_beyond(ts, w):
    assert win.max_gap_s(ts, w) == pytest.approx(_gaps_reference(ts, w), rel=1e-12, abs=1e-18)


def test_gaps_on_hand_made_series():
    w = CellWindow(10 * S, 20 * S)
    assert win.max_gap_s([], w) == 10.0
    assert win.max_gap_s([10 * S, 20 * S], w) == 10.0
    assert win.max_gap_s([9 * S, 12 * S, 21 * S], w) == 9.0
    assert win.max_gap_s([12 * S, 13 * S], w) == 7.0                 # nothing after: from the last to the end
    assert win.max_gap_s([17 * S, 18 * S], w) == 7.0                 # nothing before: from the start


series = st.lists(st.tuples(st.integers(0, 120), st.floats(0.0, 500.0)), min_size=1, max_size=12,
                  unique_by=lambda p: p[0]).map(sorted)


@settings(deadline=None)
@given(series, st.integers(-10, 130))
def test_a_series_value_is_numpys_interpolation_held_flat_beyond_its_ends(points, t):
    xs, ys = zip(*points, strict=True)
    assert win.value_at(points, t) == pytest.approx(float(np.interp(t, xs, ys)), rel=1e-12, abs=1e-9)


@settings(deadline=None)
@given(series, windows())
def test_the_integral_is_numpys_trapezoid_over_the_lines_between_samples(points, w):
    xs, ys = zip(*points, strict=True)
    grid = np.array(sorted({w.start_ns, w.end_ns, *(t for t in xs if w.start_ns < t < w.end_ns)}), dtype=float)
    want = float(np.trapezoid(np.interp(grid, xs, ys), grid)) / S
    assert win.integral(points, w) == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_a_window_starting_at_0_reads_its_edge_at_0():
    w = CellWindow(0, 20)
    assert win.edge_gap_s([0, 10, 20], w) == 0.0 and win.edge_gap_s([0, 30], w) == 30 / S
    assert win.counter_increase([(0, 1.0), (20, 5.0)], w) == 4.0 and win.integral([(0, 2.0), (20, 2.0)], w) == 40 / S
    assert win.max_gap_s([0, 20], w) == 20 / S and win.coverage_pct([0], CellWindow(0, 20, interval_s=10 / 1e9)) == 50.0


def test_constant_power_over_a_window_is_power_times_its_seconds():
    w = CellWindow(2 * S, 5 * S)
    assert win.integral([(0, 250.0), (9 * S, 250.0)], w) == pytest.approx(750.0)
    assert win.integral([(3 * S, 100.0), (4 * S, 300.0)], w) == pytest.approx(100 + 200 + 300)


counters = st.lists(st.tuples(st.integers(0, 120), st.floats(0.0, 1e6)), min_size=1, max_size=12,
                    unique_by=lambda p: p[0]).map(sorted)


@settings(deadline=None)
@given(counters, windows(), st.booleans())
def test_a_counters_increase_is_read_between_the_readings_around_each_edge(points, w, rising):
    if rising:
        points = [(t, float(v)) for (t, _), v in zip(points, np.cumsum([v for _, v in points]), strict=True)]
    xs, ys = zip(*points, strict=True)
    before = [i for i, t in enumerate(xs) if t <= w.start_ns]
    after = [i for i, t in enumerate(xs) if t >= w.end_ns]
    got = win.counter_increase(points, w)
    if not before or not after:
        assert got is None
        return
    span = ys[before[-1]:after[0] + 1]
    if any(b < a for a, b in zip(span, span[1:], strict=False)):
        assert got is None
        return
    want = float(np.interp(w.end_ns, xs, ys) - np.interp(w.start_ns, xs, ys))
    assert got == pytest.approx(want, rel=1e-9, abs=1e-6)


def test_a_counter_read_on_the_windows_edges_counts_and_a_fall_inside_does_not():
    w = CellWindow(10, 20)
    assert win.counter_increase([(10, 5.0), (20, 9.0)], w) == 4.0
    assert win.counter_increase([(11, 5.0), (20, 9.0)], w) is None
    assert win.counter_increase([(10, 5.0), (19, 9.0)], w) is None
    assert win.counter_increase([(0, 5.0), (15, 4.0), (30, 9.0)], w) is None
    assert win.counter_increase([(0, 5.0), (15, 5.0), (30, 9.0)], w) == pytest.approx(4.0 * 5 / 15)


@settings(deadline=None)
@given(times, windows())
def test_the_edge_gap_is_the_longer_stretch_between_the_readings_around_an_edge(ts, w):
    gaps = []
    for edge in (w.start_ns, w.end_ns):
        before, after = [t for t in ts if t <= edge], [t for t in ts if t >= edge]
        gaps.append(None if not before or not after else (after[0] - before[-1]) / S)
    want = None if None in gaps else max(gaps)
    assert win.edge_gap_s(ts, w) == want
