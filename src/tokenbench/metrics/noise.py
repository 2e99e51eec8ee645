"""Between-run noise, and the decisions that rest on it: a figure's random-effects model over runs, the
difference of two sides, Holm's step-down over many figures, equivalence within a margin, the minimum
detectable effect, and alpha spent over sequential looks. Pure functions in closed form; every quantile is
computed (Student's t from the regularized incomplete beta function), none read from a table.

The model (docs/metrics.md, "Between-run noise and the gate"): a positive figure's log in run j is
    y_j = mu + u_j + e_j,    u_j ~ N(0, tau^2) between runs,    e_j ~ N(0, w_j^2) within run j,
w_j its within-run relative standard error (the run's interval: metrics/uncertainty.py). The unit of the model
is a server launch, not a run: runs of one launch share what the launch drew, so they are averaged into one
observation first (`by_launch`). With repeated launches the sides' own spread estimates Var(y_j) = tau^2 + w_j^2
whole (a two-sample t-test on the logs); a side measured on one launch takes a noise floor for tau (earlier
launches of the same target and config, else `DEFAULT_FLOOR`) and adds its own w_j^2."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

import numpy as np

_NORMAL = NormalDist()
_TINY = 1e-300
_EPS = 1e-15


# distributions ------------------------------------------------------------------------------------
def normal_quantile(p: float) -> float:
    return _NORMAL.inv_cdf(p)


def normal_cdf(x: float) -> float:
    return _NORMAL.cdf(x)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction 1 / (1 + d1 / (1 + d2 / (1 + ...))) of the incomplete beta function, by
    the modified Lentz method: d_2m = m (b - m) x / ((a + 2m - 1)(a + 2m)),
    d_2m+1 = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))."""
    c, d, f = 1.0, 0.0, 1.0
    for j in range(1, 2000):
        m = j // 2
        num = (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)) if j % 2 == 0
               else -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + num / c
        c = c if abs(c) > _TINY else _TINY
        f *= c * d
        if abs(c * d - 1.0) < _EPS:
            break
    return 1.0 / f


def beta_inc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):                  # the fraction converges fast below its mean only
        return 1.0 - beta_inc(b, a, 1.0 - x)
    log_front = a * math.log(x) + b * math.log1p(-x) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    return math.exp(log_front) / a * _beta_fraction(a, b, x)


def t_tail(x: float, df: float) -> float:
    """P(T > x) for Student's t with `df` degrees of freedom (math.inf: the normal); computed directly in
    the tail (no 1 - cdf cancellation)."""
    if math.isinf(df):
        return 1.0 - normal_cdf(x)
    half = beta_inc(df / 2, 0.5, df / (df + x * x)) / 2
    return half if x >= 0 else 1.0 - half


def t_cdf(x: float, df: float) -> float:
    return 1.0 - t_tail(x, df)


def t_pdf(x: float, df: float) -> float:
    return math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
                    - (df + 1) / 2 * math.log1p(x * x / df))


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """Student's t quantile of `p` (0 < p < 1) with `df` > 0 degrees of freedom (math.inf: the normal):
    the closed form at 1 degree of freedom (Cauchy), else Newton's method on the tail from the normal
    quantile, kept inside a bracket (bisection where a step leaves it)."""
    if not 0.0 < p < 1.0 or not df > 0:
        raise ValueError(f"t quantile of p={p} with df={df}: p must be in (0, 1) and df > 0")
    if math.isinf(df):
        return normal_quantile(p)
    if df == 1:                                         # Cauchy: -cot(pi p), exact in either tail
        q = min(p, 1 - p)
        return math.copysign(1 / math.tan(math.pi * q), p - 0.5) if q < 0.5 else 0.0
    x = _upper_tail_point(min(p, 1 - p), df)
    return x if p > 0.5 else -x


