"""metrics/noise.py by value: every distribution against scipy, the random-effects estimates, the two-sample
shift against scipy's t-test, equivalence against two one-sided tests, the detectable effect against the
non-central t's power, Holm against the closed-testing principle it is a shortcut of, alpha spending against
its formula; and, by simulation of the model, the false-alarm rate it states."""

from __future__ import annotations

import itertools
import math
import random
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as st

from tokenbench.metrics import noise as n

DFS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 19, 20, 29, 30, 31, 45, 60, 120, 1000, 1.5, 2.5, 6.7, 11.3, 1e6]
PS = [1e-9, 1e-6, 1e-4, 0.001, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.45, 0.5, 0.55, 0.8, 0.9, 0.95, 0.975,
      0.99, 0.995, 0.999, 0.9999, 1 - 1e-6]


@pytest.mark.parametrize("df", DFS)
def test_t_quantile_equals_scipy_at_every_df_and_level(df):
    for p in PS:
        assert n.t_quantile(p, df) == pytest.approx(st.t.ppf(p, df), rel=1e-8, abs=1e-12), (p, df)


@pytest.mark.parametrize("p", [1e-300, 1e-100, 1e-12, 0.01, 0.3, 0.4999, 0.5, 0.5001, 0.7, 1 - 1e-12])
def test_t_quantile_at_1_degree_of_freedom_is_the_cauchys_closed_form_to_the_last_bits(p):
    """One degree of freedom is Cauchy's: -cot(pi p), exact in the far tails (1e-300) and next to the median,
    where a search on the tail loses digits (0.4999: the quantile 3.1e-4 to 10 digits)."""
    assert n.t_quantile(p, 1) == pytest.approx(st.cauchy.ppf(p), rel=1e-14, abs=0.0)


def test_t_quantile_infinite_df_is_the_normal_and_bad_input_is_refused():
    for p in PS:
        assert n.t_quantile(p, math.inf) == pytest.approx(st.norm.ppf(p), rel=1e-9)
        assert n.normal_quantile(p) == pytest.approx(st.norm.ppf(p), rel=1e-9)
    for p, df in ((0.0, 3), (1.0, 3), (-0.1, 3), (0.0, 1), (-0.1, 1), (1.0, 1), (0.0, math.inf), (0.5, 0), (0.5, -1)):
        with pytest.raises(ValueError, match=r"p must be in \(0, 1\) and df > 0"):     # the quantile's own refusal
            n.t_quantile(p, df)


@pytest.mark.parametrize("df", DFS)
def test_t_tail_cdf_and_pdf_equal_scipy(df):
    for x in (-40.0, -5.0, -2.0, -0.3, 0.0, 0.1, 1.0, 2.2, 4.0, 12.0, 100.0):
        assert n.t_tail(x, df) == pytest.approx(st.t.sf(x, df), rel=1e-9, abs=1e-300)
        assert n.t_cdf(x, df) == pytest.approx(st.t.cdf(x, df), rel=1e-9, abs=1e-15)
        assert n.t_pdf(x, df) == pytest.approx(st.t.pdf(x, df), rel=1e-9, abs=1e-300)
    for x in (-3.0, 0.0, 2.5):
        assert n.t_tail(x, math.inf) == pytest.approx(st.norm.sf(x), rel=1e-12)
        assert n.normal_cdf(x) == pytest.approx(st.norm.cdf(x), rel=1e-12)


def test_regularized_incomplete_beta_equals_scipy():
    for a, b in itertools.product((0.5, 1.0, 2.5, 3.5, 10.0, 150.0), (0.5, 1.0, 3.0, 50.0)):
        for x in (0.0, 1e-6, 0.001, 0.1, 0.3, 0.5, 0.7, 0.9, 0.999, 1.0):
            assert n.beta_inc(a, b, x) == pytest.approx(sp.betainc(a, b, x), rel=1e-10, abs=1e-14), (a, b, x)


# the model --------------------------------------------------------------------------------------
def _runs(values, se=0.0):
    return [n.RunFigure(v, se * v) for v in values]


def test_a_run_figure_is_its_log_and_relative_variance():
    f = n.RunFigure(200.0, 10.0)
    assert f.log == pytest.approx(math.log(200.0))
    assert f.within == pytest.approx(0.05 ** 2)


