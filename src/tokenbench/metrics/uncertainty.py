"""95 % intervals and verdicts on the difference between two cells. Pure functions, closed forms (no
resampling), so a report costs milliseconds per cell whatever its size.

Method (docs/metrics.md, "Intervals and verdicts"). Within one repeat: a mean has the t interval
(mean +- t * s / sqrt(n)); a percentile has Woodruff's distribution-free interval (the sample quantiles at
p -+ t * se(p), se(p) = sqrt(p (1 - p) / n)). ITL's gaps are grouped by request (clusters): the mean is the
ratio sum(gaps) / count(gaps) with a cluster-robust (linearised) standard error, and the percentile's se(p)
is that of the share of gaps below it, computed over requests. Several repeats: the figure is the mean of
the per-repeat figures, and its interval the wider of the between-repeat t interval (k - 1 degrees of
freedom) and the within-repeat half-widths combined. A verdict takes the log of the speed ratio, with
the two cells' relative standard errors combined.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenbench.metrics.noise import t_quantile

LEVEL = 0.95              # nominal coverage
Z = 1.959963984540054     # the normal quantile of 0.975
UNRELIABLE_N = 100        # a p99 from fewer requests than this is marked unreliable
MIN_EFFECT = 0.02         # differences below this share are "not detectable" (run-to-run drift)
STATS = {"mean": None, "p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}


def t975(df: float) -> float:
    """Student's t quantile of 0.975 with `df` degrees of freedom (metrics/noise.py computes it; the normal
    one for df < 1)."""
    return Z if df < 1 else t_quantile(0.975, df)


@dataclass(frozen=True, eq=False)
class Clusters:
    """One repeat's values grouped by the request they came from (ITL: a request's gaps, which share the
    request's batch, prompt and position in the run). `len` is the number of values."""
    values: np.ndarray    # every value, cluster after cluster, in time order
    sizes: np.ndarray     # values per cluster (each >= 1)

    @classmethod
    def of(cls, clusters: Sequence[Sequence[float]]) -> "Clusters":
        kept = [c for c in clusters if len(c)]
        values = np.concatenate([np.asarray(c, dtype=float) for c in kept]) if kept else np.zeros(0)
        return cls(values, np.asarray([len(c) for c in kept], dtype=np.int64))

    def __len__(self) -> int:
        return len(self.values)

    def sums(self, values: np.ndarray) -> np.ndarray:
        """Per cluster, the sum of `values` (one per value, in the same order)."""
        return np.add.reduceat(values, np.concatenate([[0], np.cumsum(self.sizes)[:-1]]))


Groups = Sequence[Sequence[float] | Clusters]


def values_of(g: Sequence[float] | np.ndarray | Clusters) -> np.ndarray:
    return g.values if isinstance(g, Clusters) else np.asarray(g, dtype=float)


@dataclass(frozen=True, kw_only=True)
class Interval:
    value: float          # the statistic on the data (mean over repeats of the per-repeat statistic)
    lo: float
    hi: float
    n: int                # samples (requests, values or bins) over all repeats
    unreliable: bool = False
    se: float = 0.0       # standard error of `value` (what verdicts combine)
    df: int = 0           # its degrees of freedom (0: normal)

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi

    def scaled(self, k: float) -> Interval:
        return Interval(value=self.value * k, lo=self.lo * k, hi=self.hi * k, n=self.n, unreliable=self.unreliable,
                        se=self.se * abs(k), df=self.df)


def _stat(x: np.ndarray, stat: str) -> float:
    q = STATS[stat]
    return float(np.mean(x) if q is None else np.percentile(x, q))


def point(groups: Groups, stat: str) -> float | None:
    vals = [_stat(values_of(g), stat) for g in groups if len(g)]
    return float(np.mean(vals)) if vals else None


# one repeat ----------------------------------------------------------------------------------------
def _units(g: np.ndarray | Clusters) -> int:
    """Independent units: requests (or bins), clusters for ITL."""
    return len(g.sizes) if isinstance(g, Clusters) else len(g)


def _mean_se(g: np.ndarray | Clusters) -> float:
    if isinstance(g, Clusters):
        m, total = len(g.sizes), float(g.sizes.sum())
        resid = g.sums(g.values) - g.values.sum() / total * g.sizes
        return math.sqrt(m / (m - 1) * float(resid @ resid)) / total
    return float(np.std(g, ddof=1)) / math.sqrt(len(g))


