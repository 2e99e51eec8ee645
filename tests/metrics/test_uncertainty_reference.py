"""metrics/uncertainty.py against references: Student's t from scipy, each interval by the formula docs/metrics.md
("Intervals and verdicts") states, written out here with plain loops and scipy, over any data hypothesis draws;
and each boundary of a rule (the floor at 0, the unreliable band's ends, the 100-request p99, the bins' count,
the minimum effect, a figure of at most 1) on both of its sides."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tokenbench.metrics import uncertainty as u

REL = 1e-9
TT = 3e-5          # the t table's four decimals, relative
values = st.lists(st.floats(0.5, 500.0), min_size=2, max_size=60)
signed = st.lists(st.floats(-50.0, 50.0), min_size=2, max_size=40)
clusters = st.lists(st.lists(st.floats(1.0, 100.0), min_size=1, max_size=8), min_size=2, max_size=12)


def students(df: int) -> float:
    return float(stats.t.ppf(0.975, df)) if df >= 1 else float(stats.norm.ppf(0.975))


t = u.t975     # the references below take the t the tests above check against scipy's


# ---- Student's t -------------------------------------------------------------------------------
@pytest.mark.parametrize("df", [*range(1, 31), 31, 32, 35, 40, 50, 60, 80, 100, 120, 200, 500, 1000, 10**4, 10**6])
def test_t_is_students_quantile_at_any_degrees_of_freedom(df):
    """t975 is metrics/noise.py's t quantile (no table, no truncated expansion): scipy's to 1e-9."""
    assert u.t975(df) == pytest.approx(students(df), rel=1e-9)


@pytest.mark.parametrize("df", [0, -1, -5])
def test_no_degrees_of_freedom_take_the_normal_quantile(df):
    assert u.t975(df) == pytest.approx(students(0), abs=1e-12)
    assert u.Z == pytest.approx(students(0), abs=1e-12)


def test_the_coverage_constants():
    assert u.LEVEL == 0.95 and u.UNRELIABLE_N == 100 and u.MIN_EFFECT == 0.02
    assert u.STATS == {"mean": None, "p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}


# ---- one repeat --------------------------------------------------------------------------------
@settings(deadline=None)
@given(values)
def test_a_mean_of_values_never_negative_is_the_t_interval_floored_at_0(xs):
    x = np.asarray(xs)
    iv = u.within(x, "mean")
    mean, sem = math.fsum(xs) / len(xs), float(stats.sem(x))
    lo, hi = stats.t.interval(0.95, len(xs) - 1, loc=mean, scale=sem) if sem else (mean, mean)
    table = TT * (hi - mean) + 1e-9                  # the t table's four decimals
    assert iv.value == pytest.approx(mean, rel=REL)
    assert iv.lo == pytest.approx(max(0.0, lo), abs=table)
    assert iv.hi == pytest.approx(hi, abs=table)
    assert iv.se == pytest.approx(sem, rel=1e-6, abs=1e-12) and iv.df == len(xs) - 1 and iv.n == len(xs)
    assert not iv.unreliable


@settings(deadline=None)
@given(signed)
def test_a_mean_of_values_below_0_is_not_floored(xs):
    x = np.asarray(xs)
    iv = u.within(x, "mean")
    half = t(len(xs) - 1) * float(stats.sem(x))
    floor = 0.0 if min(xs) >= 0 else -math.inf
    assert iv.lo == pytest.approx(max(floor, float(np.mean(x)) - half), rel=1e-9, abs=1e-9)


def test_the_floor_at_0_holds_for_values_at_least_0_only():
    """0 itself is a value a latency can take: the floor stays; a value just below 0 lifts it."""
    at_zero = u.within(np.array([0.0, 0.0, 0.0, 9.0]), "mean")
    below = u.within(np.array([-1e-9, 0.0, 0.0, 9.0]), "mean")
    assert at_zero.lo == 0.0
    assert below.lo == pytest.approx(2.25 - t(3) * float(stats.sem([0, 0, 0, 9.0])), rel=1e-6) and below.lo < -4


def test_one_value_has_no_width():
    for stat in u.STATS:
        iv = u.within(np.array([7.5]), stat)
        assert (iv.value, iv.lo, iv.hi, iv.n, iv.se, iv.df, iv.unreliable) == (7.5, 7.5, 7.5, 1, 0.0, 0, False)


def _woodruff(x: np.ndarray, p: float, se_p: float, units: int) -> tuple[float, float, float, bool, float]:
    """(value, lo, hi, unreliable, se) of the percentile p by the documented formula."""
    crit = t(units - 1)
    value = float(np.percentile(x, 100 * p))
    lo_p, hi_p = p - crit * se_p, p + crit * se_p
    lo = float(np.percentile(x, 100 * min(1.0, max(0.0, lo_p))))
    hi = float(np.percentile(x, 100 * min(1.0, max(0.0, hi_p))))
    clipped = lo_p < 0.5 / len(x) or hi_p > 1 - 0.5 / len(x)
    return value, min(lo, value), max(hi, value), clipped, (hi - lo) / (2 * crit)


@settings(deadline=None)
@given(st.lists(st.floats(0.5, 500.0), min_size=2, max_size=300), st.sampled_from(["p50", "p90", "p95", "p99"]))
def test_a_percentile_is_woodruffs_interval(xs, stat):
    x = np.asarray(xs)
    p = u.STATS[stat] / 100
    value, lo, hi, clipped, se = _woodruff(x, p, math.sqrt(p * (1 - p) / len(x)), len(x))
    iv = u.within(x, stat)
    assert (iv.value, iv.lo, iv.hi) == pytest.approx((value, lo, hi), rel=REL)
    assert iv.unreliable == clipped and iv.se == pytest.approx(se, rel=1e-6, abs=1e-12)
    assert iv.df == len(xs) - 1 and iv.n == len(xs)


@pytest.mark.parametrize("n", range(2, 400))
def test_the_unreliable_band_ends_half_a_value_inside_the_extremes(n):
    """p90 over n distinct values: marked exactly where p -+ t se(p) passes 0.5 / n or 1 - 0.5 / n."""
    x = np.arange(1.0, n + 1.0)
    band = t(n - 1) * math.sqrt(0.9 * 0.1 / n)
    assert u.within(x, "p90").unreliable == (0.9 - band < 0.5 / n or 0.9 + band > 1 - 0.5 / n)


def _robust(groups: list[list[float]], per_value) -> float:
    """The cluster-robust standard error of sum(per_value) / count, by loops."""
    m, total = len(groups), sum(len(g) for g in groups)
    a = [sum(per_value(v) for v in g) for g in groups]
    ratio = sum(a) / total
    return math.sqrt(m / (m - 1) * sum((a_i - ratio * len(g)) ** 2 for a_i, g in zip(a, groups, strict=True))) / total


@settings(deadline=None)
@given(clusters)
def test_a_mean_of_clusters_has_the_cluster_robust_standard_error(groups):
    c = u.Clusters.of(groups)
    every = [v for g in groups for v in g]
    iv = u.within(c, "mean")
    se = _robust(groups, lambda v: v)
    mean = math.fsum(every) / len(every)
    assert iv.value == pytest.approx(mean, rel=REL) and iv.se == pytest.approx(se, rel=1e-6, abs=1e-12)
    assert iv.df == len(groups) - 1 and iv.n == len(every)
    assert iv.hi == pytest.approx(mean + t(len(groups) - 1) * se, rel=1e-9)
    assert iv.lo == pytest.approx(max(0.0, mean - t(len(groups) - 1) * se), rel=1e-9, abs=1e-9)


@settings(deadline=None)
@given(clusters, st.sampled_from(["p50", "p90", "p99"]))
def test_a_percentile_of_clusters_takes_the_se_of_the_share_below_it_over_requests(groups, stat):
    c = u.Clusters.of(groups)
    x = np.asarray([v for g in groups for v in g])
    p = u.STATS[stat] / 100
    at = float(np.percentile(x, 100 * p))
    value, lo, hi, clipped, se = _woodruff(x, p, _robust(groups, lambda v: float(v <= at)), len(groups))
    iv = u.within(c, stat)
    assert (iv.value, iv.lo, iv.hi) == pytest.approx((value, lo, hi), rel=REL)
    assert iv.unreliable == clipped and iv.se == pytest.approx(se, rel=1e-6, abs=1e-12)
    assert iv.df == len(groups) - 1


def test_a_cluster_band_ending_just_inside_half_a_value_from_the_first_is_reliable():
    """p50 over 6 gaps of 3 requests: the band's low end, p - t se, lies at 0.516 / n, inside the edge 0.5 / n by
    less than a fortieth of a value (and the high end as far inside 1 - 0.5 / n): not unreliable."""
    groups = [[2.0, 6.0, 1.0], [1.0, 8.0], [2.0]]
    at = float(np.percentile([v for g in groups for v in g], 50))
    lo_p = 0.5 - t(2) * _robust(groups, lambda v: float(v <= at))
    assert 0.5 / 6 < lo_p < 0.52 / 6
    assert not u.within(u.Clusters.of(groups), "p50").unreliable


@pytest.mark.parametrize(("groups", "stat"), [([[2.0, 2.0], [2.0] * 3], "p90"), ([[3.0] * 4, [3.0] * 6], "p95"),
                                             ([[1.0] * 20, [1.0] * 30], "p99")])
def test_a_band_of_no_width_ending_exactly_half_a_value_from_the_last_is_reliable(groups, stat):
    """Every gap equal: each request's share below the percentile is 1, the cluster-robust se 0, so the band is p
    itself, and n is chosen so that p is exactly 1 - 0.5 / n (5 values at p90, 10 at p95, 50 at p99): the band
    reaches the edge, not past it."""
    c = u.Clusters.of(groups)
    p = u.STATS[stat] / 100
    assert u._share_se(c, p, groups[0][0]) == 0.0 and p == 1 - 0.5 / len(c)
    iv = u.within(c, stat)
    assert (iv.value, iv.lo, iv.hi, iv.unreliable) == (groups[0][0], groups[0][0], groups[0][0], False)


def test_the_share_below_counts_a_value_equal_to_the_percentile():
    """Two requests, each with one gap at the median: every value is at most it (share 1 in each request)."""
    c = u.Clusters.of([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])
    assert u._share_se(c, 0.5, 2.0) == pytest.approx(_robust([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]],
                                                             lambda v: float(v <= 2.0)), rel=1e-9)


@settings(deadline=None)
@given(clusters)
def test_cluster_sums_are_each_requests_sum(groups):
    c = u.Clusters.of(groups)
    assert list(c.sums(c.values)) == pytest.approx([math.fsum(g) for g in groups], rel=1e-12)
    assert list(c.sizes) == [len(g) for g in groups] and len(c) == sum(len(g) for g in groups)


def test_clusters_of_nothing_and_of_empty_requests():
    c = u.Clusters.of([[], []])
    assert len(c) == 0 and len(c.sizes) == 0
    assert u.interval([c], "mean") is None and u.point([c], "mean") is None


# ---- several repeats ---------------------------------------------------------------------------
def _combined(parts: list[u.Interval]) -> tuple[float, float, float, float, int]:
    """(value, lo, hi, se, df) by the documented rule: the wider of the between-repeat t interval and the
    within-repeat half-widths in quadrature / k; the low end floored at 0 unless the figure is below 0."""
    k = len(parts)
    vals = [p.value for p in parts]
    mean = math.fsum(vals) / k
    between = math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (k - 1)) / math.sqrt(k)
    half_b = t(k - 1) * between
    half_w = math.sqrt(math.fsum(((p.hi - p.lo) / 2) ** 2 for p in parts)) / k
    if half_b >= half_w:
        se, df, half = between, k - 1, half_b
    else:
        se, df, half = math.sqrt(math.fsum(p.se**2 for p in parts)) / k, min(p.df for p in parts), half_w
    lo = mean - half if mean < 0 else max(0.0, mean - half)
    return mean, lo, mean + half, se, df


@settings(deadline=None)
@given(st.lists(values, min_size=2, max_size=5), st.sampled_from(["mean", "p50", "p90"]))
def test_repeats_combine_by_the_documented_rule(groups, stat):
    parts = [u.within(np.asarray(g), stat) for g in groups]
    iv = u.combine(parts)
    value, lo, hi, se, df = _combined(parts)
    assert (iv.value, iv.lo, iv.hi) == pytest.approx((value, lo, hi), rel=1e-9, abs=1e-9)
    assert iv.se == pytest.approx(se, rel=1e-9, abs=1e-12) and iv.df == df
    assert iv.n == sum(len(g) for g in groups) and iv.unreliable == any(p.unreliable for p in parts)


def _part(value: float, half: float, se: float, df: int, n: int = 10, unreliable: bool = False) -> u.Interval:
    return u.Interval(value=value, lo=value - half, hi=value + half, n=n, unreliable=unreliable, se=se, df=df)


def test_repeats_that_agree_keep_the_within_half_widths_and_their_fewest_degrees_of_freedom():
    parts = [_part(10.0, 3.0, 1.5, 9), _part(10.0, 4.0, 2.0, 5, n=6)]
    iv = u.combine(parts)
    assert (iv.lo, iv.hi) == pytest.approx((7.5, 12.5)) and iv.se == pytest.approx(1.25) and iv.df == 5
    assert iv.n == 16 and not iv.unreliable
    assert u.combine([_part(10.0, 3.0, 1.5, 9), _part(10.0, 4.0, 2.0, 5, unreliable=True)]).unreliable


def test_repeats_that_disagree_take_the_between_repeat_interval():
    iv = u.combine([_part(10.0, 0.1, 0.05, 9), _part(12.0, 0.1, 0.05, 9), _part(14.0, 0.1, 0.05, 9)])
    between = 2.0 / math.sqrt(3)
    assert iv.value == 12.0 and iv.se == pytest.approx(between) and iv.df == 2
    assert (iv.lo, iv.hi) == pytest.approx((12 - students(2) * between, 12 + students(2) * between), rel=1e-4)


def test_a_figure_below_0_over_repeats_is_not_floored():
    iv = u.combine([_part(-1.0, 0.5, 0.25, 9), _part(-3.0, 0.5, 0.25, 9)])
    assert iv.value == -2.0 and iv.lo == pytest.approx(-2.0 - t(1) * 1.0, rel=1e-4)
    at_zero = u.combine([_part(0.0, 0.5, 0.25, 9), _part(0.0, 0.5, 0.25, 9)])
    assert at_zero.lo == 0.0 and at_zero.hi == pytest.approx(math.sqrt(0.5) / 2)


def test_one_repeat_is_its_own_interval():
    part = _part(5.0, 1.0, 0.5, 7)
    assert u.combine([part]) is part


@settings(deadline=None)
@given(st.lists(values, min_size=1, max_size=4), st.sampled_from(["mean", "p50", "p99"]))
def test_interval_combines_the_groups_with_data_and_marks_a_p99_of_fewer_than_100_requests(groups, stat):
    iv = u.interval([*groups, []], stat)
    ref = u.combine([u.within(np.asarray(g), stat) for g in groups])
    assert (iv.value, iv.lo, iv.hi, iv.se, iv.df, iv.n) == (ref.value, ref.lo, ref.hi, ref.se, ref.df, ref.n)
    assert iv.unreliable == (ref.unreliable or stat == "p99" and ref.n < 100)


@pytest.mark.parametrize(("requests", "marked"), [(99, True), (100, False), (1000, False), (0, True)])
def test_a_p99_is_unreliable_below_100_requests_whatever_its_samples(requests, marked):
    bins = [np.linspace(1.0, 2.0, 5000)]          # enough samples that the band itself is not clipped
    assert u.interval(bins, "p99", requests).unreliable == marked
    assert not u.interval(bins, "p90", requests).unreliable


@pytest.mark.parametrize(("n", "marked"), [(99, True), (100, False)])
def test_without_a_request_count_the_samples_decide_the_p99_mark(n, marked):
    x = np.linspace(1.0, 2.0, n)
    assert u.interval([x], "p99").unreliable == (marked or u.within(x, "p99").unreliable)
    assert u.interval([x], "p99").unreliable or not marked


def test_no_group_with_data_has_no_interval():
    assert u.interval([], "mean") is None and u.interval([[], []], "p50") is None


@settings(deadline=None)
@given(st.lists(st.floats(-100.0, 100.0), min_size=1, max_size=30))
def test_mean_interval_is_scipys_t_interval_unfloored(xs):
    iv = u.mean_interval(xs)
    mean = math.fsum(xs) / len(xs)
    assert iv.value == pytest.approx(mean, rel=1e-9, abs=1e-12) and iv.n == len(xs)
    if len(xs) < 2:
        assert (iv.lo, iv.hi, iv.se, iv.df) == (iv.value, iv.value, 0.0, 0)
        return
    sem = float(stats.sem(xs))
    lo, hi = stats.t.interval(0.95, len(xs) - 1, loc=mean, scale=sem) if sem else (mean, mean)
    table = TT * (hi - mean) + 1e-9                  # the t table's four decimals
    assert iv.se == pytest.approx(sem, rel=1e-6, abs=1e-12) and iv.df == len(xs) - 1
    assert iv.lo == pytest.approx(lo, abs=table) and iv.hi == pytest.approx(hi, abs=table)


@settings(deadline=None)
@given(st.lists(values, min_size=1, max_size=4), st.sampled_from(list(u.STATS)))
def test_point_is_the_mean_of_each_groups_statistic(groups, stat):
    q = u.STATS[stat]
    each = [float(np.mean(g)) if q is None else float(np.percentile(g, q)) for g in groups]
    assert u.point([*groups, []], stat) == pytest.approx(math.fsum(each) / len(each), rel=1e-12)
    assert u.point([[]], stat) is None


def test_an_interval_contains_its_ends_and_scales_with_its_se():
    iv = u.Interval(value=2.0, lo=1.0, hi=3.0, n=10, unreliable=False, se=0.5, df=9)
    assert iv.contains(1.0) and iv.contains(3.0) and not iv.contains(0.999) and not iv.contains(3.001)
    assert iv.scaled(2.0) == u.Interval(value=4.0, lo=2.0, hi=6.0, n=10, unreliable=False, se=1.0, df=9)
    assert iv.scaled(-2.0).se == 1.0


# ---- rates -------------------------------------------------------------------------------------
@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**10), st.floats(0.0, 100.0)), max_size=50),
       st.integers(0, 10**9), st.integers(1, 10**10), st.integers(1, 30))
def test_bins_sum_each_event_into_its_bin_as_a_per_second_rate(events, start, length, count):
    end = start + length
    width = length / count
    ref = [0.0] * count
    for when, amount in events:
        k = int((when - start) // width) if when >= start else 0
        ref[min(count - 1, k)] += amount
    assert u.bins(events, start, end, count) == pytest.approx([v * 1e9 / width for v in ref], rel=1e-9, abs=1e-6)
    inside = [a for when, a in events if start <= when <= end]
    if len(inside) == len(events):
        assert math.fsum(u.bins(events, start, end, count)) * width / 1e9 == pytest.approx(math.fsum(inside), abs=1e-6)


def test_an_event_on_a_bin_edge_goes_to_the_later_bin_and_the_end_to_the_last():
    assert u.bins([(1_000, 1.0), (1_500, 2.0), (2_000, 4.0)], 1_000, 2_000, 2) == pytest.approx(
        [1.0 * 2e6, 6.0 * 2e6])


def test_a_window_of_no_length_puts_everything_in_the_first_bin_unscaled():
    assert u.bins([(5, 1.0), (5, 2.0)], 5, 5, 3) == [3.0, 0.0, 0.0]


@pytest.mark.parametrize("requests", range(0, 200))
def test_a_rate_gets_one_bin_per_4_requests_between_5_and_30(requests):
    assert u.bin_count(requests) == min(30, max(5, requests // 4))


# ---- verdicts ----------------------------------------------------------------------------------
def _ref_verdict(a: u.Interval, b: u.Interval, higher: bool, min_effect: float, floor: float):
    if a.value <= 0 or b.value <= 0 or a.df < 1 or b.df < 1:
        return None
    change = (b.value / a.value if higher else a.value / b.value) - 1
    va, vb = (a.se / a.value) ** 2, (b.se / b.value) ** 2
    below = sum(v * v / df for v, df in ((va, a.df), (vb, b.df)) if v > 0)
    welch = (va + vb) ** 2 / below if below > 0 else math.inf       # Welch-Satterthwaite
    spread = float(stats.t.ppf(0.975, welch)) * math.sqrt(va + vb)
    lo = math.exp(math.log(1 + change) - spread) - 1 - floor
    hi = math.exp(math.log(1 + change) + spread) - 1 + floor
    winner = ("B" if change > 0 else "A") if (lo > 0 or hi < 0) and abs(change) >= min_effect else None
    return change, lo, hi, max(min_effect, (hi - lo) / 2), winner


figure = st.builds(lambda v, rel_se, df: u.Interval(value=v, lo=v, hi=v, n=df + 1, unreliable=False, se=v * rel_se,
                                                    df=df),
                   st.floats(0.05, 1e4), st.floats(0.0, 0.2), st.integers(1, 200))


@settings(deadline=None)
@given(figure, figure, st.booleans(), st.floats(0.0, 0.2), st.floats(0.0, 0.1))
def test_a_verdict_is_the_delta_method_interval_on_the_log_ratio(a, b, higher, min_effect, floor):
    v = u.verdict(a, b, higher, min_effect, floor)
    change, lo, hi, detectable, winner = _ref_verdict(a, b, higher, min_effect, floor)
    assert (v.change, v.lo, v.hi, v.detectable) == pytest.approx((change, lo, hi, detectable), rel=1e-9, abs=1e-9)
    if abs(abs(change) - min_effect) > 1e-9 and min(abs(lo), abs(hi)) > 1e-9:
        assert v.winner == winner


@pytest.mark.parametrize("value", [0.01, 0.5, 1.0, 1.5])
def test_figures_at_most_1_get_a_verdict(value):
    """0.5 req/s against 0.6: B 20 % faster, named; any figure above 0 has a verdict."""
    a = u.Interval(value=value, lo=value, hi=value, n=50, unreliable=False, se=value * 0.01, df=49)
    b = u.Interval(value=value * 1.2, lo=value, hi=value, n=50, unreliable=False, se=value * 0.012, df=49)
    assert u.verdict(a, b, True).winner == "B" and u.verdict(b, a, True).winner == "A"
    assert u.verdict(a, b, False).winner == "A"


@pytest.mark.parametrize("value", [0.0, -1.0])
def test_a_figure_of_0_or_below_gets_no_verdict(value):
    good = u.Interval(value=1.0, lo=1.0, hi=1.0, n=50, unreliable=False, se=0.01, df=49)
    bad = u.Interval(value=value, lo=value, hi=value, n=50, unreliable=False, se=0.01, df=49)
    assert u.verdict(good, bad, True) is None and u.verdict(bad, good, True) is None


def test_a_side_without_degrees_of_freedom_gets_no_verdict_and_one_with_1_does():
    a = u.Interval(value=1.0, lo=1.0, hi=1.0, n=50, unreliable=False, se=0.001, df=1)
    b = u.Interval(value=2.0, lo=1.0, hi=1.0, n=50, unreliable=False, se=0.002, df=1)
    assert u.verdict(a, b, True).winner == "B"
    assert u.verdict(u.Interval(value=1.0, lo=1.0, hi=1.0, n=1, unreliable=False, se=0.0, df=0), b, True) is None
    assert u.verdict(a, u.Interval(value=2.0, lo=2.0, hi=2.0, n=1, unreliable=False, se=0.0, df=0), True) is None


def test_the_t_of_a_verdict_is_at_the_welch_satterthwaite_degrees_of_freedom():
    """2 and 299 degrees of freedom, relative variances 0.0025 and 0.0011: t at (va + vb)^2 / (va^2 / 2 + vb^2 /
    299) = 4.2, wider than 299's and narrower than the fewer side's 2."""
    a = u.Interval(value=1.0, lo=1.0, hi=1.0, n=3, unreliable=False, se=0.05, df=2)
    b = u.Interval(value=1.5, lo=1.0, hi=1.0, n=300, unreliable=False, se=0.05, df=299)
    va, vb = 0.05**2, (0.05 / 1.5) ** 2
    welch = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 299)
    spread = float(stats.t.ppf(0.975, welch)) * math.hypot(0.05, 0.05 / 1.5)
    assert 4 < welch < 5
    assert u.verdict(a, b, True).hi == pytest.approx(math.expm1(math.log(1.5) + spread), rel=1e-9)
    assert u.verdict(b, a, False).hi == pytest.approx(math.expm1(math.log(1.5) + spread), rel=1e-9)


@pytest.mark.parametrize(("change", "winner"), [(0.0199, None), (0.02, "B"), (0.0201, "B"), (-0.0199, None)])
def test_a_change_below_the_minimum_effect_names_no_winner_however_tight(change, winner):
    a = u.Interval(value=100.0, lo=100.0, hi=100.0, n=10**6, unreliable=False, se=1e-6, df=10**6)
    b = u.Interval(value=100.0 * (1 + change), lo=0, hi=0, n=10**6, unreliable=False, se=1e-6, df=10**6)
    assert u.verdict(a, b, True).winner == winner
    assert u.verdict(a, b, True, min_effect=0.0).winner == ("B" if change > 0 else "A")


def test_the_drift_floor_widens_the_interval_on_both_sides_and_the_detectable_size():
    a = u.Interval(value=100.0, lo=100.0, hi=100.0, n=1000, unreliable=False, se=0.1, df=999)
    b = u.Interval(value=110.0, lo=100.0, hi=100.0, n=1000, unreliable=False, se=0.11, df=999)
    plain, floored = u.verdict(a, b, True), u.verdict(a, b, True, floor=0.05)
    assert floored.lo == pytest.approx(plain.lo - 0.05) and floored.hi == pytest.approx(plain.hi + 0.05)
    assert floored.winner == "B" and u.verdict(a, b, True, floor=0.1).winner is None
    assert u.verdict(a, b, True, floor=0.1).detectable == pytest.approx((plain.hi - plain.lo) / 2 + 0.1)


def test_the_winner_speaks_in_its_own_terms():
    b_wins = u.Comparison(0.25, 0.1, 0.4, 0.02, "B")
    assert b_wins.faster_by() == (0.25, 0.1, 0.4)
    a_wins = u.Comparison(-0.2, -0.3, -0.1, 0.02, "A")
    assert a_wins.faster_by() == pytest.approx((0.25, 1 / 0.9 - 1, 1 / 0.7 - 1))
    assert u.Comparison(-0.2, -0.3, 0.1, 0.02, None).faster_by() == (-0.2, -0.3, 0.1)


@settings(deadline=None)
@given(st.floats(0.01, 1e4), st.floats(0.01, 1e4))
def test_speed_is_the_throughput_or_1_over_the_latency(a, b):
    assert u.speed_ratio(a, b, True) == pytest.approx(b / a - 1, rel=1e-12, abs=1e-12)
    assert u.speed_ratio(a, b, False) == pytest.approx(a / b - 1, rel=1e-12, abs=1e-12)


@settings(deadline=None)
@given(st.lists(st.lists(st.floats(0.5, 100.0), max_size=30), min_size=1, max_size=4),
       st.sampled_from(["mean", "p50", "p99"]))
def test_drift_is_the_largest_move_between_halves_of_groups_of_8_or_more(groups, stat):
    q = u.STATS[stat]
    f = (lambda x: float(np.mean(x))) if q is None else (lambda x: float(np.percentile(x, q)))
    ref = max([abs(f(g[: len(g) // 2]) - f(g[len(g) // 2:])) / abs(f(g)) for g in groups if len(g) >= 8],
              default=0.0)
    assert u.drift(groups, stat) == pytest.approx(ref, rel=1e-9, abs=1e-12)


def test_drift_reads_the_halves_in_time_order_from_8_samples():
    assert u.drift([[1.0] * 4 + [3.0] * 4], "mean") == pytest.approx(1.0)
    assert u.drift([[1.0] * 4 + [3.0] * 3], "mean") == 0.0
    assert u.drift([[1.0] * 5 + [3.0] * 4], "mean") == pytest.approx((2.6 - 1.0) / (17 / 9))
    assert u.drift([[0.0] * 8], "mean") == 0.0
    assert u.drift([u.Clusters.of([[1.0] * 4, [3.0] * 4])], "mean") == pytest.approx(1.0)


def test_no_difference_at_all_names_no_winner_even_without_a_minimum_effect():
    """Two cells of the same constant figure: a change of 0 with an interval of no width, [0, 0], which does not
    exclude 0: no winner, whatever the minimum effect."""
    same = u.within(np.array([5.0, 5.0, 5.0]), "mean")
    v = u.verdict(same, same, True, min_effect=0.0)
    assert (v.change, v.lo, v.hi, v.winner) == (0.0, 0.0, 0.0, None)
    assert u.verdict(same, same, False, min_effect=0.0).winner is None