def test_spread_estimates_a_runs_whole_variance_under_the_model():
    """Var(y_j) = tau^2 + w^2: the pooled sample variance of the logs is unbiased for it."""
    rng = np.random.default_rng(11)
    tau, w, trials = 0.08, 0.03, 3000
    est = []
    for _ in range(trials):
        y = 5 + rng.normal(0, tau, 4) + rng.normal(0, w, 4)
        e = n.spread([[n.RunFigure(math.exp(v), w * math.exp(v)) for v in y]])
        est.append(e.tau ** 2)
    assert np.mean(est) == pytest.approx(tau ** 2 + w ** 2, rel=0.05)


def test_spread_is_the_whole_pooled_log_standard_deviation():
    a, b = [100.0, 120.0, 90.0], [50.0, 55.0]
    groups = [_runs(a, se=0.05), _runs(b, se=0.5)]
    pooled = (np.var(np.log(a), ddof=1) * 2 + np.var(np.log(b), ddof=1)) / 3
    est = n.spread(groups)
    assert est is not None and (est.df, est.source, est.units) == (3, "repeats", 5) and not est.adds_within
    assert est.tau == pytest.approx(math.sqrt(pooled), rel=1e-12)
    assert n.spread([_runs([1.0]), _runs([2.0])]) is None
    floor = n.spread([_runs([3.0, 4.0])], "default")
    assert floor is not None and floor.source == "default" and floor.adds_within
    assert n.spread([_runs([3.0, 4.0])], "learned").adds_within


def test_side_mean_weighs_runs_equally_and_adds_their_own_error_under_a_floor_only():
    runs = [n.RunFigure(100.0, 2.0), n.RunFigure(110.0, 11.0), n.RunFigure(90.0, 0.9)]
    logs = np.log([100.0, 110.0, 90.0])
    mean, var = n.side_mean(runs, n.Noise(0.03, 5, "repeats"))
    assert mean == pytest.approx(np.mean(logs), rel=1e-12) and var == pytest.approx(0.03 ** 2 / 3, rel=1e-12)
    mean, var = n.side_mean(runs, n.Noise(0.03, 5, "learned"))
    assert var == pytest.approx((0.03 ** 2 + np.mean([0.02 ** 2, 0.1 ** 2, 0.01 ** 2])) / 3, rel=1e-12)


def test_one_run_with_an_understated_interval_does_not_carry_its_side():
    base = [n.RunFigure(100.0, 0.0), n.RunFigure(130.0, 26.0), n.RunFigure(80.0, 16.0)]
    cand = [n.RunFigure(120.0, 24.0), n.RunFigure(95.0, 19.0), n.RunFigure(110.0, 22.0)]
    s = n.shift(base, cand, n.spread([base, cand]))
    assert s.p_value() > 0.5


def test_shift_with_repeats_is_students_two_sample_t_test_on_logs():
    rng = np.random.default_rng(5)
    for kb, kc in ((4, 4), (6, 3), (2, 2), (8, 5)):
        b, c = rng.lognormal(2, 0.1, kb), rng.lognormal(2.05, 0.1, kc)
        rb, rc = _runs(b, se=0.03), _runs(c, se=0.05)        # their own errors are inside their spread
        est = n.spread([rb, rc])
        s = n.shift(rb, rc, est)
        ref = st.ttest_ind(np.log(c), np.log(b), equal_var=True)
        assert s.df == kb + kc - 2
        assert s.d == pytest.approx(np.log(c).mean() - np.log(b).mean(), rel=1e-12)
        assert s.p_value() == pytest.approx(ref.pvalue, rel=1e-7)
        assert s.d / s.se == pytest.approx(ref.statistic, rel=1e-9)
        assert s.change == pytest.approx(math.exp(s.d) - 1, rel=1e-12)
        lo, hi = s.interval(0.05)
        half = st.t.ppf(0.975, s.df) * s.se
        assert (lo, hi) == (pytest.approx(math.exp(s.d - half) - 1), pytest.approx(math.exp(s.d + half) - 1))


def test_shift_with_a_floor_adds_the_between_run_variance_to_each_side():
    b, c = [n.RunFigure(100.0, 3.0)], [n.RunFigure(110.0, 2.2)]
    floor = n.Noise(0.05, 14, "default", 8)
    s = n.shift(b, c, floor)
    assert s.d == pytest.approx(math.log(1.1))
    assert s.se == pytest.approx(math.sqrt(2 * 0.05 ** 2 + 0.03 ** 2 + 0.02 ** 2), rel=1e-12)
    assert s.df == 14
    assert s.p_value() == pytest.approx(2 * st.t.sf(math.log(1.1) / s.se, 14), rel=1e-9)


