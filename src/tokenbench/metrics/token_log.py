"""The token-bearing chunks of a cell's ok requests, in memory that does not grow with the cell.

Up to FOLD_CHUNKS chunks everything is exact: each chunk's arrival time and token count is kept
(12 bytes), and ITL percentiles are those of the sorted gaps. Past that, the kept chunks are folded,
FOLD_CHUNKS at a time, into
- an ITL histogram: log-linear buckets (2**SUB_BITS per power of two), so a percentile read from it
  is within a relative error of 2**-(SUB_BITS + 1) (0.098 %) of the exact one; the mean, standard
  deviation, minimum and maximum stay exact (running moments, merged batch by batch);
- tokens per STEP_NS (10 ms) of arrival time, so the steady window's output tokens count the two
  edge steps in proportion to their overlap: off by at most the tokens of those two steps.
So a cell of any length holds at most FOLD_CHUNKS chunks (3 MB) plus the histogram (a fixed 256 KB: 32,768 int64 buckets)
and 8 bytes per 10 ms of its duration. docs/metrics.md ("Large cells") states the same bounds.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING

from tokenbench.lazy import lazy_module
from tokenbench.metrics.request import PERCENTILES, describe

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")   # imported where first used (tokenbench/lazy.py)

FOLD_CHUNKS = 1 << 18            # exact up to this many token-bearing chunks in a cell
SUB_BITS = 9                     # histogram buckets per power of two: 512 (relative error 2**-10)
STEP_NS = 10_000_000             # steady-window token counts: per 10 ms of arrival time
BUCKETS = 64 << SUB_BITS         # every int64 gap has a bucket
MS = 1e6


class TokenLog:
    def __init__(self) -> None:
        self.t, self.c, self.n = array("q"), array("q"), array("q")   # times, counts; chunks per request
        self.folded = False
        self.hist = np.zeros(0, np.int64)
        self.moments = (0, 0.0, 0.0, math.inf, -math.inf)          # count, mean, M2, min, max (ns)
        self.t0: int | None = None                                   # steps count from here
        self.steps = np.zeros(0, np.int64)

    def add(self, times: list[int], counts: list[int]) -> None:
        self.t.extend(times)
        self.c.extend(counts[:len(times)])
        self.c.extend([0] * (len(times) - len(counts)))            # a chunk without a count carries none
        self.n.append(len(times))
        if len(self.t) >= FOLD_CHUNKS:
            self._fold()

    # ---- exact arrays, and folding them ----

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        def view(a: array) -> np.ndarray:
            return np.frombuffer(a, np.int64) if a else np.zeros(0, np.int64)
        return view(self.t), view(self.c), view(self.n)

    def _gaps(self) -> np.ndarray:
        """ns between consecutive chunks of each kept request (never across two requests)."""
        t, _, n = self._arrays()
        if len(t) < 2:
            return np.zeros(0, np.int64)
        gaps = np.diff(t)
        starts = np.cumsum(n)[:-1]                                  # where request k+1's chunks begin
        keep = np.ones(len(gaps), bool)
        keep[starts[(starts > 0) & (starts <= len(gaps))] - 1] = False
        return gaps[keep]

    def _fold(self) -> None:
        gaps = self._gaps()
        if not self.folded:
            self.folded, self.hist = True, np.zeros(BUCKETS, np.int64)
        self.hist += np.bincount(bucket_of(gaps), minlength=BUCKETS)
        self.moments = _merge(self.moments, gaps)
        self._count_steps()
        self.t, self.c, self.n = array("q"), array("q"), array("q")

    def _count_steps(self) -> None:
        t, c, _ = self._arrays()
        if not len(t):
            return
        first = int(t.min())
        if self.t0 is None:
            self.t0 = first
        elif first < self.t0:                                        # a later batch can reach back in time
            pad = -(-(self.t0 - first) // STEP_NS)
            self.steps = np.concatenate([np.zeros(pad, np.int64), self.steps])
            self.t0 -= pad * STEP_NS
        per = np.bincount((t - self.t0) // STEP_NS, weights=c, minlength=len(self.steps)).astype(np.int64)
        per[:len(self.steps)] += self.steps
        self.steps = per

    # ---- what the summary reads ----

    def itl(self, name: str = "itl") -> dict[str, float]:
        if not self.folded:
            return describe(self._gaps() / MS, name)
        self._fold()
        n, mean, m2, lo, hi = self.moments
        out = describe(np.zeros(0), name)
        if not n:
            return out
        out.update({f"mean_{name}_ms": mean / MS, f"std_{name}_ms": math.sqrt(m2 / n) / MS,
                    f"min_{name}_ms": lo / MS, f"max_{name}_ms": hi / MS,
                    f"median_{name}_ms": hist_percentile(self.hist, 50, lo, hi) / MS})
        for q in PERCENTILES:
            out[f"p{q}_{name}_ms"] = hist_percentile(self.hist, q, lo, hi) / MS
        return out

    def chunks(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Every chunk's time and each request's chunk count, while nothing was folded (else None)."""
        if self.folded:
            return None
        t, _, n = self._arrays()
        return t, n

    def gap_ranks(self) -> tuple[int, Callable[[float], float]]:
        """How many ITL gaps there are, and the gap (ms) at a fractional rank of their sorted order (read
        from the histogram once folded, within its stated error); outside the ranks none, as at_rank."""
        if not self.folded:
            gaps = np.sort(self._gaps()) / MS
            return len(gaps), lambda pos: at_rank(gaps, pos)
        self._fold()
        n, _, _, lo, hi = self.moments

        def at(pos: float) -> float:
            none = beyond_ranks(pos, n)
            return none if none is not None else hist_percentile(self.hist, 100.0 * pos / max(n - 1, 1), lo, hi) / MS
        return n, at

    def tokens_near(self, a: int, b: int) -> int:
        """At most how many tokens arrived in [a, b] (ns): exact while nothing was folded, else every
        10 ms step that touches it counted whole."""
        t, c, _ = self._arrays()
        exact = int(c[(t >= a) & (t <= b)].sum())
        if not self.folded or self.t0 is None or b < self.t0:
            return exact
        first, last = max(0, (a - self.t0) // STEP_NS), min(len(self.steps) - 1, (b - self.t0) // STEP_NS)
        return exact + int(self.steps[first:last + 1].sum())

    def tokens_between(self, a: int, b: int) -> int | float:
        """Tokens that arrived in [a, b] (ns): exact while nothing was folded."""
        t, c, _ = self._arrays()
        exact = int(c[(t >= a) & (t <= b)].sum())
        if not self.folded or self.t0 is None:
            return exact
        return exact + _steps_between(self.steps, self.t0, a, b)


def beyond_ranks(pos: float, n: int) -> float | None:
    """A fractional rank outside 0 .. n - 1 has no value: +inf above, -inf below; None inside."""
    if pos > n - 1:
        return math.inf
    if pos < 0:
        return -math.inf
    return None


def at_rank(sorted_values: np.ndarray, pos: float) -> float:
    """The value at a fractional rank (linear between ranks, as request.percentile); outside the ranks
    there is none: +inf above, -inf below."""
    n = len(sorted_values)
    if (none := beyond_ranks(pos, n)) is not None:
        return none
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo))


