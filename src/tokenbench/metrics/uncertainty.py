"""95 % intervals by the bootstrap, and verdicts on the difference between two cells. Pure functions.

Method (docs/metrics.md, "Intervals and verdicts"): percentile bootstrap with a fixed seed. A cell's
samples are grouped by repeat. Within one repeat the bootstrap resamples requests (latencies) or time
bins (throughputs: tokens or requests completed per bin of the measured window, so the interval of a
rate comes from how evenly it was delivered). With several repeats it resamples repeats too (two
stages: repeats with replacement, then requests within each), and the statistic is the mean over the
repeats of the per-repeat statistic, as the report shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95              # nominal coverage
BOOT = 1000               # bootstrap resamples
SEED = 20260101           # fixed: the same data gives the same interval
UNRELIABLE_N = 100        # a p99 from fewer requests than this is marked unreliable
MIN_EFFECT = 0.02         # differences below this share are "not detectable" (run-to-run drift)
CHUNK = 2_000_000         # values resampled at once (memory bound)
STATS = {"mean": None, "p50": 50.0, "p90": 90.0, "p99": 99.0}



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


Groups = Sequence[Sequence[float] | Clusters]


def values_of(g: Sequence[float] | Clusters) -> np.ndarray:
    return g.values if isinstance(g, Clusters) else np.asarray(g, dtype=float)


@dataclass(frozen=True)
class Interval:
    value: float          # the statistic on the data (mean over repeats of the per-repeat statistic)
    lo: float
    hi: float
    n: int                # samples (requests, values or bins) over all repeats
    unreliable: bool = False

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi


def _stat(x: np.ndarray, stat: str, axis: int | None = None) -> np.ndarray:
    q = STATS[stat]
    return np.mean(x, axis=axis) if q is None else np.percentile(x, q, axis=axis)


def _within(x: np.ndarray, stats: Sequence[str], boots: int, rng: np.random.Generator) -> np.ndarray:
    """(len(stats), boots) bootstrap replicates of each stat of x, from one set of resamples of x."""
    n = len(x)
    qs = [STATS[s] for s in stats]
    step = max(1, CHUNK // max(n, 1))
    out = []
    for b in range(0, boots, step):
        sample = np.sort(x[rng.integers(0, n, (min(step, boots - b), n))], axis=1)
        pcts = [q for q in qs if q is not None]
        found = dict(zip(pcts, np.percentile(sample, pcts, axis=1), strict=True)) if pcts else {}
        out.append(np.stack([sample.mean(axis=1) if q is None else found[q] for q in qs]))
    return np.concatenate(out, axis=1)


def _weighted_pct(v: np.ndarray, cum: np.ndarray, q: float) -> np.ndarray:
    """numpy's linear percentile q of each row's resample, given the sorted values `v` and the row-wise
    cumulative copy counts `cum` (the resample is v[j] repeated cum[j] - cum[j-1] times)."""
    total = cum[:, -1]
    h = (total - 1) * q / 100
    k = np.floor(h)
    j0 = (cum <= k[:, None]).sum(axis=1)
    j1 = np.minimum((cum <= (k + 1)[:, None]).sum(axis=1), len(v) - 1)
    return v[j0] + (h - k) * (v[j1] - v[j0])


def _within_clusters(c: Clusters, stats: Sequence[str], boots: int, rng: np.random.Generator) -> np.ndarray:
    """(len(stats), boots) replicates from resampling whole clusters: each resample draws as many
    clusters as there are, with replacement, and takes the statistic of all their values together."""
    m = len(c.sizes)
    order = np.argsort(c.values, kind="stable")
    v, owner = c.values[order], np.repeat(np.arange(m), c.sizes)[order]
    step = max(1, CHUNK // max(len(v), 1))
    out = []
    for b in range(0, boots, step):
        rows = min(step, boots - b)
        picks = rng.integers(0, m, (rows, m)) + (np.arange(rows) * m)[:, None]
        copies = np.bincount(picks.ravel(), minlength=rows * m).reshape(rows, m)
        weights = copies[:, owner]
        cum = np.cumsum(weights, axis=1)
        mean = (weights * v).sum(axis=1) / cum[:, -1]
        qs = [STATS[s] for s in stats]
        out.append(np.stack([mean if q is None else _weighted_pct(v, cum, q) for q in qs]))
    return np.concatenate(out, axis=1)


def _resample(g: Sequence[float] | Clusters, stats: Sequence[str], boots: int,
              rng: np.random.Generator) -> np.ndarray:
    if isinstance(g, Clusters):
        return _within_clusters(g, stats, boots, rng)
    return _within(np.asarray(g, dtype=float), stats, boots, rng)


def replicates_of(groups: Groups, stats: Sequence[str], boots: int = BOOT,
                  seed: int = SEED) -> dict[str, np.ndarray] | None:
    """Bootstrap replicates of the mean over groups of stat(group), for each of `stats` from the same
    resamples; None without data. One group: resample its elements; several: resample groups, then
    elements (or whole clusters) within each chosen group."""
    arrays = [g for g in groups if len(g)]
    if not arrays:
        return None
    rng = np.random.default_rng(seed)
    inner = np.stack([_resample(a, stats, boots, rng) for a in arrays])          # (groups, stats, boots)
    if len(arrays) == 1:
        reps = inner[0]
    else:
        picks = rng.integers(0, len(arrays), (boots, len(arrays)))
        reps = inner[picks, :, np.arange(boots)[:, None]].mean(axis=1).T     # (stats, boots)
    return dict(zip(stats, reps, strict=True))


def replicates(groups: Groups, stat: str, boots: int = BOOT, seed: int = SEED) -> np.ndarray | None:
    reps = replicates_of(groups, [stat], boots, seed)
    return None if reps is None else reps[stat]


def point(groups: Groups, stat: str) -> float | None:
    vals = [float(_stat(values_of(g), stat)) for g in groups if len(g)]
    return float(np.mean(vals)) if vals else None


def _bounds(reps: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(reps, [tail, 100 - tail])
    return float(lo), float(hi)


def interval(groups: Groups, stat: str, requests: int | None = None, boots: int = BOOT,
             seed: int = SEED) -> Interval | None:
    """The 95 % percentile-bootstrap interval of stat; `requests` (default: the sample count) decides
    whether a p99 is unreliable."""
    return from_replicates(groups, stat, replicates(groups, stat, boots, seed), requests)


def from_replicates(groups: Groups, stat: str, reps: np.ndarray | None, requests: int | None = None) -> Interval | None:
    value = point(groups, stat)
    if reps is None or value is None:
        return None
    n = sum(len(g) for g in groups)
    lo, hi = _bounds(reps)
    return Interval(value, lo, hi, n, stat == "p99" and (requests if requests is not None else n) < UNRELIABLE_N)


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
class Verdict:
    """How much faster B is than A (speed = 1/latency, or the throughput itself): b_speed/a_speed - 1."""
    change: float           # point estimate, e.g. 0.05 = B 5 % faster; negative: A faster
    lo: float
    hi: float
    detectable: float       # smallest difference this sample size can tell (>= MIN_EFFECT)
    winner: str | None      # "A", "B", or None (no difference detectable)

    def faster_by(self) -> tuple[float, float, float]:
        """(x, lo, hi): how much faster the winner is, in its own terms (A: a_speed/b_speed - 1)."""
        if self.winner != "A":
            return self.change, self.lo, self.hi
        return 1 / (1 + self.change) - 1, 1 / (1 + self.hi) - 1, 1 / (1 + self.lo) - 1


def speed_ratio(a: np.ndarray | float, b: np.ndarray | float, higher_is_better: bool):
    return (b / a if higher_is_better else a / b) - 1


def drift(groups: Groups, stat: str) -> float:
    """How much the statistic moved within a run: |stat(first half) - stat(second half)| / |stat(all)|
    over the samples in time order, the largest over the groups (0 when a group is too small)."""
    worst = 0.0
    for g in groups:
        x = values_of(g)
        if len(x) < 8:
            continue
        whole, a, b = (float(_stat(v, stat)) for v in (x, x[: len(x) // 2], x[len(x) // 2:]))
        worst = max(worst, abs(a - b) / abs(whole) if whole else 0.0)
    return worst


def verdict(a: Interval, reps_a: np.ndarray, b: Interval, reps_b: np.ndarray, higher_is_better: bool,
            min_effect: float = MIN_EFFECT, floor: float = 0.0) -> Verdict | None:
    """The change's percentile interval widened by `floor` on both sides (the drift within the runs,
    `drift`: the machine may have moved that much between them). A winner is named only when that
    interval excludes 0 and the change is at least `min_effect`."""
    if not a.value or not b.value or np.any(reps_a == 0) or np.any(reps_b == 0):
        return None
    change = float(speed_ratio(a.value, b.value, higher_is_better))
    lo, hi = _bounds(speed_ratio(reps_a, reps_b, higher_is_better))
    lo, hi = lo - floor, hi + floor
    detectable = max(min_effect, (hi - lo) / 2)
    real = (lo > 0 or hi < 0) and abs(change) >= min_effect
    return Verdict(change, lo, hi, detectable, ("B" if change > 0 else "A") if real else None)