def test_a_shift_with_no_spread_is_certain_only_of_a_nonzero_change():
    assert n.Shift(0.1, 0.0, 5).p_value() == 0.0
    assert n.Shift(0.0, 0.0, 5).p_value() == 1.0
    assert n.Shift(0.0, 0.1, 5).p_value() == pytest.approx(1.0)


def test_equivalence_is_two_one_sided_tests_against_the_margin():
    rng = random.Random(2)
    for _ in range(400):
        d, se, df = rng.uniform(-0.1, 0.1), rng.uniform(0.001, 0.05), rng.choice([2, 5, 14, 40])
        margin, alpha = rng.choice([0.02, 0.05, 0.1]), rng.choice([0.05, 0.01, 0.002])
        bound = math.log1p(margin)
        p_tost = max(st.t.sf((d + bound) / se, df), st.t.cdf((d - bound) / se, df))
        assert n.Shift(d, se, df).equivalent(margin, alpha) == (p_tost < alpha), (d, se, df, margin, alpha)
    assert not n.Shift(0.0, 1e-9, 10).equivalent(0.0, 0.05) and not n.Shift(0.0, 0.0, 10).equivalent(0.0, 0.05)
    # exactly at the margin is not within it, on either side
    assert not n.Shift(math.log1p(0.05), 0.0, 10).equivalent(0.05, 0.05)
    assert not n.Shift(-math.log1p(0.05), 0.0, 10).equivalent(0.05, 0.05)
    assert n.Shift(0.999 * math.log1p(0.05), 0.0, 10).equivalent(0.05, 0.05)


def test_detectable_change_is_the_t_quantile_sum_and_has_its_power():
    for se, df, alpha, power in ((0.02, 6, 0.05, 0.8), (0.05, 14, 0.05 / 28, 0.8), (0.01, 8, 0.01, 0.9)):
        s = n.Shift(0.0, se, df)
        mde = s.detectable(alpha, power)
        ref = (st.t.ppf(1 - alpha / 2, df) + st.t.ppf(power, df)) * se
        assert mde == pytest.approx(math.expm1(ref), rel=1e-9)
        # the two-sided test's real power at that effect (non-central t) is close to the stated one
        nc, crit = ref / se, st.t.ppf(1 - alpha / 2, df)
        real = st.nct.sf(crit, df, nc)          # the other tail is negligible here
        assert power - 0.06 <= real <= power + 0.02


# many figures -----------------------------------------------------------------------------------
def _closed_testing(p, alpha):
    """Reject H_i iff every intersection containing i is rejected by Bonferroni (Holm is its shortcut)."""
    m = len(p)
    out = []
    for i in range(m):
        others = [j for j in range(m) if j != i]
        ok = all(min(p[j] for j in (i, *sub)) <= alpha / (len(sub) + 1)
                 for r in range(m) for sub in itertools.combinations(others, r))
        out.append(ok)
    return out


def _adjusted_reference(p):
    m = len(p)
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, (m - np.arange(m)) * np.asarray(p)[order])
    adj = np.maximum.accumulate(adj)
    out = np.empty(m)
    out[order] = adj
    return list(out)


def test_holm_equals_closed_testing_and_its_adjusted_p_values():
    rng = random.Random(7)
    for _ in range(300):
        m = rng.randint(1, 6)
        p = [rng.choice([rng.random(), rng.random() * 0.05, rng.random() * 0.002]) for _ in range(m)]
        alpha = rng.choice([0.05, 0.1, 0.01])
        assert n.holm(p, alpha) == _closed_testing(p, alpha), (p, alpha)
        assert n.holm_adjusted(p) == pytest.approx(_adjusted_reference(p), rel=1e-12)
        assert n.holm(p, alpha) == [a <= alpha for a in n.holm_adjusted(p)]