def bucket_of(v: np.ndarray) -> np.ndarray:
    """Log-linear bucket of each int64 (negatives as 0): the value itself below 2**SUB_BITS; above, its
    power of two `e` (bit length - SUB_BITS) and its next SUB_BITS bits below the leading one."""
    v = np.maximum(v, 0).astype(np.int64)
    exp = np.zeros(len(v), np.int64)
    big = v >= (1 << SUB_BITS)
    if big.any():
        _, e = np.frexp(v[big].astype(np.float64))                  # v = m * 2**e, 0.5 <= m < 1: e = bit length
        exp[big] = e.astype(np.int64) - SUB_BITS
        for _ in range(2):                                            # float rounding just below a power of two
            shifted = v[big] >> (exp[big] - 1)
            exp[big] += (shifted >= (2 << SUB_BITS)).astype(np.int64) - (shifted < (1 << SUB_BITS)).astype(np.int64)
    sub = np.where(exp > 0, (v >> np.maximum(exp - 1, 0)) - (1 << SUB_BITS), v)
    return exp << SUB_BITS | sub


def bucket_bounds(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first and last integer value of bucket(s) k, as float64."""
    k = np.asarray(k, np.int64)
    exp, sub = k >> SUB_BITS, k & ((1 << SUB_BITS) - 1)
    width = np.where(exp > 0, 2.0 ** np.maximum(exp - 1, 0), 1.0)
    low = np.where(exp > 0, ((1 << SUB_BITS) + sub) * width, sub.astype(np.float64))
    return low, low + width - 1


def hist_percentile(hist: np.ndarray, q: float, lo: float, hi: float) -> float:
    """`request.percentile` (linear between closest ranks) read from the histogram: each rank's value is
    its bucket's middle, clamped to the exact minimum and maximum."""
    total = int(hist.sum())
    pos = (total - 1) * q / 100.0
    r_lo = math.floor(pos)
    r_hi = min(r_lo + 1, total - 1)
    cum = np.cumsum(hist)
    k = np.searchsorted(cum, [r_lo + 1, r_hi + 1])                 # bucket holding each 0-based rank
    low, high = bucket_bounds(k)
    mid = np.clip((low + high) / 2, lo, hi)
    return float(mid[0] + (mid[1] - mid[0]) * (pos - r_lo))


def _merge(moments: tuple, gaps: np.ndarray) -> tuple:
    """Running count, mean, M2, min and max, merged with a batch (Chan et al.)."""
    n, mean, m2, lo, hi = moments
    k = len(gaps)
    if not k:
        return moments
    g = gaps.astype(np.float64)
    b_mean = float(g.mean())
    b_m2 = float(((g - b_mean) ** 2).sum())
    total = n + k
    delta = b_mean - mean
    return (total, mean + delta * k / total, m2 + b_m2 + delta * delta * n * k / total,
            min(lo, float(g.min())), max(hi, float(g.max())))


def _steps_between(steps: np.ndarray, t0: int, a: int, b: int) -> float:
    """Tokens in the steps overlapping [a, b], the two edge steps in proportion to their overlap."""
    first, last = max((a - t0) // STEP_NS, 0), min((b - t0) // STEP_NS, len(steps) - 1)
    if last < first:
        return 0.0
    i = np.arange(first, last + 1)
    start = t0 + i * STEP_NS
    overlap = (np.minimum(start + STEP_NS, b) - np.maximum(start, a)) / STEP_NS
    return float((steps[first:last + 1] * np.clip(overlap, 0.0, 1.0)).sum())
