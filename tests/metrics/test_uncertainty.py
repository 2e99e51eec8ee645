"""Closed-form intervals cover the true value at their nominal rate on synthetic data of known
distribution, and verdicts name a real 5 % difference and stay silent on none."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as st

from tokenbench.metrics import uncertainty as u

SIGMA, MU = 0.25, np.log(20.0)                 # lognormal "TTFT" around 20 ms, mildly skewed
TRUE = {"mean": float(np.exp(MU + SIGMA**2 / 2)), "p50": float(np.exp(MU))}


def _coverage(stat: str, trials: int, n: int, repeats: int = 1) -> float:
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(trials):
        iv = u.interval([rng.lognormal(MU, SIGMA, n) for _ in range(repeats)], stat)
        hits += iv.contains(TRUE[stat])
    return hits / trials


@pytest.mark.slow
def test_nominal_95_percent_intervals_of_the_mean_cover_93_to_97_percent():
    cov = _coverage("mean", trials=1000, n=100)
    print(f"coverage of the 95 % interval of the mean over 1000 trials: {cov:.3f}")
    assert 0.93 <= cov <= 0.97


@pytest.mark.slow
def test_nominal_95_percent_intervals_of_the_median_cover_93_to_97_percent():
    cov = _coverage("p50", trials=1000, n=200)
    print(f"coverage of the 95 % interval of the median over 1000 trials: {cov:.3f}")
    assert 0.93 <= cov <= 0.97


@pytest.mark.slow
def test_nominal_95_percent_intervals_of_the_p99_cover_93_to_97_percent():
    """The tail the reservoir is sized for: 1,000 requests."""
    truth = float(np.exp(MU + SIGMA * 2.3263478740408408))
    rng = np.random.default_rng(8)
    hits = [u.interval([rng.lognormal(MU, SIGMA, 1000)], "p99").contains(truth) for _ in range(1000)]
    print(f"coverage of the 95 % interval of the p99 over 1000 trials: {np.mean(hits):.3f}")
    assert 0.93 <= np.mean(hits) <= 0.97


@pytest.mark.slow
def test_intervals_over_three_repeats_cover_at_least_nominal():
    """Three repeats of the same distribution: the between-repeat t interval (2 degrees of freedom) or the
    combined within-repeat one, whichever is wider, covers at least 95 % (it is conservative)."""
    cov = _coverage("mean", trials=400, n=100, repeats=3)
    print(f"coverage of the 95 % interval of the mean over 3 repeats, 400 trials: {cov:.3f}")
    assert 0.95 <= cov <= 1.0


def test_interval_is_deterministic_and_marks_small_p99():
    x = np.random.default_rng(1).lognormal(MU, SIGMA, 80)
    a, b = u.interval([x], "p99"), u.interval([x], "p99")
    assert a == b and a.unreliable and a.lo <= a.value <= a.hi
    assert not u.interval([np.random.default_rng(1).lognormal(MU, SIGMA, 1000)], "p99").unreliable


def test_repeats_widen_the_interval_when_they_disagree():
    rng = np.random.default_rng(2)
    same = [rng.normal(20, 1, 200) for _ in range(3)]
    drift = [g + shift for g, shift in zip(same, (-2, 0, 2), strict=True)]
    w_same, w_drift = (u.interval(g, "mean") for g in (same, drift))
    assert w_drift.hi - w_drift.lo > 3 * (w_same.hi - w_same.lo)
    assert w_drift.value == pytest.approx(np.mean([g.mean() for g in drift]))


def test_bins_conserve_the_rate():
    events = [(1_000_000_000 + i * 10_000_000, 1.0) for i in range(100)]       # 100 tokens over 1 s
    rates = u.bins(events, 1_000_000_000, 2_000_000_000, 10)
    assert np.mean(rates) == pytest.approx(100.0) and len(rates) == 10


def _verdict(shift: float, seed: int):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(5.0, 0.3, 400), rng.normal(5.0 * (1 + shift), 0.3 * (1 + shift), 400)
    return u.verdict(u.interval([a], "mean"), u.interval([b], "mean"), higher_is_better=False)


def test_verdict_names_the_faster_side_with_an_interval_containing_the_truth():
    for seed in range(10):
        v = _verdict(0.05, seed)            # B's latency 5 % higher: A is faster by 1.05 - 1 = 5 %
        x, lo, hi = v.faster_by()
        assert v.winner == "A" and 0 < lo <= 0.05 <= hi and x == pytest.approx(0.05, abs=0.01)


def test_no_difference_is_not_detected_and_says_what_could_be():
    found = [_verdict(0.0, s).winner for s in range(20)]
    assert found.count(None) == 20
    v = _verdict(0.0, 0)
    assert v.detectable >= u.MIN_EFFECT and v.lo < 0 < v.hi


def test_drift_within_a_run_widens_the_verdict_and_hides_a_drift_sized_change():
    rng = np.random.default_rng(5)
    a = np.concatenate([rng.normal(5.0, 0.05, 200), rng.normal(5.4, 0.05, 200)])      # the machine moved 8 %
    b = rng.normal(5.2 * 1.03, 0.05, 400)                                               # 3 % slower than a's mean
    assert u.drift([a], "mean") == pytest.approx(0.4 / a.mean(), rel=0.05)
    ia, ib = u.interval([a], "mean"), u.interval([b], "mean")
    assert u.verdict(ia, ib, False).winner == "A"                    # blind to the drift
    v = u.verdict(ia, ib, False, floor=u.drift([a], "mean"))
    assert v.winner is None and v.detectable > 0.07


# ITL: a request's gaps are correlated (its batch, its prompt, its place in the run) ------------------
REQS, GAPS, LEVEL_SIGMA = 40, 32, 0.3          # each request's gaps share a level ~ lognormal(20 ms, 0.3)


def _requests(rng: np.random.Generator) -> list[np.ndarray]:
    levels = rng.lognormal(MU, LEVEL_SIGMA, REQS)
    return [lv * rng.lognormal(0.0, 0.05, GAPS) for lv in levels]


def _itl_coverage(trials: int, clustered: bool) -> float:
    truth = float(np.exp(MU + LEVEL_SIGMA**2 / 2) * np.exp(0.05**2 / 2))
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(trials):
        reqs = _requests(rng)
        group = u.Clusters.of(reqs) if clustered else np.concatenate(reqs)
        hits += u.interval([group], "mean").contains(truth)
    return hits / trials


@pytest.mark.slow
def test_itl_intervals_resample_whole_requests_and_cover_where_single_gaps_do_not():
    gaps, requests = _itl_coverage(100, clustered=False), _itl_coverage(300, clustered=True)
    print(f"coverage of the mean ITL: gaps independent {gaps:.3f} (100 trials), grouped by request {requests:.3f} (300)")
    assert gaps < 0.6                   # single gaps: the interval ignores that gaps come in requests
    assert 0.90 <= requests <= 0.98


@pytest.mark.slow
def test_itl_median_interval_grouped_by_request_covers_where_single_gaps_do_not():
    truth = float(np.exp(MU))          # median of level x noise: both lognormal around 1 and 20 ms
    rng = np.random.default_rng(12)
    grouped, single = [], []
    for _ in range(400):
        reqs = _requests(rng)
        grouped.append(u.interval([u.Clusters.of(reqs)], "p50").contains(truth))
        single.append(u.interval([np.concatenate(reqs)], "p50").contains(truth))
    print(f"coverage of the median ITL: grouped {np.mean(grouped):.3f}, single gaps {np.mean(single):.3f} (400)")
    assert 0.92 <= np.mean(grouped) <= 0.98 and np.mean(single) < 0.6


def test_woodruff_interval_is_between_the_order_statistics_binomial_ranks_give():
    """For independent values the percentile's interval ends are the sample quantiles at p -+ t se(p)."""
    x = np.random.default_rng(4).lognormal(MU, SIGMA, 400)
    iv = u.interval([x], "p90")
    band = u.t975(399) * np.sqrt(0.9 * 0.1 / 400)
    assert iv.lo == pytest.approx(np.percentile(x, 100 * (0.9 - band)))
    assert iv.hi == pytest.approx(np.percentile(x, 100 * (0.9 + band)))
    assert iv.value == pytest.approx(np.percentile(x, 90)) and not iv.unreliable


