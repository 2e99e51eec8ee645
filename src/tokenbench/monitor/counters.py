"""Server counters over one window (a cell's measured phase): how much each counter rose, and the mean
of a few gauges, from the /metrics scrapes the monitor took.

A counter's value at a scrape is the sum of its series (one per engine core or DP rank) that match the
rule's labels. Its increase over the window counts from the last scrape at or before the window's start
(the first scrape when none is that early) to the last scrape at or before its end; a drop between two
scrapes is a restart, counted from 0. A gauge's mean is over the scrapes inside the window whose value
is above 0 (SGLang's acceptance gauges read 0 until a decode window has been logged). Which metric
carries which role is data the caller passes (the engine adapters' METRIC_NAMES `counters` and
`gauges`): this package knows no engine. Formulas: docs/metrics.md, "Server counters over a cell".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenbench.monitor.samples import Sample

Rule = str | Mapping[str, Any]      # a metric name, or {"metric": name, "labels": {label: value}}
Ticks = list[tuple[int, float]]     # (scrape time, value summed over matching series), in time order


@dataclass(frozen=True, slots=True)
class CounterWindow:
    from_ns: int | None                       # the scrape the increases count from
    to_ns: int | None                         # the last scrape counted
    increases: dict[str, float] = field(default_factory=dict)    # role -> increase (roles seen only)
    gauges: dict[str, float] = field(default_factory=dict)       # role -> mean over the window
    gauge_scrapes: int = 0                    # scrapes the gauge means are over

    def get(self, role: str) -> float | None:
        return self.increases.get(role)


def _rule(rule: Rule) -> tuple[str, dict[str, str]]:
    if isinstance(rule, str):
        return rule, {}
    return rule["metric"], dict(rule.get("labels") or {})


def ticks(samples: Iterable[Sample], rule: Rule) -> Ticks:
    """Per scrape, the sum of the rule's metric over its series with the rule's labels."""
    name, labels = _rule(rule)
    sums: dict[int, float] = defaultdict(float)
    for s in samples:
        if s.source == "server" and s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            sums[s.t_ns] += s.value
    return sorted(sums.items())


def _in_window(series: Ticks, start_ns: int | None, end_ns: int | None) -> Ticks:
    """The base scrape (last at or before start, else the first) and every later one up to end."""
    upto = [t for t in series if end_ns is None or t[0] <= end_ns]
    before = [i for i, (t, _) in enumerate(upto) if start_ns is not None and t <= start_ns]
    return upto[before[-1] if before else 0:]


def increase(series: Ticks) -> float:
    """How much a cumulative counter rose over the ticks; a drop means a restart (counted from 0)."""
    total = 0.0
    for (_, before), (_, after) in zip(series, series[1:], strict=False):
        total += after - before if after >= before else after
    return total


def window(samples: list[Sample], counters: Mapping[str, Rule], gauges: Mapping[str, Rule] | None = None,
           start_ns: int | None = None, end_ns: int | None = None) -> CounterWindow:
    """The counters' increases and the gauges' means over [start_ns, end_ns] (roles not scraped are left out)."""
    found = {role: _in_window(ticks(samples, rule), start_ns, end_ns) for role, rule in counters.items()}
    found = {role: series for role, series in found.items() if series}
    spans = [t for series in found.values() for t in (series[0][0], series[-1][0])]
    means, scrapes = {}, 0
    for role, rule in (gauges or {}).items():
        inside = [v for t, v in ticks(samples, rule) if (start_ns is None or t >= start_ns)
                  and (end_ns is None or t <= end_ns) and v > 0]
        if inside:
            means[role], scrapes = sum(inside) / len(inside), max(scrapes, len(inside))
    return CounterWindow(min(spans, default=None), max(spans, default=None),
                         {role: increase(series) for role, series in found.items()}, means, scrapes)