def _share_se(g: np.ndarray | Clusters, p: float, at: float) -> float:
    """Standard error of the share of values at most `at` (a cluster-robust one over requests for ITL)."""
    if not isinstance(g, Clusters):
        return math.sqrt(p * (1 - p) / len(g))
    below = g.sums((g.values <= at).astype(float))
    m, total = len(g.sizes), float(g.sizes.sum())
    resid = below - below.sum() / total * g.sizes
    return math.sqrt(m / (m - 1) * float(resid @ resid)) / total


def within(g: np.ndarray | Clusters, stat: str) -> Interval:
    """The interval of one repeat's statistic (t for a mean, never below 0 for values that are not; Woodruff
    for a percentile). `unreliable`:
    the percentile's band reaches past the sample's extremes, so the end there is not a 95 % bound."""
    x, units = values_of(g), _units(g)
    value = _stat(x, stat)
    if units < 2:
        return Interval(value=value, lo=value, hi=value, n=len(x))
    crit, q = t975(units - 1), STATS[stat]
    if q is None:
        se = _mean_se(g)
        floor = 0.0 if x.min() >= 0 else -math.inf          # latencies and rates are never negative
        return Interval(value=value, lo=max(floor, value - crit * se), hi=value + crit * se, n=len(x), se=se,
                        df=units - 1)
    p = q / 100
    band = crit * _share_se(g, p, value)
    lo_p, hi_p = p - band, p + band
    lo, hi = (float(v) for v in np.percentile(x, [100 * max(0.0, lo_p), 100 * min(1.0, hi_p)]))
    clipped = lo_p < 0.5 / len(x) or hi_p > 1 - 0.5 / len(x)
    return Interval(value=value, lo=min(lo, value), hi=max(hi, value), n=len(x), unreliable=clipped,
                    se=(hi - lo) / (2 * crit), df=units - 1)


# several repeats -----------------------------------------------------------------------------------
def combine(parts: Sequence[Interval]) -> Interval:
    """The mean over repeats of their statistics: the wider of the between-repeat t interval and the
    within-repeat half-widths added in quadrature (each / k)."""
    if len(parts) == 1:
        return parts[0]
    k = len(parts)
    vals = np.array([p.value for p in parts])
    value = float(vals.mean())
    between = float(np.std(vals, ddof=1)) / math.sqrt(k)
    half_b = t975(k - 1) * between
    half_w = math.sqrt(sum(((p.hi - p.lo) / 2) ** 2 for p in parts)) / k
    se_w = math.sqrt(sum(p.se**2 for p in parts)) / k
    se, df, half = (between, k - 1, half_b) if half_b >= half_w else (se_w, min(p.df for p in parts), half_w)
    lo = value - half if value < 0 else max(0.0, value - half)     # every figure here is >= 0
    return Interval(value=value, lo=lo, hi=value + half, n=sum(p.n for p in parts),
                    unreliable=any(p.unreliable for p in parts), se=se, df=df)


def interval(groups: Groups, stat: str, requests: int | None = None) -> Interval | None:
    """The 95 % interval of stat (mean over the groups of the per-group statistic); None without data.
    `requests` (default: the sample count) decides whether a p99 is unreliable."""
    parts = [within(g if isinstance(g, Clusters) else np.asarray(g, dtype=float), stat) for g in groups if len(g)]
    if not parts:
        return None
    iv = combine(parts)
    small = stat == "p99" and (requests if requests is not None else iv.n) < UNRELIABLE_N
    return Interval(value=iv.value, lo=iv.lo, hi=iv.hi, n=iv.n, unreliable=iv.unreliable or small, se=iv.se, df=iv.df)


def mean_interval(values: Sequence[float]) -> Interval:
    """The t interval of the mean of k independent values (k - 1 degrees of freedom), not clipped at 0:
    for paired differences (one per round), which may be negative. One value: no width (df 0)."""
    x = np.asarray(values, dtype=float)
    value = float(x.mean())
    if len(x) < 2:
        return Interval(value=value, lo=value, hi=value, n=len(x))
    se = float(np.std(x, ddof=1)) / math.sqrt(len(x))
    half = t975(len(x) - 1) * se
    return Interval(value=value, lo=value - half, hi=value + half, n=len(x), se=se, df=len(x) - 1)


