"""A cell cut into timeslices of equal width (default 10 s, `--timeslice-s`): the figures of each slice,
whether the cell reached a steady state, and how much a long cell drifted between its first and last
slices. Pure: from the tally's columns (metrics/tally.py) and the monitor's samples. Formulas:
docs/metrics.md ("Timeslices, steady state and drift").

Slice k covers [t0 + k*w, t0 + (k+1)*w) with t0 the cell's first intended send; the last one ends at the
last request's end (it may be shorter). A request's latencies count in the slice it was sent in; its
tokens in the slices they arrived in; a completion or a failure in the slice it ended in."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from tokenbench.lazy import lazy_module
from tokenbench.metrics.summary_groups import Group

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")   # imported where first used (tokenbench/lazy.py)

STEADY_SLICES = 3        # steady state is judged on the last this many full slices
STEADY_SPREAD = 0.10     # ... whose output tok/s lie within this share of their mean (max - min <= 10 %)
DRIFT_MAX = 0.10         # a sustain cell drifted when a figure moved this much, detectably, first to last
FULL = 0.999             # a slice at least this share of the width long is full
NS = 1e9
Opt = list[float | None]


class Timeslices(Group):
    """Per-slice figures of one cell (lists, one entry per slice), and its steady-state verdict."""

    PREFIX: ClassVar[str] = "slice_"
    width_s: float | None = None
    t0_ns: int | None = None                   # where slice 0 starts: the first intended send
    start_s: list[float] | None = None         # each slice's start, s after t0
    span_s: list[float] | None = None          # its length (the last may be shorter)
    sent: list[int] | None = None
    completed: list[int] | None = None         # ok requests that ended in it
    errors: list[int] | None = None            # failed requests that ended in it
    output_tps: list[float] | None = None      # tokens that arrived in it / its span
    ttft_mean_ms: Opt | None = None            # requests sent in it
    ttft_p99_ms: Opt | None = None
    tpot_mean_ms: Opt | None = None
    monitor_samples: list[int] | None = None   # the monitor's reads in it (ticks of any sampler)
    running_mean: Opt | None = None
    waiting_max: Opt | None = None
    kv_usage_max: Opt | None = None
    steady: bool | None = None                 # None: fewer than STEADY_SLICES full slices
    steady_spread: float | None = None         # (max - min) / mean output tok/s of those slices

    def __len__(self) -> int:
        return len(self.start_s or [])

    def full(self) -> list[int]:
        """Indices of the slices as wide as asked."""
        w = self.width_s or 0.0
        return [k for k, span in enumerate(self.span_s or []) if span >= FULL * w]

    def with_monitor(self, samples: Iterable[tuple[int, str, float]]) -> Timeslices:
        """The same slices with the monitor's samples (t_ns, name, value) per slice: its reads (distinct
        times) and the server's running, waiting and KV use (common names: monitor/samples.py)."""
        if self.t0_ns is None or not self.width_s or not len(self):
            return self
        edges = _edges(self.t0_ns, self.width_s, len(self))
        per: list[list[tuple[str, float]]] = [[] for _ in range(len(self))]
        ticks: list[set[int]] = [set() for _ in range(len(self))]
        for t_ns, name, value in samples:
            k = int(np.searchsorted(edges, t_ns, side="right")) - 1
            if 0 <= k < len(self):
                per[k].append((name, value))
                ticks[k].add(t_ns)
        return self.model_copy(update={
            "monitor_samples": [len(t) for t in ticks], "running_mean": [_mean(p, "running") for p in per],
            "waiting_max": [_max(p, "waiting") for p in per], "kv_usage_max": [_max(p, "kv_usage") for p in per]})


@dataclass(frozen=True, kw_only=True)
class Columns:
    """What the slices are made of, in ns (the tally's columns): every request's send, end and intended
    start; the ok ones' send, end, first and last token and output tokens; and a token counter by arrival
    time."""

    sent: np.ndarray
    end: np.ndarray
    intended: np.ndarray
    ok_sent: np.ndarray
    ok_end: np.ndarray
    ok_first: np.ndarray
    ok_out: np.ndarray
    ok_last: np.ndarray


def _edges(t0: int, width_s: float, n: int) -> np.ndarray:
    return t0 + (np.arange(n + 1) * width_s * NS).astype(np.int64)