def _upper_tail_point(q: float, df: float) -> float:
    """The x >= 0 with P(T > x) = q (q <= 0.5)."""
    lo, hi = 0.0, max(1.0, -normal_quantile(q))
    while t_tail(hi, df) > q:
        lo, hi = hi, 2 * hi
    x = min(max(-normal_quantile(q), lo), hi)
    for _ in range(200):
        gap = t_tail(x, df) - q
        if gap == 0.0:
            return x
        lo, hi = (x, hi) if gap > 0 else (lo, x)
        step = x + gap / t_pdf(x, df)
        x = step if lo < step < hi else (lo + hi) / 2
        if hi - lo < 1e-13 * max(1.0, x):
            break
    return x


# one figure over runs -----------------------------------------------------------------------------
@dataclass(frozen=True)
class RunFigure:
    """One run's figure (> 0), its within-run standard error (0: not known), and the server launch it was
    measured on (None: not recorded; the run is then a launch of its own)."""

    value: float
    se: float = 0.0
    launch: str | None = None

    @property
    def log(self) -> float:
        return math.log(self.value)

    @property
    def within(self) -> float:
        """Its within-run variance on the log scale (the delta method: (se / value)^2)."""
        return (self.se / self.value) ** 2


def by_launch(runs: Sequence[RunFigure]) -> list[RunFigure]:
    """A side's runs as the units its noise is judged in: the runs of one server launch share what that launch
    drew (its memory layout, its threads' placement, the host's state while it lived: docs/metrics.md, "Runs of
    one launch"), so together they are ONE observation, the geometric mean of their figures with their mean
    within-run variance over their number, mean(w_j^2) / m; a run whose launch is not recorded is a unit of its
    own. In the order each launch first appears."""
    groups: dict[str | tuple[str, int], list[RunFigure]] = {}
    for i, r in enumerate(runs):
        groups.setdefault(r.launch if r.launch is not None else ("run", i), []).append(r)
    return [_unit(g) for g in groups.values()]


def _unit(runs: Sequence[RunFigure]) -> RunFigure:
    if len(runs) == 1:
        return runs[0]
    m = len(runs)
    value = math.exp(sum(r.log for r in runs) / m)
    return RunFigure(value, value * math.sqrt(sum(r.within for r in runs) / m / m), runs[0].launch)


def units(base: Sequence[RunFigure], cand: Sequence[RunFigure]) -> tuple[list[RunFigure], list[RunFigure]]:
    """Both sides' units (`by_launch`), except where every run of both sides was measured on one and the same
    launch: what that launch drew is then common to both and cancels in their difference, so each run is a
    unit (as runs of one launch compare with each other)."""
    launches = {r.launch for r in (*base, *cand)}
    if len(launches) == 1 and None not in launches:
        return list(base), list(cand)
    return by_launch(base), by_launch(cand)


NoiseSource = Literal["repeats", "learned", "default"]


@dataclass(frozen=True)
class Noise:
    """How much a run's figure varies between runs, on the log scale (about its relative standard deviation),
    the degrees of freedom of that estimate (math.inf: taken as known) and where it came from: the sides' own
    repeated runs (`tau` is then the whole standard deviation of a run), or a floor for a side measured once:
    learned from earlier runs of the same target and config, or the default (each run's own within-run
    error is then added to it: `adds_within`)."""

    tau: float
    df: float
    source: NoiseSource
    units: int = 0            # the units it was learned from (launches: `by_launch`)

    @property
    def adds_within(self) -> bool:
        return self.source != "repeats"


def spread(groups: Sequence[Sequence[RunFigure]], source: NoiseSource = "repeats") -> Noise | None:
    """The runs' own spread: the pooled standard deviation of the logs around each group's mean,
    s = sqrt(sum (y_j - mean_g)^2 / df), df = sum (k_g - 1) (groups: the two sides, or the earlier runs of one
    configuration). It estimates Var(y_j) = tau^2 + w_j^2 whole: a run's within-run error is part of what
    makes runs differ, so it is not taken off. None below df 1."""
    used = [g for g in groups if len(g) >= 2]
    df = sum(len(g) - 1 for g in used)
    if df < 1:
        return None
    squares = sum(_squares([r.log for r in g]) for g in used)
    return Noise(math.sqrt(squares / df), df, source, sum(len(g) for g in used))