def test_t975_equals_scipy_at_every_degree_of_freedom():
    """By value at 1..200 and beyond (a quantile off at 7 or 19 degrees of freedom widens every interval)."""
    for df in [*range(1, 201), 250, 1000, 10**6, 2.5, 7.5]:
        assert u.t975(df) == pytest.approx(st.t.ppf(0.975, df), rel=1e-9), df
    assert u.t975(0) == u.t975(-3) == pytest.approx(st.norm.ppf(0.975), rel=1e-12)


def _reference_verdict(a: u.Interval, b: u.Interval, higher: bool, min_effect: float, floor: float,
                       between: u.Between) -> tuple[float, float, float, float, str | None]:
    change = (b.value / a.value if higher else a.value / b.value) - 1
    v = np.array([(a.se / a.value) ** 2, (b.se / b.value) ** 2, between.variance])
    dfs = np.array([a.df, b.df, between.df])
    finite = (v > 0) & np.isfinite(dfs)
    df = v.sum() ** 2 / (v[finite] ** 2 / dfs[finite]).sum() if finite.any() else np.inf
    half = st.t.ppf(0.975, df) * np.sqrt(v.sum())
    lo, hi = np.exp(np.log1p(change) - half) - 1 - floor, np.exp(np.log1p(change) + half) - 1 + floor
    winner = ("B" if change > 0 else "A") if (lo > 0 or hi < 0) and abs(change) >= min_effect else None
    return change, lo, hi, max(min_effect, (hi - lo) / 2), winner


