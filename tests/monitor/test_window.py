"""The measured window and what a series says over it: exact on hand-made series, and properties (a constant
power integrates to power x window whatever the sampling; an energy counter's increase is exact whatever lies
between its readings; coverage and gaps see an outage)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenbench.monitor import window as win
from tokenbench.monitor.window import CellWindow

S = 1_000_000_000


def test_pick_keeps_the_window_and_falls_back_to_its_neighbours():
    times = [0, 1 * S, 2 * S, 3 * S, 4 * S]
    assert win.pick(times, CellWindow(1 * S, 3 * S)) == [1 * S, 2 * S, 3 * S]
    # a window shorter than the interval between samples: the nearest one on each side within one interval
    assert win.pick(times, CellWindow(int(1.2 * S), int(1.4 * S), interval_s=1.0)) == [1 * S, 2 * S]
    assert win.pick(times, CellWindow(int(1.2 * S), int(1.4 * S), interval_s=0.1)) == []
    assert win.pick(times, CellWindow()) == times            # no window: every sample


def test_coverage_and_gap_of_a_regular_series_and_of_an_outage():
    w = CellWindow(10 * S, 20 * S, interval_s=0.5)
    regular = [int(t * S / 2) for t in range(10, 45)]       # every 0.5 s from 5 s to 22 s
    assert win.coverage_pct(regular, w) == 100.0 and win.max_gap_s(regular, w) == 0.5
    outage = [t for t in regular if not 12 * S < t < 15 * S]   # silent for 3 s (30 % of the window)
    assert win.max_gap_s(outage, w) == pytest.approx(3.0)
    assert win.coverage_pct(outage, w) == pytest.approx(100 * (10 - 2) / 10)   # 2 s beyond one interval of any
    # no sample before the window: from its start
    late = [t for t in regular if t >= 13 * S]
    assert win.max_gap_s(late, w) == pytest.approx(3.0)
    assert win.coverage_pct(late, w) == pytest.approx(100 * (20 - 12.5) / 10)


def test_integral_draws_lines_between_samples_and_holds_the_ends():
    series = [(0, 100.0), (2 * S, 300.0)]
    assert win.integral(series, CellWindow(0, 2 * S)) == pytest.approx(400.0)
    assert win.integral(series, CellWindow(1 * S, 2 * S)) == pytest.approx(250.0)     # from 200 W at 1 s
    assert win.integral(series, CellWindow(2 * S, 4 * S)) == pytest.approx(600.0)     # held at 300 W
    assert win.integral(series, CellWindow(1 * S, 1 * S)) == 0


def test_counter_increase_needs_both_edges_and_no_fall():
    counter = [(0, 1000.0), (1 * S, 1400.0), (5 * S, 3000.0)]
    # 1200 J at 0.5 s (between 1000 and 1400), 2200 J at 3 s (half way from 1400 to 3000)
    assert win.counter_increase(counter, CellWindow(int(0.5 * S), 3 * S)) == pytest.approx(1000.0)
    assert win.counter_increase(counter, CellWindow(1 * S, 6 * S)) is None     # nothing at or after the end
    assert win.counter_increase([(0, 5.0), (1 * S, 2.0), (2 * S, 3.0)], CellWindow(0, 2 * S)) is None


sampling = st.lists(st.integers(min_value=1, max_value=3 * S), min_size=1, max_size=40)


@given(watts=st.floats(min_value=1, max_value=2000), start=st.integers(0, 2 * S), length=st.integers(1, 5 * S),
       offsets=sampling)
def test_a_constant_power_integrates_to_power_times_window(watts, start, length, offsets):
    times = sorted({start + o - S for o in offsets})
    series = [(t, watts) for t in times]
    w = CellWindow(start, start + length)
    assert win.integral(series, w) == pytest.approx(watts * length / S, rel=1e-9)


@given(watts=st.floats(min_value=1, max_value=2000), length=st.integers(1, 5 * S), offsets=sampling)
def test_an_energy_counter_is_exact_whatever_lies_between_its_readings(watts, length, offsets):
    start = 2 * S
    inner = sorted({start + o % length for o in offsets})
    times = [0, *inner, start + length + S]                # one reading before, one after the window
    series = [(t, watts * t / S) for t in times]
    assert win.counter_increase(series, CellWindow(start, start + length)) == pytest.approx(watts * length / S,
                                                                                              rel=1e-9)


@given(times=st.lists(st.integers(0, 10 * S), max_size=30), interval=st.sampled_from([0.1, 0.5, 1.0]))
def test_coverage_is_a_share_and_full_coverage_means_no_long_gap(times, interval):
    w = CellWindow(2 * S, 8 * S, interval_s=interval)
    times = sorted(set(times))
    share = win.coverage_pct(times, w)
    assert 0.0 <= share <= 100.0 + 1e-9
    if win.max_gap_s(times, w) <= interval and times and times[0] <= w.start_ns and times[-1] >= w.end_ns:
        assert share == pytest.approx(100.0)