# rates --------------------------------------------------------------------------------------------
def bins(events: Sequence[tuple[int, float]], start_ns: int, end_ns: int, count: int) -> list[float]:
    """Per-second rate in each of `count` equal bins of [start, end]: (time_ns, amount) events summed
    per bin. Their mean is exactly sum(amount) / (end - start)."""
    width = (end_ns - start_ns) / count
    out = [0.0] * count
    for t, amount in events:
        k = min(count - 1, max(0, int((t - start_ns) / width))) if width > 0 else 0
        out[k] += amount
    return [v / (width / 1e9) for v in out] if width > 0 else out


def bin_count(requests: int) -> int:
    """Bins of a cell's window for a rate's interval: one per ~4 requests, 5 to 30."""
    return max(5, min(30, requests // 4))


# verdicts -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """How much faster B is than A (speed = 1/latency, or the throughput itself): b_speed/a_speed - 1."""
    change: float           # point estimate, e.g. 0.05 = B 5 % faster; negative: A faster
    lo: float
    hi: float
    detectable: float       # smallest difference this sample size can tell (>= MIN_EFFECT)
    winner: str | None      # "A", "B", or None (no difference detectable)
    noise: str = "within"   # the between-run noise it took: "repeats", a floor ("learned", "default"), or none

    def faster_by(self) -> tuple[float, float, float]:
        """(x, lo, hi): how much faster the winner is, in its own terms (A: a_speed/b_speed - 1)."""
        if self.winner != "A":
            return self.change, self.lo, self.hi
        return 1 / (1 + self.change) - 1, 1 / (1 + self.hi) - 1, 1 / (1 + self.lo) - 1


def speed_ratio(a: float, b: float, higher_is_better: bool) -> float:
    return (b / a if higher_is_better else a / b) - 1


def drift(groups: Groups, stat: str) -> float:
    """How much the statistic moved within a run: |stat(first half) - stat(second half)| / |stat(all)|
    over the samples in time order, the largest over the groups (0 when a group is too small)."""
    worst = 0.0
    for g in groups:
        x = values_of(g)
        if len(x) < 8:
            continue
        whole, a, b = (_stat(v, stat) for v in (x, x[: len(x) // 2], x[len(x) // 2:]))
        worst = max(worst, abs(a - b) / abs(whole) if whole else 0.0)
    return worst


@dataclass(frozen=True)
class Between:
    """Between-run noise a verdict adds to the two cells' own errors: a variance on the log scale (a floor's
    tau^2 for each side measured once), the degrees of freedom of its estimate, and where it came from."""
    variance: float = 0.0
    df: float = math.inf
    source: str = "within"


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """The degrees of freedom of a sum of variance estimates (v_i with df_i each): (sum v_i)^2 /
    sum (v_i^2 / df_i) (Welch-Satterthwaite); a part taken as known (df inf) or of no variance adds nothing
    below. inf where every part is known."""
    total = sum(v for v, _ in parts)
    below = sum(v * v / df for v, df in parts if v > 0 and not math.isinf(df))
    return total * total / below if below > 0 else math.inf


def verdict(a: Interval, b: Interval, higher_is_better: bool, min_effect: float = MIN_EFFECT,
            floor: float = 0.0, between: Between = Between()) -> Comparison | None:
    """The change's interval: log(speed_B / speed_A) +- t * sqrt(se_A^2 / A^2 + se_B^2 / B^2 + between) (the
    delta method on each cell's standard error, plus the between-run variance of the sides measured once; t
    at the Welch-Satterthwaite degrees of freedom of that sum, `satterthwaite`), back on the ratio scale and
    widened by `floor` on both sides (the drift within the runs, `drift`: the machine may have moved that
    much between them). A winner is named only when that interval excludes 0 and the change is at least
    `min_effect`. None without a standard error on either side (fewer than two samples)."""
    if a.value <= 0 or b.value <= 0 or a.df < 1 or b.df < 1:
        return None
    change = speed_ratio(a.value, b.value, higher_is_better)
    parts = ((a.se / a.value) ** 2, a.df), ((b.se / b.value) ** 2, b.df), (between.variance, between.df)
    spread = math.sqrt(sum(v for v, _ in parts)) * t975(satterthwaite(parts))
    center = math.log1p(change)
    lo, hi = math.expm1(center - spread) - floor, math.expm1(center + spread) + floor
    detectable = max(min_effect, (hi - lo) / 2)
    real = (lo > 0 or hi < 0) and abs(change) >= min_effect
    return Comparison(change, lo, hi, detectable, ("B" if change > 0 else "A") if real else None, between.source)