def test_verdict_arithmetic_by_value_against_scipy():
    rng = np.random.default_rng(8)
    for _ in range(300):
        va, vb = rng.uniform(0.05, 500, 2)         # figures below 1 too (a request rate of 0.76/s)
        a = u.Interval(value=va, lo=0, hi=0, n=30, se=va * rng.uniform(0.001, 0.2), df=int(rng.integers(1, 60)))
        b = u.Interval(value=vb, lo=0, hi=0, n=30, se=vb * rng.uniform(0.001, 0.2), df=int(rng.integers(1, 60)))
        higher, min_effect, floor = bool(rng.integers(2)), float(rng.choice([0.0, 0.02, 0.1])), float(rng.choice([0, 0.01]))
        between = u.Between(float(rng.choice([0.0, 0.01, 0.09])), float(rng.choice([4, 14, math.inf])), "default")
        got = u.verdict(a, b, higher, min_effect, floor, between)
        want = _reference_verdict(a, b, higher, min_effect, floor, between)
        assert got is not None and got.noise == "default"
        assert (got.change, got.lo, got.hi, got.detectable) == pytest.approx(want[:4], rel=1e-9, abs=1e-12)
        assert got.winner == want[4]


def test_satterthwaite_degrees_of_freedom_by_value():
    assert u.satterthwaite([(0.01, 9), (0.01, 9)]) == pytest.approx(18)
    assert u.satterthwaite([(0.04, 4), (0.01, 20)]) == pytest.approx(0.05 ** 2 / (0.04 ** 2 / 4 + 0.01 ** 2 / 20))
    assert u.satterthwaite([(0.02, 3), (0.0, 1), (0.03, math.inf)]) == pytest.approx(0.05 ** 2 / (0.02 ** 2 / 3))
    assert u.satterthwaite([(0.02, math.inf)]) == math.inf and u.satterthwaite([(0.0, 5)]) == math.inf
    assert u.satterthwaite([(0.0, 0), (0.01, 5)]) == pytest.approx(5)     # a part of no variance: none below


def test_verdict_on_figures_below_one_and_at_zero():
    a, b = u.Interval(value=0.5, lo=0, hi=0, n=40, se=0.005, df=39), u.Interval(value=0.8, lo=0, hi=0, n=40, se=0.008, df=39)
    v = u.verdict(a, b, True)
    assert v is not None and v.winner == "B" and v.change == pytest.approx(0.6)
    assert u.verdict(a, u.Interval(value=0.0, lo=0, hi=0, n=40, se=0.1, df=39), True) is None
    assert u.verdict(u.Interval(value=0.0, lo=0, hi=0, n=40, se=0.1, df=39), a, True) is None
    assert u.verdict(a, u.Interval(value=0.8, lo=0, hi=0, n=1, se=0.0, df=0), True) is None