def _squares(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values)


def side_mean(runs: Sequence[RunFigure], noise: Noise) -> tuple[float, float]:
    """(mean, variance) of mu on the log scale: the runs weigh equally; a run's variance is tau^2 (the sides'
    spread), or tau^2 + w_j^2 under a floor, and the mean's is their mean over k. Not weighted by each run's
    own error: that is itself an estimate (a p99's, from order statistics the sample's extremes clip, may
    read 0), and such weights would let one run with an understated interval carry its side."""
    k = len(runs)
    within = sum(r.within for r in runs) / k if noise.adds_within else 0.0
    return sum(r.log for r in runs) / k, (noise.tau ** 2 + within) / k


# two sides ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shift:
    """The candidate against the baseline on one figure: d = log(candidate / baseline) with its standard
    error and degrees of freedom (those of the noise estimate: conservative)."""

    d: float
    se: float
    df: float

    @property
    def change(self) -> float:
        """candidate / baseline - 1."""
        return math.expm1(self.d)

    def p_value(self) -> float:
        """Two-sided p of no change: 2 P(T > |d| / se)."""
        if self.se <= 0:
            return 0.0 if self.d else 1.0
        return min(1.0, 2 * t_tail(abs(self.d) / self.se, self.df))

    def interval(self, alpha: float) -> tuple[float, float]:
        """The two-sided (1 - alpha) interval of the change, on the ratio scale: exp(d -+ t se) - 1."""
        half = t_quantile(1 - alpha / 2, self.df) * self.se
        return math.expm1(self.d - half), math.expm1(self.d + half)

    def equivalent(self, margin: float, alpha: float) -> bool:
        """Within the margin (two one-sided tests at `alpha`): the (1 - 2 alpha) interval of d lies inside
        (-log(1 + margin), log(1 + margin)), the ratio within [1 / (1 + margin), 1 + margin] (a margin of 0:
        never)."""
        half = t_quantile(1 - alpha, self.df) * self.se
        bound = math.log1p(margin)
        return -bound < self.d - half and self.d + half < bound

    def detectable(self, alpha: float, power: float) -> float:
        """The smallest change a two-sided test at `alpha` sees with probability `power`, as a ratio - 1:
        exp((t_{1 - alpha/2} + t_{power}) se) - 1, both at this shift's degrees of freedom."""
        return math.expm1((t_quantile(1 - alpha / 2, self.df) + t_quantile(power, self.df)) * self.se)


def shift(base: Sequence[RunFigure], cand: Sequence[RunFigure], noise: Noise) -> Shift:
    """d = mean_c - mean_b, se^2 = var_b + var_c (`side_mean`)."""
    (mb, vb), (mc, vc) = side_mean(base, noise), side_mean(cand, noise)
    return Shift(mc - mb, math.sqrt(vb + vc), noise.df)