def test_holm_by_hand():
    assert n.holm([0.01, 0.04, 0.03, 0.005], 0.05) == [True, False, False, True]
    assert n.holm([0.0125, 0.02, 0.03], 0.05) == [True, True, True]
    assert n.holm_adjusted([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert n.holm([], 0.05) == [] and n.holm_adjusted([]) == []


# sequential looks -------------------------------------------------------------------------------
def test_obrien_fleming_spending_by_value():
    for alpha in (0.05, 0.01):
        for t in (0.1, 0.25, 0.5, 2 / 3, 0.9):
            ref = 2 - 2 * st.norm.cdf(st.norm.ppf(1 - alpha / 2) / math.sqrt(t))
            assert n.obf_spent(alpha, t) == pytest.approx(ref, rel=1e-10)
        assert n.obf_spent(alpha, 1.0) == pytest.approx(alpha, rel=1e-12)
        assert n.obf_spent(alpha, 1.5) == pytest.approx(alpha, rel=1e-12)
        assert n.obf_spent(alpha, 0.0) == 0.0
    looks = [0.0, 0.4, 0.6, 0.8, 1.0]
    parts = [n.look_alpha(0.05, a, b) for a, b in itertools.pairwise(looks)]
    assert sum(parts) == pytest.approx(0.05, rel=1e-12) and all(x > 0 for x in parts)
    assert parts == sorted(parts)          # O'Brien-Fleming: little early, most late
    assert n.look_alpha(0.05, 0.5, 0.5) == 0.0


@pytest.mark.parametrize("fractions", [(0.5, 1.0), (0.5, 2 / 3, 5 / 6, 1.0), (0.2, 0.4, 0.6, 0.8, 1.0),
                                       (0.3, 0.45, 1.0), (0.25, 0.6)])
@pytest.mark.parametrize("alpha", [0.05, 0.05 / 14, 0.1])
def test_sequential_bounds_spend_alpha_exactly_against_scipys_multivariate_normal(fractions, alpha):
    """Z_k = S(t_k) / sqrt(t_k) of a Brownian motion: corr(Z_j, Z_k) = sqrt(t_j / t_k); the probability that
    the path crosses by look k (1 minus the box probability, scipy) is the alpha spent by t_k."""
    bounds = n.sequential_bounds(alpha, fractions)
    cov = [[math.sqrt(min(a, b) / max(a, b)) for b in fractions] for a in fractions]
    for k in range(1, len(fractions) + 1):
        c = list(bounds[:k])
        inside = st.multivariate_normal(mean=[0] * k, cov=[row[:k] for row in cov[:k]], maxpts=2 * 10**5,
                                        abseps=1e-8, releps=1e-5).cdf(c, lower_limit=[-x for x in c]) \
            if k > 1 else 1 - 2 * st.norm.sf(c[0])
        assert 1 - inside == pytest.approx(n.obf_spent(alpha, fractions[k - 1]), rel=1e-2, abs=2e-6)   # Genz: ~0.5 %
    assert n.nominal_level(alpha, fractions) == pytest.approx(2 * st.norm.sf(bounds[-1]), rel=1e-12)
    assert list(bounds) == sorted(bounds, reverse=True)          # O'Brien-Fleming: strict early, lenient late


def test_one_look_is_plain_alpha_and_a_look_that_spends_nothing_rejects_nothing():
    assert n.nominal_level(0.05, (1.0,)) == 0.05 and n.nominal_level(0.01, [1.0]) == 0.01
    assert n.sequential_bounds(0.05, (0.5, 0.5, 1.0))[1] == math.inf                 # no information added
    first = n.sequential_bounds(0.05, (0.5,))[0]
    assert first == pytest.approx(st.norm.isf(n.obf_spent(0.05, 0.5) / 2), rel=1e-9)
    # the last look gets far more than the union bound's increment
    assert n.nominal_level(0.05, (0.5, 2 / 3, 5 / 6, 1.0)) > 2 * n.look_alpha(0.05, 5 / 6, 1.0)


@pytest.mark.parametrize("alpha", [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2])
@pytest.mark.parametrize("t", [1.0, 0.25])
def test_a_first_looks_boundary_is_the_least_that_spends_at_most_its_share(alpha, t):
    """Solved to the last bit on the module's own exit mass: at the boundary the crossing chance is at most the
    alpha spent by t, and at the float just below it is more (a boundary one step higher wastes what the look
    may spend; one lower overspends)."""
    [c] = n.sequential_bounds(alpha, (t,))
    spend = n.look_alpha(alpha, 0.0, t)
    def crossing(bound: float) -> float:
        return n._exit_mass(np.zeros(1), np.ones(1), t, bound * math.sqrt(t))
    assert crossing(c) <= spend < crossing(math.nextafter(c, 0.0))


def test_step_down_stops_at_the_first_p_above_its_level():
    assert n.step_down([0.01, 0.001, 0.2], [0.002, 0.02, 0.5]) == [True, True, True]
    assert n.step_down([0.01, 0.001, 0.2], [0.002, 0.005, 0.5]) == [False, True, False]
    assert n.step_down([0.003, 0.001], [0.002, 0.5]) == [True, True]
    assert n.step_down([0.003, 0.001], [0.0005, 0.5]) == [False, False]
    assert n.step_down([], []) == []


def test_by_launch_averages_the_runs_of_one_launch_into_one_unit():
    runs = [n.RunFigure(100.0, 2.0, "L1"), n.RunFigure(121.0, 11.0, "L1"), n.RunFigure(90.0, 0.9, None),
            n.RunFigure(80.0, 4.0, "L2"), n.RunFigure(95.0, 1.0, None)]
    units = n.by_launch(runs)
    assert [u.launch for u in units] == ["L1", None, "L2", None]          # in the order each first appears
    one = units[0]
    assert one.value == pytest.approx(110.0, rel=1e-12)                    # sqrt(100 x 121): the geometric mean
    assert one.within == pytest.approx(((2 / 100) ** 2 + (11 / 121) ** 2) / 2 / 2, rel=1e-12)
    assert units[1] is runs[2] and units[2] is runs[3] and units[3] is runs[4]
    # both sides on one and the same launch: it cancels, each run is a unit
    same = [n.RunFigure(1.0, 0.0, "L"), n.RunFigure(2.0, 0.0, "L")]
    assert n.units(same, same[:1]) == (same, same[:1])
    (one,), (other,) = n.units(same, [n.RunFigure(3.0, 0.0, "M")])
    assert (one.value, one.launch, other.value) == (pytest.approx(math.sqrt(2.0), rel=1e-15), "L", 3.0)
    unknown = [n.RunFigure(1.0), n.RunFigure(2.0)]
    assert n.units(unknown, unknown) == (unknown, unknown)                # not recorded: each its own


def test_a_side_of_one_launch_learns_no_spread():
    """Four runs, two launches a side: two units each, df 2 (not 6)."""
    b = [n.RunFigure(v, 0.0, f"b{k // 2}") for k, v in enumerate((100.0, 102.0, 110.0, 111.0))]
    c = [n.RunFigure(v, 0.0, f"c{k // 2}") for k, v in enumerate((120.0, 119.0, 130.0, 128.0))]
    ub, uc = n.units(b, c)
    est = n.spread([ub, uc])
    assert est is not None and (est.df, est.units) == (2, 4)
    logs = [[(math.log(x) + math.log(y)) / 2 for x, y in zip(vals[::2], vals[1::2], strict=True)]
            for vals in ((100.0, 102.0, 110.0, 111.0), (120.0, 119.0, 130.0, 128.0))]
    ref = st.ttest_ind(logs[1], logs[0])
    s = n.shift(ub, uc, est)
    assert s.d / s.se == pytest.approx(ref.statistic, rel=1e-9) and s.p_value() == pytest.approx(ref.pvalue, rel=1e-7)


# decisions --------------------------------------------------------------------------------------
def test_decisions_follow_direction_min_effect_and_equivalence():
    up = n.Shift(math.log(1.1), 0.01, 10)            # the figure 10 % higher
    assert n.decide(up, False, True, 0.05, 0.02) == "regressed"       # a latency up
    assert n.decide(up, True, True, 0.05, 0.02) == "improved"         # a throughput up
    assert n.decide(up, False, True, 0.05, 0.12) == "inconclusive"    # below --min-effect, not equivalent
    assert n.decide(up, False, False, 0.05, 0.02) == "inconclusive"   # not rejected by Holm
    down = n.Shift(-math.log(1.1), 0.01, 10)
    assert n.decide(down, False, True, 0.05, 0.02) == "improved"
    assert n.decide(down, True, True, 0.05, 0.02) == "regressed"
    flat = n.Shift(0.001, 0.002, 10)
    assert n.decide(flat, False, False, 0.05, 0.02) == "no change"
    assert n.decide(flat, False, True, 0.05, 0.02) == "no change"     # significant, but inside the margin
    assert n.worse_by(up, False) == pytest.approx(math.log(1.1)) and n.worse_by(up, True) == pytest.approx(-math.log(1.1))
    edge = n.Shift(math.log(1.02), 0.001, 10)
    assert n.decide(edge, False, True, 0.05, 0.02) == "regressed"     # exactly the min effect counts


def test_default_floor_of_every_gate_figure_and_an_unlisted_one():
    assert n.DEFAULT_FLOOR, "the default floor is measured (bench/gate_aa.py)"
    for key, tau in n.DEFAULT_FLOOR.items():
        f = n.default_floor(key)
        assert (f.tau, f.df, f.source, f.units) == (tau, n.DEFAULT_FLOOR_DF, "default", n.DEFAULT_FLOOR_RUNS)
    assert n.default_floor("not_a_figure").tau == max(n.DEFAULT_FLOOR.values())


# the false-alarm rate, simulated ----------------------------------------------------------------
def _gate_flags(rng: np.random.Generator, figures: int, kb: int, kc: int, alpha: float) -> int:
    p = []
    for f in range(figures):
        tau, w = 0.02 + 0.01 * f, 0.01
        b = [n.RunFigure(math.exp(v), w * math.exp(v)) for v in 4 + rng.normal(0, math.hypot(tau, w), kb)]
        c = [n.RunFigure(math.exp(v), w * math.exp(v)) for v in 4 + rng.normal(0, math.hypot(tau, w), kc)]
        p.append(n.shift(b, c, n.spread([b, c])).p_value())
    return sum(n.holm(p, alpha))


def test_holm_over_a_gate_of_figures_holds_its_alpha_under_the_model():
    rng = np.random.default_rng(19)
    gates = 600
    with_flag = sum(_gate_flags(rng, 8, 4, 4, 0.05) > 0 for _ in range(gates))
    # binomial(600, 0.05): mean 30, sd 5.3; Holm is conservative for independent figures
    assert with_flag <= 45
    single = sum(_gate_flags(rng, 1, 3, 3, 0.2) for _ in range(gates))
    assert 90 <= single <= 150               # one figure, no multiplicity: alpha itself (mean 120)


def test_the_documented_default_floor_is_the_one_used():
    """docs/metrics.md states where the default floor came from (runs, degrees of freedom) and each value."""
    doc = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text()
    section = doc.split("### The default noise floor", 1)[1].split("\n## ", 1)[0]
    assert f"({n.DEFAULT_FLOOR_RUNS} runs, " in section and f"(df {n.DEFAULT_FLOOR_DF})" in section
    shown = [float(v) for v in re.findall(r"\| (0\.\d{3}) ", section)]
    assert sorted(shown) == sorted([*n.DEFAULT_FLOOR.values(), max(n.DEFAULT_FLOOR.values())])


def test_a_look_that_spends_nothing_leaves_the_later_boundaries_as_if_it_had_not_been_taken():
    """A first look too early to spend any alpha (its boundary infinite) crosses nothing: the density is carried
    whole past it, so the later looks' boundaries are those of the gate without it, and that look alone rejects
    nothing (nominal level 0)."""
    early = 1e-3                                         # O'Brien-Fleming spends exactly 0 here
    assert n.look_alpha(0.05, 0.0, early) == 0.0
    got = n.sequential_bounds(0.05, (early, 0.5, 1.0))
    assert math.isinf(got[0])
    assert got[1:] == pytest.approx(n.sequential_bounds(0.05, (0.5, 1.0)), rel=1e-6)
    assert n.nominal_level(0.05, (early,)) == 0.0


@pytest.mark.parametrize(("df", "x"), [(3, 0.125), (4, 0.125), (5, 0.125), (5, 0.25), (9, 0.125), (9, 0.25)])
def test_the_t_quantile_inverts_the_tail_to_the_precision_of_the_tail(df, x):
    """The quantile of P(T > x) is -x to 5e-14 relative (Newton stops on a tail met exactly, or on a bracket of
    1e-13): what the tail's own rounding leaves, well inside the 1e-8 of the agreement with scipy."""
    assert n.t_quantile(n.t_tail(x, df), df) == pytest.approx(-x, rel=5e-14, abs=0)
