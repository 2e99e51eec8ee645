"""monitor/counters.py against docs/metrics.md ("Server counters over a cell"): a counter summed over its series with
the rule's labels, its increase over a window from the last scrape at or before its start (else the first) to the
last at or before its end, a drop counted as a restart from 0; a gauge's mean over the scrapes inside the window
above 0; over any scrapes hypothesis draws and at each edge."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.monitor import counters as ct
from tokenbench.monitor.samples import Sample


def _scrape(t: int, name: str, value: float, **labels: str) -> Sample:
    return Sample(t, "server", name, value, labels)


def test_a_counter_is_summed_over_its_series_with_the_rules_labels():
    samples = [_scrape(1, "c", 2.0, engine="0"), _scrape(1, "c", 3.0, engine="1"), _scrape(2, "c", 4.0, engine="0"),
               _scrape(2, "other", 9.0), Sample(1, "host", "c", 100.0, {})]
    assert ct.ticks(samples, "c") == [(1, 5.0), (2, 4.0)]
    assert ct.ticks(samples, {"metric": "c", "labels": {"engine": "1"}}) == [(1, 3.0)]
    assert ct.ticks(samples, {"metric": "c", "labels": None}) == [(1, 5.0), (2, 4.0)]


@settings(deadline=None)
@given(st.lists(st.floats(0.0, 1e6), max_size=12))
def test_an_increase_adds_every_rise_and_counts_a_drop_as_a_restart_from_0(values):
    ticks = list(enumerate(values))
    want = sum(b - a if b >= a else b for a, b in zip(values, values[1:], strict=False))
    assert ct.increase(ticks) == pytest.approx(want, rel=1e-12)


@settings(deadline=None)
@given(st.lists(st.integers(0, 100), min_size=1, max_size=12, unique=True).map(sorted),
       st.none() | st.integers(0, 100), st.none() | st.integers(0, 100))
def test_the_window_counts_from_the_last_scrape_at_or_before_its_start_to_the_last_at_or_before_its_end(ts, a, b):
    series = [(t, float(i)) for i, t in enumerate(ts)]
    upto = [p for p in series if b is None or p[0] <= b]
    base = [i for i, p in enumerate(upto) if a is not None and p[0] <= a]
    assert ct._in_window(series, a, b) == upto[base[-1] if base else 0:]


def test_a_window_of_counters_and_gauges():
    samples = [_scrape(t, "hits", v) for t, v in ((5, 10.0), (10, 12.0), (15, 20.0), (20, 3.0), (25, 7.0), (30, 50.0))]
    samples += [_scrape(t, "rate", v) for t, v in ((5, 0.9), (12, 0.0), (15, 0.5), (20, 0.7), (26, 0.9))]
    got = ct.window(samples, {"hits": "hits", "absent": "nothing"}, {"rate": "rate", "none": "nothing"}, 11, 25)
    # from the scrape at 10 (the last at or before 11) to the one at 25: 12 -> 20, restart to 3, 3 -> 7
    assert got.increases == {"hits": 8.0 + 3.0 + 4.0} and got.get("hits") == 15.0 and got.get("absent") is None
    assert (got.from_ns, got.to_ns) == (10, 25)
    assert got.gauges == {"rate": pytest.approx(0.6)} and got.gauge_scrapes == 2
    assert ct.window(samples, {"hits": "hits"}, None, 0, 4).increases == {}       # ended before every scrape
    assert ct.window(samples, {"hits": "hits"}, None, 0, 5).increases == {"hits": 0.0}
    edge = ct.window(samples, {}, {"rate": "rate"}, 15, 20)
    assert edge.gauges == {"rate": pytest.approx(0.6)} and edge.gauge_scrapes == 2
    whole = ct.window(samples, {"hits": "hits"}, {"rate": "rate"})
    assert whole.increases == {"hits": 2.0 + 8.0 + 3.0 + 4.0 + 43.0} and whole.gauge_scrapes == 4
    assert (whole.from_ns, whole.to_ns) == (5, 30)
    assert ct.CounterWindow(None, None) == ct.CounterWindow(None, None, {}, {}, 0)      # no scrape: none counted
    empty = ct.window([], {"hits": "hits"})
    assert (empty.from_ns, empty.to_ns, empty.increases, empty.gauges, empty.gauge_scrapes) == (None, None, {}, {}, 0)


def test_the_gauge_scrapes_are_the_most_any_gauge_had():
    samples = [_scrape(t, "a", 1.0) for t in (1, 2, 3)] + [_scrape(t, "b", 2.0) for t in (1, 2)]
    got = ct.window(samples, {}, {"b": "b", "a": "a"})
    assert got.gauge_scrapes == 3 and got.gauges == {"a": 1.0, "b": 2.0}