# many figures -------------------------------------------------------------------------------------
def step_down(p_values: Sequence[float], levels: Sequence[float]) -> list[bool]:
    """A step-down test: sorted p_(1) <= ... <= p_(m), reject H_(1..i) while p_(i) <= levels[i - 1]."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > levels[rank]:
            break
        rejected[i] = True
    return rejected


def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down: sorted p_(1) <= ... <= p_(m), reject H_(1..i) while p_(i) <= alpha / (m - i + 1);
    the family-wise error rate is at most alpha whatever the dependence between the tests."""
    m = len(p_values)
    return step_down(p_values, [alpha / (m - rank) for rank in range(m)])


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p values: p~_(i) = max over j <= i of min(1, (m - j + 1) p_(j)); H_i is rejected at
    alpha exactly when p~_i <= alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    out = [1.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        out[i] = running
    return out


# sequential looks ---------------------------------------------------------------------------------
def obf_spent(alpha: float, fraction: float) -> float:
    """Alpha spent by information fraction t (Lan-DeMets, O'Brien-Fleming type):
    alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)); alpha(1) = alpha, alpha(0) = 0."""
    if fraction <= 0:
        return 0.0
    if fraction >= 1:
        return alpha                  # exactly (the formula gives it to rounding)
    return 2.0 - 2.0 * normal_cdf(normal_quantile(1 - alpha / 2) / math.sqrt(fraction))


def look_alpha(alpha: float, before: float, now: float) -> float:
    """The alpha spent between a look at fraction `before` and one at `now`: alpha(now) - alpha(before)."""
    return max(0.0, obf_spent(alpha, now) - obf_spent(alpha, before))


_GRID = 401                   # points of the continuation region a look's density is carried on


def _exit_mass(points: np.ndarray, mass: np.ndarray, step: float, bound: float) -> float:
    """P(|S_k| >= bound, S_{k-1} in the continuation region) for S_k = S_{k-1} + N(0, step): the mass that
    leaves at this look, from the earlier look's mass at `points`."""
    sd = math.sqrt(step)
    below = _norm_cdf_array((-bound - points) / sd)
    above = _norm_cdf_array((points - bound) / sd)
    return float(np.sum(mass * (below + above)))


_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
         -0.82215223, 0.17087277)


def _norm_cdf_array(x: np.ndarray) -> np.ndarray:
    """Phi(x) elementwise, from erfc's Chebyshev fit (fractional error below 1.2e-7 everywhere, the tails
    included: Press et al., Numerical Recipes, erfcc)."""
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.zeros_like(t)
    for c in reversed(_ERFC[1:]):
        poly = t * (c + poly)
    erfc = t * np.exp(-z * z + _ERFC[0] + poly)
    return np.where(x < 0, 0.5 * erfc, 1.0 - 0.5 * erfc)