def _slot(t: np.ndarray, t0: int, width_s: float, n: int) -> np.ndarray:
    return np.clip(((t - t0) // int(width_s * NS)).astype(np.int64), 0, n - 1)


def compute(cols: Columns, tokens_between, width_s: float) -> Timeslices | None:
    """The cell's slices; `tokens_between(a_ns, b_ns)` counts tokens that arrived in [a, b]."""
    if not len(cols.sent):
        return None
    t0, t_end = int(cols.intended.min()), int(cols.end.max())
    n = max(1, math.ceil((t_end - t0) / (width_s * NS)))
    edges = _edges(t0, width_s, n)
    spans = [max(min(int(edges[k + 1]), t_end) - int(edges[k]), 1) / NS for k in range(n)]
    done = np.bincount(_slot(cols.ok_end, t0, width_s, n), minlength=n)
    ended = np.bincount(_slot(cols.end, t0, width_s, n), minlength=n)
    tps = [float(tokens_between(int(edges[k]), int(edges[k + 1]) - 1)) / spans[k] for k in range(n)]
    out = Timeslices(width_s=width_s, t0_ns=t0, start_s=[k * width_s for k in range(n)], span_s=spans,
                     sent=np.bincount(_slot(cols.sent, t0, width_s, n), minlength=n).tolist(),
                     completed=done.tolist(), errors=(ended - done).tolist(), output_tps=tps,
                     **_latencies(cols, t0, width_s, n))
    return out.model_copy(update=dict(zip(("steady", "steady_spread"), steady(out), strict=True)))


def _latencies(cols: Columns, t0: int, width_s: float, n: int) -> dict[str, Opt]:
    has = cols.ok_first >= 0
    slot = _slot(cols.ok_sent, t0, width_s, n)
    ttft = (cols.ok_first - cols.ok_sent) / 1e6
    multi = has & (cols.ok_out >= 2)
    tpot = (cols.ok_last - cols.ok_first) / np.maximum(cols.ok_out - 1, 1) / 1e6     # the cell's TPOT: to the last token
    return {"ttft_mean_ms": [_stat(ttft[has & (slot == k)], None) for k in range(n)],
            "ttft_p99_ms": [_stat(ttft[has & (slot == k)], 99.0) for k in range(n)],
            "tpot_mean_ms": [_stat(tpot[multi & (slot == k)], None) for k in range(n)]}


def _stat(x: np.ndarray, q: float | None) -> float | None:
    """A slice's mean (exactly rounded, so the same in any order of its requests) or percentile."""
    if not len(x):
        return None
    return math.fsum(x.tolist()) / len(x) if q is None else float(np.percentile(x, q))


def _mean(p: list[tuple[str, float]], name: str) -> float | None:
    vals = [v for k, v in p if k == name]
    return sum(vals) / len(vals) if vals else None


def _max(p: list[tuple[str, float]], name: str) -> float | None:
    vals = [v for k, v in p if k == name]
    return max(vals) if vals else None


def steady(s: Timeslices) -> tuple[bool | None, float | None]:
    """(steady, spread): the last STEADY_SLICES full slices' output tok/s within STEADY_SPREAD of their
    mean, max minus min; (None, None) with fewer full slices (too short to tell)."""
    full = s.full()
    if len(full) < STEADY_SLICES or s.output_tps is None:
        return None, None
    tps = [s.output_tps[k] for k in full[-STEADY_SLICES:]]
    mean = sum(tps) / len(tps)
    if mean <= 0:
        return False, None
    spread = (max(tps) - min(tps)) / mean
    return spread <= STEADY_SPREAD, spread


DriftFigure = Literal["output_tps", "ttft_mean_ms", "tpot_mean_ms"]


@dataclass(frozen=True, kw_only=True)
class Drift:
    """One figure's move from the first quarter of a cell's full slices to the last: the means over those
    slices, the relative change (last / first - 1) and its 95 % interval when each side has two slices or
    more; `drifted` when it moved at least DRIFT_MAX, beyond its interval."""

    figure: DriftFigure
    first: float
    last: float
    change: float
    lo: float | None
    hi: float | None
    slices: int                        # slices on each side
    drifted: bool


def drift(s: Timeslices, figures: tuple[DriftFigure, ...] = ("output_tps", "ttft_mean_ms", "tpot_mean_ms")
          ) -> list[Drift]:
    """How the cell's figures moved between its first and last slices (none with fewer than 2 full slices)."""
    full = s.full()
    if len(full) < 2:
        return []
    q = max(1, len(full) // 4)
    out = []
    for name in figures:
        values = getattr(s, name) or []
        a = [v for k in full[:q] if k < len(values) and (v := values[k]) is not None]
        b = [v for k in full[-q:] if k < len(values) and (v := values[k]) is not None]
        if a and b:
            out.append(_moved(name, a, b))
    return out


def _moved(name: DriftFigure, a: list[float], b: list[float]) -> Drift:
    first, last = sum(a) / len(a), sum(b) / len(b)
    change = last / first - 1 if first else 0.0
    from tokenbench.metrics import uncertainty as u  # intervals: only a drift (a sustain cell) needs them
    ia, ib = u.interval([a], "mean"), u.interval([b], "mean")
    v = u.verdict(ia, ib, True, DRIFT_MAX) if ia is not None and ib is not None else None
    lo, hi = (v.lo, v.hi) if v is not None else (None, None)
    detectable = v.winner is not None if v is not None else abs(change) >= DRIFT_MAX
    return Drift(figure=name, first=first, last=last, change=change, lo=lo, hi=hi, slices=len(a),
                 drifted=detectable and abs(change) >= DRIFT_MAX)
