"""A cell's measured window and what a series of monitor samples says over it: which samples describe it,
how much of it they cover, the longest gap between them, the integral of a rate (power -> energy) and the
increase of a cumulative counter (NVML's total energy, RAPL). Pure functions of (t_ns, value) points on
tokenbench's clock; formulas in docs/monitoring.md ("Cell summary", "Coverage", "Energy").
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

NS = 1e9
Point = tuple[int, float]          # (t_ns, value), a series is in time order


@dataclass(frozen=True)
class CellWindow:
    """The measured window (first measured send to last measured byte, on the requests' clock), the monitor's
    interval, the counts the per-token and per-request figures divide by, and the accelerator ids the server
    runs on (a GPU's index, an NPU's physical id; None: every device the monitor sees). No start or end: no
    window (every sample counts, as in a live `monitor`)."""

    start_ns: int | None = None
    end_ns: int | None = None
    interval_s: float = 1.0
    output_tokens: int | None = None
    requests: int | None = None
    devices: frozenset[int] | None = None

    @property
    def known(self) -> bool:
        return self.start_ns is not None and self.end_ns is not None and self.end_ns >= self.start_ns

    @property
    def seconds(self) -> float | None:
        return (self.end_ns - self.start_ns) / NS if self.known else None     # type: ignore[operator]

    @property
    def interval_ns(self) -> int:
        return int(self.interval_s * NS)


def pick(times: Sequence[int], w: CellWindow) -> list[int]:
    """The sample times that describe the window: those within it; when none is (a window shorter than the
    interval), the nearest one on each side within one interval of it. Every time without a window."""
    if not w.known:
        return list(times)
    start, end = w.start_ns, w.end_ns
    within = [t for t in times if start <= t <= end]            # type: ignore[operator]
    if within:
        return within
    before = [t for t in times if start - w.interval_ns <= t < start]   # type: ignore[operator]
    after = [t for t in times if end < t <= end + w.interval_ns]         # type: ignore[operator]
    return before[-1:] + after[:1]


def coverage_pct(times: Sequence[int], w: CellWindow) -> float:
    """Share of the window (%) within one interval of some sample; a window of no length is covered when a
    sample lies within one interval of it."""
    start, end, reach = w.start_ns or 0, w.end_ns or 0, w.interval_ns
    spans = sorted((max(t - reach, start), min(t + reach, end)) for t in times)
    spans = [(a, b) for a, b in spans if a <= b]
    if end == start:
        return 100.0 if spans else 0.0
    covered, reached = 0, start
    for a, b in spans:
        a = max(a, reached)
        if b > a:
            covered += b - a
            reached = b
    return 100.0 * covered / (end - start)


def max_gap_s(times: Sequence[int], w: CellWindow) -> float:
    """The longest stretch of the window between two samples (the nearest ones outside it included); from the
    window's edge when no sample lies beyond that edge."""
    start, end = w.start_ns or 0, w.end_ns or 0
    before = [t for t in times if t <= start]
    after = [t for t in times if t >= end]
    points = before[-1:] + [t for t in times if start < t < end] + after[:1]
    if not points:
        return (end - start) / NS
    gaps = [b - a for a, b in zip(points, points[1:], strict=False)]
    gaps += [] if before else [points[0] - start]
    gaps += [] if after else [end - points[-1]]
    return max(gaps, default=0) / NS


def value_at(series: Sequence[Point], t: int) -> float:
    """The series at `t`: linear between the samples around it, the first (last) value before (after) them."""
    times = [p[0] for p in series]
    i = bisect.bisect_left(times, t)
    if i < len(series) and times[i] == t:
        return series[i][1]
    if i == 0:
        return series[0][1]
    if i == len(series):
        return series[-1][1]
    (t0, v0), (t1, v1) = series[i - 1], series[i]
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def integral(series: Sequence[Point], w: CellWindow) -> float:
    """∫ over the window of the series drawn as straight lines between its samples (trapezoids), held flat
    beyond its first and last sample; in value x seconds (watts -> joules)."""
    start, end = w.start_ns or 0, w.end_ns or 0
    cuts = [start, *(t for t, _ in series if start < t < end), end]
    values = [value_at(series, t) for t in cuts]
    return sum((v0 + v1) / 2 * (t1 - t0) / NS
               for t0, t1, v0, v1 in zip(cuts, cuts[1:], values, values[1:], strict=False))


def counter_increase(series: Sequence[Point], w: CellWindow) -> float | None:
    """The increase of a cumulative counter over the window, read between the samples around each edge; None
    when no sample lies at or before the start and at or after the end, or the counter fell in between (a
    driver reload)."""
    start, end = w.start_ns or 0, w.end_ns or 0
    before = [i for i, (t, _) in enumerate(series) if t <= start]
    after = [i for i, (t, _) in enumerate(series) if t >= end]
    if not before or not after:
        return None
    span = [v for _, v in series[before[-1]:after[0] + 1]]
    if any(b < a for a, b in zip(span, span[1:], strict=False)):
        return None
    return value_at(series, end) - value_at(series, start)


def edge_gap_s(times: Sequence[int], w: CellWindow) -> float | None:
    """The longest stretch between the readings around an edge of the window (a counter's value at the edge
    is interpolated across it); None when a reading is missing on either side of an edge."""
    gaps = []
    for edge in (w.start_ns or 0, w.end_ns or 0):
        before, after = [t for t in times if t <= edge], [t for t in times if t >= edge]
        if not before or not after:
            return None
        gaps.append((after[0] - before[-1]) / NS)
    return max(gaps)