def test_a_between_run_floor_hides_what_within_run_errors_would_call():
    a, b = u.Interval(value=100.0, lo=0, hi=0, n=100, se=1.0, df=99), u.Interval(value=110.0, lo=0, hi=0, n=100, se=1.1, df=99)
    alone = u.verdict(a, b, False)
    floored = u.verdict(a, b, False, between=u.Between(2 * 0.1 ** 2, 14, "default"))
    assert alone is not None and alone.winner == "A" and alone.noise == "within"
    assert floored is not None and floored.winner is None and floored.noise == "default"
    assert floored.detectable > 0.25


def test_a_percentile_band_past_the_sample_extremes_is_unreliable():
    x = np.random.default_rng(6).lognormal(MU, SIGMA, 150)
    assert u.interval([x], "p99").unreliable            # 150 requests: the band passes the largest value
    assert not u.interval([x], "p50").unreliable


def test_verdict_needs_two_samples_per_side():
    one, many = u.interval([[5.0]], "mean"), u.interval([np.linspace(4, 6, 50)], "mean")
    assert u.verdict(one, many, False) is None and u.verdict(many, many, False).winner is None


def test_clusters_keep_their_values_for_point_and_drift():
    reqs = [[1.0, 2.0], [], [3.0, 4.0, 5.0]]
    c = u.Clusters.of(reqs)
    assert len(c) == 5 and list(c.sizes) == [2, 3]
    assert u.point([c], "mean") == 3.0 and u.point([c], "p50") == 3.0
    iv = u.interval([c], "p50")
    assert iv.lo <= iv.value <= iv.hi and iv.n == 5


def test_two_repeats_that_disagree_never_give_a_negative_lower_bound():
    """Two repeats far apart: the between-repeat t interval (1 degree of freedom) would reach below 0,
    but a rate or a latency cannot; the bound stops at 0 and the upper one is kept."""
    rng = np.random.default_rng(3)
    iv = u.interval([rng.normal(180, 5, 3), rng.normal(120, 5, 3)], "mean")
    assert iv.lo == 0.0 and iv.hi > 2 * iv.value


def test_one_repeat_standard_errors_and_degrees_of_freedom_by_value():
    rng = np.random.default_rng(21)
    x = rng.lognormal(MU, SIGMA, 40)
    mean, p50 = u.within(x, "mean"), u.within(x, "p50")
    assert mean.se == pytest.approx(np.std(x, ddof=1) / math.sqrt(40), rel=1e-12) and mean.df == 39
    half = st.t.ppf(0.975, 39) * mean.se
    assert (mean.lo, mean.hi) == (pytest.approx(x.mean() - half), pytest.approx(x.mean() + half))
    assert p50.df == 39 and p50.se == pytest.approx((p50.hi - p50.lo) / (2 * st.t.ppf(0.975, 39)))
    # ITL's cluster-robust standard error: sqrt(m / (m - 1) * sum (s_i - R k_i)^2) / sum k_i
    reqs = [list(rng.lognormal(MU, SIGMA, k)) for k in (3, 5, 2, 7, 4)]
    s_i, k_i = np.array([sum(r) for r in reqs]), np.array([len(r) for r in reqs])
    ratio = s_i.sum() / k_i.sum()
    want = math.sqrt(5 / 4 * float(((s_i - ratio * k_i) ** 2).sum())) / k_i.sum()
    itl = u.within(u.Clusters.of(reqs), "mean")
    assert itl.se == pytest.approx(want, rel=1e-12) and itl.df == 4 and itl.value == pytest.approx(ratio)


def test_a_mean_of_values_below_zero_keeps_its_lower_end():
    """Paired differences may be negative: no floor at 0 then (a latency or a rate is never below 0)."""
    x = np.array([-3.0, -1.0, 0.5, -2.0, 1.0, -0.5])
    iv = u.within(x, "mean")
    assert iv.lo < iv.value < iv.hi and iv.lo == pytest.approx(x.mean() - st.t.ppf(0.975, 5) * np.std(x, ddof=1) / math.sqrt(6))
    assert u.within(np.array([0.1, 0.2, 5.0]), "mean").lo == 0.0