def _carry(points: np.ndarray, mass: np.ndarray, step: float, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """The mass that stays inside (-bound, bound) at this look, on a fresh grid of that interval (midpoints,
    each point carrying the probability of its cell)."""
    edges = np.linspace(-bound, bound, _GRID + 1)
    sd = math.sqrt(step)
    cdf = _norm_cdf_array((edges[None, :] - points[:, None]) / sd)          # from each old point to each edge
    cells = (cdf[:, 1:] - cdf[:, :-1]) * mass[:, None]
    return (edges[1:] + edges[:-1]) / 2, cells.sum(axis=0)


@lru_cache(maxsize=4096)
def sequential_bounds(alpha: float, fractions: tuple[float, ...]) -> tuple[float, ...]:
    """Two-sided group-sequential boundaries on the z scale, one per look at information fractions
    0 < t_1 < ... < t_K <= 1, such that a test statistic crossing them errs, over all the looks, exactly with the
    alpha spent by then (Lan-DeMets spending of the O'Brien-Fleming type, `obf_spent`): look k's boundary c_k
    solves P(|Z_j| < c_j for j < k, |Z_k| >= c_k) = alpha(t_k) - alpha(t_{k-1}), Z_k = S(t_k) / sqrt(t_k) of a
    Brownian motion S (the statistic on all the runs so far: successive looks correlate as sqrt(t_j / t_k)).
    Computed by carrying the density of S over the continuation region from look to look (Armitage, McPherson
    and Rowe's recursion) and solving each boundary by bisection; a look that spends nothing has an infinite
    boundary. Union-bounding the looks instead (each at its increment alone) wastes most of alpha at the last
    one (its share 1.8 % of 5 % over four looks at 1/2, 2/3, 5/6, 1; here 3.9 %)."""
    out: list[float] = []
    points, mass = np.zeros(1), np.ones(1)
    before = 0.0
    for t in fractions:
        spend = look_alpha(alpha, before, t)
        step = t - before
        if step <= 0.0:                       # no information since the last look: nothing can cross
            out.append(math.inf)
            continue
        left = float(mass.sum())
        if spend <= 0.0 or spend >= left:
            bound = math.inf if spend <= 0.0 else 0.0
        else:
            lo, hi = 0.0, 40.0
            for _ in range(100):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if _exit_mass(points, mass, step, mid * math.sqrt(t)) > spend else (lo, mid)
            bound = hi
        out.append(bound)
        if math.isinf(bound):
            edges_bound = 8.0 * math.sqrt(t)             # nothing leaves: carry the whole density (to 8 sd)
            points, mass = _carry(points, mass, step, edges_bound)
        else:
            points, mass = _carry(points, mass, step, bound * math.sqrt(t))
        before = t
    return tuple(out)


def nominal_level(alpha: float, fractions: Sequence[float]) -> float:
    """The two-sided nominal significance level of the last look (2 (1 - Phi(c_K)), `sequential_bounds`): a
    figure is rejected at this look when its own two-sided p is at most this. One look at fraction 1: alpha."""
    fractions = tuple(fractions)
    if len(fractions) == 1 and fractions[0] >= 1.0:
        return alpha                  # exactly (the boundary gives it to the bisection's precision)
    bound = sequential_bounds(alpha, fractions)[-1]
    return 0.0 if math.isinf(bound) else 2.0 * (1.0 - normal_cdf(bound))


# decisions ----------------------------------------------------------------------------------------
Decision = Literal["regressed", "improved", "no change", "inconclusive"]


def worse_by(s: Shift, higher_is_better: bool) -> float:
    """How much worse the candidate is, on the log scale (> 0: worse; throughput down or latency up)."""
    return -s.d if higher_is_better else s.d


def decide(s: Shift, higher_is_better: bool, rejected: bool, alpha: float, min_effect: float) -> Decision:
    """regressed (improved): the test of no change rejected (Holm, over the gate) and the candidate worse
    (better) by at least `min_effect`; no change: equivalent within `min_effect` at `alpha`; else
    inconclusive."""
    worse = worse_by(s, higher_is_better)
    if rejected and abs(worse) >= math.log1p(min_effect):
        return "regressed" if worse > 0 else "improved"
    return "no change" if s.equivalent(min_effect, alpha) else "inconclusive"


# the default floor --------------------------------------------------------------------------------
# Between-run noise of each figure where nothing better is known (`spread`: the standard deviation of the
# figure's log between runs, about its relative standard deviation), measured on the embedded llama.cpp
# profile (cpu-smollm2-llamacpp, 1 thread, 4 slots) by bench/gate_aa.py: two sets of 8 runs of 64:32 at c=1
# and c=4, 24 requests each, relaunched every two runs (16 runs, 8 launches), on a 2-core host shared with
# other work (load average 2.9 to 12), pooled over both cells and sets (df 28). docs/metrics.md, "The default
# noise floor". A figure not listed takes the largest.
DEFAULT_FLOOR: dict[str, float] = {
    "output_throughput": 0.303, "request_throughput": 0.303,
    "mean_ttft_ms": 0.306, "median_ttft_ms": 0.343, "p99_ttft_ms": 0.306,
    "mean_tpot_ms": 0.314, "median_tpot_ms": 0.331, "p99_tpot_ms": 0.314,
    "mean_itl_ms": 0.318, "median_itl_ms": 0.341, "p99_itl_ms": 0.481,
    "mean_e2el_ms": 0.304, "median_e2el_ms": 0.323, "p99_e2el_ms": 0.309,
}
DEFAULT_FLOOR_DF = 28           # the degrees of freedom of that measurement
DEFAULT_FLOOR_RUNS = 16


def default_floor(key: str) -> Noise:
    """The default floor of the figure with summary key `key` (Metric.key)."""
    tau = DEFAULT_FLOOR.get(key, max(DEFAULT_FLOOR.values()))
    return Noise(tau, DEFAULT_FLOOR_DF, "default", DEFAULT_FLOOR_RUNS)