def test_combine_by_value_the_wider_of_between_and_within():
    """k repeats: the mean of their values, half-width max(t_{k-1} sd / sqrt k, sqrt(sum h_j^2) / k)."""
    agree = [u.Interval(value=10.0, lo=8.0, hi=12.0, n=50, se=1.0, df=49), u.Interval(value=10.2, lo=8.2, hi=12.2, n=50, se=1.0, df=49),
             u.Interval(value=9.9, lo=7.9, hi=11.9, n=50, se=1.0, df=49)]
    iv = u.combine(agree)                          # within dominates: sqrt(3 x 2^2) / 3
    assert iv.value == pytest.approx(10.033333333) and iv.hi - iv.value == pytest.approx(math.sqrt(12) / 3)
    assert iv.se == pytest.approx(math.sqrt(3) / 3) and iv.df == 49 and iv.n == 150
    apart = [u.Interval(value=v, lo=v - 0.1, hi=v + 0.1, n=50, se=0.05, df=49) for v in (10.0, 14.0, 12.0)]
    iv = u.combine(apart)                          # between dominates: t_2 sd / sqrt 3
    between = np.std([10.0, 14.0, 12.0], ddof=1) / math.sqrt(3)
    assert iv.hi - iv.value == pytest.approx(st.t.ppf(0.975, 2) * between) and iv.df == 2
    assert iv.se == pytest.approx(between) and iv.lo == pytest.approx(12.0 - st.t.ppf(0.975, 2) * between)
    below = u.combine([u.Interval(value=v, lo=v - 0.1, hi=v + 0.1, n=50, se=0.05, df=49) for v in (-0.4, -0.6, -0.5)])
    assert below.lo < below.value == pytest.approx(-0.5)         # a negative mean keeps its lower end


def test_bins_place_each_event_in_its_own_bin():
    start, end = 0, 10_000_000_000                          # 10 s, 5 bins of 2 s
    events = [(int(t * 1e9), 1.0) for t in (0.5, 2.5, 2.6, 4.5, 7.0, 7.1, 7.2, 9.9, 12.0, -3.0)]
    assert u.bins(events, start, end, 5) == [1.0, 1.0, 0.5, 1.5, 1.0]    # before start: the first; after: the last


def test_two_samples_give_an_interval_one_none_and_a_p99_needs_100_requests():
    two = u.within(np.array([1.0, 3.0]), "mean")
    assert two.df == 1 and two.se == pytest.approx(1.0) and two.hi == pytest.approx(2.0 + st.t.ppf(0.975, 1))
    one = u.within(np.array([2.0]), "mean")
    assert (one.lo, one.hi, one.se, one.df) == (2.0, 2.0, 0.0, 0)
    x = np.random.default_rng(2).lognormal(MU, SIGMA, 2000)
    assert not u.interval([x], "p99", requests=100).unreliable
    assert u.interval([x], "p99", requests=99).unreliable


def test_repeats_are_unreliable_when_any_of_them_is():
    sure, unsure = u.Interval(value=10.0, lo=9.0, hi=11.0, n=50, se=0.5, df=49), u.Interval(value=10.1, lo=9.1, hi=11.1, n=50, unreliable=True, se=0.5, df=49)
    assert u.combine([sure, unsure]).unreliable and u.combine([unsure, sure]).unreliable
    assert not u.combine([sure, sure]).unreliable


def test_an_interval_holds_its_ends_and_scales_with_its_error():
    iv = u.Interval(value=1.0, lo=0.5, hi=2.0, n=10, se=0.25, df=9)
    assert iv.contains(0.5) and iv.contains(2.0) and iv.contains(1.0)
    assert not iv.contains(0.4999) and not iv.contains(2.0001)
    doubled, flipped = iv.scaled(2.0), iv.scaled(-3.0)
    assert (doubled.value, doubled.lo, doubled.hi, doubled.se, doubled.df) == (2.0, 1.0, 4.0, 0.5, 9)
    assert flipped.se == 0.75 and flipped.value == -3.0


def test_a_floor_at_zero_for_values_from_zero_and_the_fewest_degrees_of_freedom_over_repeats():
    iv = u.within(np.array([0.0, 0.0, 0.0, 5.0]), "mean")          # latencies of 0: still never below 0
    assert iv.lo == 0.0 and iv.hi > iv.value
    parts = [u.Interval(value=10.0, lo=8.0, hi=12.0, n=10, se=1.0, df=9), u.Interval(value=10.0, lo=8.0, hi=12.0, n=50, se=1.0, df=49)]
    assert u.combine(parts).df == 9                               # within-repeat errors: the fewer df
