"""metrics/capacity.py, the pure part of the capacity search, each behaviour stated as the number or the
verdict it must give (issue 39: a test for every behaviour a single-point change could alter): which
requests a limit reads, how cells are pooled, a check's statistic and 95 % interval (against numpy and
Student's t table), when a pass or a fail is sure, the binding limit, the cross-cell widening with k - 1
degrees of freedom, a tier over cells and the stored record's lookups. docs/metrics.md ("Capacity search")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.capacity import (
    CellSamples,
    Check,
    LoadVerdict,
    SearchRecord,
    Sustain,
    TierVerdict,
    across_cells,
    check,
    figure_key,
    judge,
    metrics_of,
    pooled,
    samples_of,
)
from tokenbench.metrics.capacity import apart as capacity_apart
from tokenbench.metrics.timeslices import Drift
from tokenbench.spec.bench import SLO
from tokenbench.spec.slo import Limit, Tier

MS = 1_000_000
# Student's t quantile of 0.975, from a printed table (not from the module): df 1, 2, 3, 4
T_TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776}


def lim(text: str) -> Limit:
    return Limit.model_validate(text)


def cell(values: dict, status: str = "ok", repeat: int = 0, **kw) -> CellSamples:
    return CellSamples(key="w/x=4", repeat=repeat, status=status, values=values, **kw)


def rec(i: int, ttft_ms: float, n: int = 3, itl_ms: float = 10.0, error=None, phase="measure") -> RequestRecord:
    times = [int((ttft_ms + k * itl_ms) * MS) for k in range(n)]
    return RequestRecord(index=i, phase=phase, input_len=4, output_len=n, intended_ns=0, sent_ns=0,
                         end_ns=times[-1] + MS, token_times_ns=times, token_counts=[1] * n, completion_tokens=n,
                         usage_source="server", error_kind=error)


# ---- what a limit reads ----

def test_the_figure_a_limit_reads_is_named_as_the_summary_names_it():
    assert figure_key(lim("ttft:p99<=2000")) == "p99_ttft_ms" and figure_key(lim("tpot:mean<=9")) == "mean_tpot_ms"
    c = cell({}, bounds={"p99_ttft_ms": 7.5}, marked=["mean_tpot_ms"])
    assert c.allowance(lim("ttft:p99<=2000")) == 7.5 and c.allowance(lim("ttft:p90<=2000")) == 0.0
    assert c.moved(lim("tpot:mean<=9")) and not c.moved(lim("ttft:p99<=2000"))
    assert cell({}, status="invalid").moved(lim("ttft:p99<=2000"))


def test_samples_are_the_measured_ok_requests_and_goodput_counts_the_failed_ones():
    recs = [rec(0, 100), rec(1, 200), rec(2, 300, error="http_status"), rec(3, 400, phase="warmup"),
            rec(4, 500, error="cancelled"), rec(5, 50, n=2)]
    got = samples_of(recs, {"ttft", "tpot", "e2el", "itl", "goodput"}, SLO(ttft_ms=150))
    assert got["ttft"] == [100.0, 200.0, 50.0]
    assert got["tpot"] == [10.0, 10.0, 10.0]
    assert got["e2el"] == [121.0, 221.0, 61.0]
    assert got["goodput"] == [1.0, 0.0, 0.0, 1.0]                    # the failed request counts as a miss
    itl = got["itl"]
    assert isinstance(itl, u.Clusters) and list(itl.sizes) == [2, 2, 1] and list(itl.values) == [10.0] * 5
    assert set(samples_of(recs, {"ttft"}, SLO())) == {"ttft"}


def test_a_job_limits_samples_are_each_complete_jobs_figure_and_none_without_jobs():
    from tokenbench.metrics.summary_groups import JobFigures
    jobs = JobFigures(started=3, complete=2, incomplete=1, each_completion_ms=[900.0, 1200.0],
                      each_ttft_max_ms=[80.0, None], each_tpot_max_ms=[12.0, 15.0])
    got = samples_of([rec(0, 100)], {"job", "job_ttft", "job_tpot", "ttft"}, SLO(), jobs)
    assert got == {"job": [900.0, 1200.0], "job_ttft": [80.0], "job_tpot": [12.0, 15.0], "ttft": [100.0]}
    assert samples_of([rec(0, 100)], {"job", "ttft"}, SLO()) == {"job": [], "ttft": [100.0]}


def test_a_check_without_an_allowance_is_sure_to_fail_just_beyond_its_limit():
    """No allowance given: none (0), so a mean of 10.5 with no spread is a sure fail of mean <= 10, and a mean of
    exactly 10 a sure pass."""
    over = check(lim("ttft:mean<=10"), [10.5] * 5)
    assert over.allowance == 0.0 and (over.lo, over.hi) == (10.5, 10.5) and over.sure == "fail"
    assert check(lim("ttft:mean<=10"), [10.0] * 5).sure == "pass"


def test_cells_pool_into_one_sample_keeping_each_requests_gaps_together():
    assert pooled([[1.0, 2.0], [3.0], []]) == [1.0, 2.0, 3.0] and pooled([]) == []
    a, b = u.Clusters.of([[1.0, 2.0], [3.0]]), u.Clusters.of([[4.0]])
    both = pooled([a, b])
    assert isinstance(both, u.Clusters) and list(both.values) == [1.0, 2.0, 3.0, 4.0] and list(both.sizes) == [2, 1, 1]


# ---- one check: the statistic, its interval, sure or not ----

def test_a_mean_checks_the_t_interval_of_the_samples():
    x = [9.0, 10.0, 12.0, 8.5, 11.0]
    c = check(lim("tpot:mean<=10.5"), x)
    half = T_TABLE[4] * float(np.std(x, ddof=1)) / math.sqrt(5)
    assert c.value == pytest.approx(np.mean(x)) and (c.lo, c.hi) == (pytest.approx(np.mean(x) - half, rel=1e-4),
                                                                  pytest.approx(np.mean(x) + half, rel=1e-4))
    assert c.n == 5 and c.passes and c.sure is None and c.margin == pytest.approx((10.5 - 10.1) / 10.5)


def test_a_percentile_checks_numpys_percentile_and_a_p99_needs_100_requests():
    rng = np.random.default_rng(1)
    for n, few in ((99, True), (100, False), (400, False)):
        x = list(rng.lognormal(3, 0.3, n))
        c = check(lim("ttft:p99<=1000"), x)
        assert c.value == pytest.approx(float(np.percentile(x, 99))) and c.n == n
        assert c.unreliable is (few or u.within(np.asarray(x), "p99").unreliable)
    assert not check(lim("ttft:p90<=1000"), list(rng.lognormal(3, 0.3, 50))).unreliable
    assert check(lim("ttft:p50<=1000"), [1.0, 2.0, 3.0, 4.0]).value == 2.5


def test_goodputs_fraction_is_the_mean_share():
    c = check(lim("goodput:fraction>=0.5"), [1.0, 1.0, 0.0, 1.0])
    assert c.value == 0.75 and c.passes and c.margin == pytest.approx(0.5)


def test_no_samples_no_value_a_sure_fail():
    for nothing in (None, [], u.Clusters.of([])):
        c = check(lim("ttft:p99<=5"), nothing)
        assert c.value is None and c.n == 0 and not c.passes and c.sure == "fail" and c.margin == -math.inf


@pytest.mark.parametrize("value,lo,hi,sure", [
    (9, 8, 9.5, "pass"), (9, 8, 10, "pass"), (9, 8, 10.01, None), (10, 9, 11, None), (11, 10.01, 12, "fail"),
    (11, 10, 12, None), (9, None, 9.5, "fail"), (9, 8, None, "fail")])
def test_an_upper_limit_is_surely_met_when_the_whole_interval_is_within_it(value, lo, hi, sure):
    c = Check(limit=lim("tpot:mean<=10"), value=value, lo=lo, hi=hi)
    assert c.sure == sure and c.passes is (value <= 10)
    strict = Check(limit=lim("tpot:mean<10"), value=value, lo=lo, hi=hi)
    assert strict.passes is (value < 10)


def test_a_lower_limit_reads_its_interval_the_other_way():
    g = lim("goodput:fraction>=0.9")
    assert Check(limit=g, value=0.95, lo=0.91, hi=0.99).sure == "pass"
    assert Check(limit=g, value=0.95, lo=0.85, hi=0.99).sure is None
    assert Check(limit=g, value=0.8, lo=0.7, hi=0.89).sure == "fail"
    assert Check(limit=g, value=0.8, lo=0.7, hi=0.91).sure is None
    assert Check(limit=g, value=0.8, lo=0.7, hi=0.89, allowance=5.0).sure == "fail"   # no allowance for a share


def test_a_fail_is_sure_only_beyond_the_clients_allowance():
    limit = lim("ttft:mean<=100")
    assert Check(limit=limit, value=130, lo=120, hi=140, allowance=19.9).sure == "fail"
    assert Check(limit=limit, value=130, lo=120, hi=140, allowance=20.0).sure is None     # 100 <= 100 holds
    assert Check(limit=limit, value=130, lo=120, hi=140, allowance=20.1).sure is None
    assert Check(limit=limit, value=90, lo=80, hi=95, allowance=50).sure == "pass"        # a pass is read as it is


def test_an_unreliable_pass_is_sure_only_with_a_second_cell():
    limit = lim("ttft:p99<=100")
    assert Check(limit=limit, value=50, lo=40, hi=60, unreliable=True).sure is None
    assert Check(limit=limit, value=50, lo=40, hi=60, unreliable=True, cells=2).sure == "pass"
    assert Check(limit=limit, value=150, lo=140, hi=160, unreliable=True).sure == "fail"


# ---- a tier ----

def test_the_binding_limit_is_the_one_closest_to_failing():
    checks = [Check(limit=lim("ttft:p99<=100"), value=50, lo=45, hi=55),        # margin 0.5
              Check(limit=lim("tpot:p99<=10"), value=9, lo=8, hi=9.5),           # margin 0.1
              Check(limit=lim("e2el:mean<=1000"), value=300, lo=290, hi=310)]    # margin 0.7
    v = TierVerdict(tier="t", ok=True, checks=checks)
    assert v.binding is checks[1] and v.passes and v.sure == "pass" and not v.unreliable
    failing = TierVerdict(tier="t", ok=True, checks=[*checks, Check(limit=lim("itl:p90<=5"), value=6, lo=5.5, hi=7)])
    assert failing.binding.limit.metric == "itl" and not failing.passes and failing.sure == "fail"
    assert TierVerdict(tier="t", ok=True, checks=[]).binding is None


def test_a_tier_fails_surely_when_a_cell_failed_and_is_sure_only_when_every_check_is():
    good = Check(limit=lim("ttft:p99<=100"), value=50, lo=45, hi=55)
    open_ = Check(limit=lim("tpot:p99<=10"), value=9, lo=8, hi=11)
    assert TierVerdict(tier="t", ok=False, checks=[good]).sure == "fail"
    assert not TierVerdict(tier="t", ok=False, checks=[good]).passes
    assert TierVerdict(tier="t", ok=True, checks=[good, open_]).sure is None
    assert TierVerdict(tier="t", ok=True, checks=[good, open_]).passes
    shaky = good.model_copy(update={"unreliable": True})
    assert TierVerdict(tier="t", ok=True, checks=[shaky, open_]).unreliable


def test_judge_pools_the_cells_and_takes_the_largest_allowance():
    tier = Tier(name="t", limits=[lim("ttft:mean<=100"), lim("tpot:mean<=10")])
    a = cell({"ttft": [90.0, 95.0], "tpot": [8.0]}, bounds={"mean_ttft_ms": 3.0})
    b = cell({"ttft": [97.0]}, repeat=1, bounds={"mean_ttft_ms": 8.0}, marked=["mean_ttft_ms"])
    v = judge(tier, [a, b])
    assert v.tier == "t" and v.ok and v.client
    ttft, tpot = v.checks
    assert ttft.n == 3 and ttft.value == pytest.approx(94.0) and ttft.allowance == 8.0
    assert tpot.n == 1 and tpot.value == 8.0 and tpot.allowance == 0.0
    assert judge(tier, [a]).client is False


def test_a_failed_cell_or_none_fails_the_tier_and_an_invalid_one_does_not():
    tier = Tier(name="t", limits=[lim("ttft:mean<=100")])
    fine = cell({"ttft": [10.0, 11.0]})
    assert not judge(tier, [fine, cell({"ttft": [10.0]}, status="failed", repeat=1)]).ok
    assert not judge(tier, []).ok and judge(tier, []).sure == "fail"
    assert judge(tier, [fine, cell({"ttft": [10.0]}, status="invalid", repeat=1)]).ok
    missing = judge(tier, [cell({"tpot": [1.0]})]).checks[0]
    assert missing.value is None and missing.sure == "fail"


def test_the_metrics_a_set_of_tiers_reads():
    tiers = [Tier(name="a", limits=[lim("ttft:p99<=1"), lim("tpot:p99<=1")]), Tier(name="b", limits=[lim("itl:p90<=2")])]
    assert metrics_of(tiers) == {"ttft", "tpot", "itl"} and metrics_of([]) == set()


# ---- across cells: k - 1 degrees of freedom ----

@pytest.mark.parametrize("means", [[70.0, 95.0], [70.0, 80.0, 95.0], [10.0, 11.0, 12.0, 30.0]])
def test_cells_widen_the_pooled_interval_by_the_t_interval_of_their_means(means):
    rng = np.random.default_rng(len(means))
    cells = [cell({"ttft": list(rng.normal(m, 0.5, 200))}, repeat=i) for i, m in enumerate(means)]
    limit = lim("ttft:mean<=100")
    per = [check(limit, c.values["ttft"]).value for c in cells]
    k = len(per)
    half = T_TABLE[k - 1] * float(np.std(per, ddof=1)) / math.sqrt(k)
    narrow = Check(limit=limit, value=float(np.mean(per)), lo=float(np.mean(per)) - 0.1, hi=float(np.mean(per)) + 0.1)
    wide = across_cells(limit, cells, narrow)
    assert wide.cells == k
    assert wide.lo == pytest.approx(max(np.mean(per) - half, 0.0), abs=1e-3 * half)
    assert wide.hi == pytest.approx(np.mean(per) + half, abs=1e-3 * half)
    assert wide.value == narrow.value


def test_the_widening_never_narrows_and_never_goes_below_zero():
    limit = lim("ttft:mean<=100")
    cells = [cell({"ttft": [1.0, 1.1]}), cell({"ttft": [9.0, 9.1]}, repeat=1)]
    wide_already = Check(limit=limit, value=5.0, lo=-50.0, hi=500.0)
    same = across_cells(limit, cells, wide_already)
    assert (same.lo, same.hi, same.cells) == (-50.0, 500.0, 2)
    near_zero = across_cells(limit, cells, Check(limit=limit, value=5.0, lo=4.9, hi=5.1))
    assert near_zero.lo == 0.0 and near_zero.hi > 40


def test_one_cell_or_no_interval_is_left_as_pooled():
    limit = lim("ttft:mean<=100")
    pooled_check = Check(limit=limit, value=5.0, lo=4.0, hi=6.0)
    assert across_cells(limit, [cell({"ttft": [1.0, 2.0]})], pooled_check) is pooled_check
    two = [cell({"ttft": [1.0, 2.0]}), cell({"ttft": [8.0, 9.0]}, repeat=1)]
    for open_end in ({"lo": None}, {"hi": None}):
        unbounded = pooled_check.model_copy(update=open_end)
        assert across_cells(limit, two, unbounded) is unbounded
    no_values = [cell({"ttft": [1.0, 2.0]}), cell({"tpot": [8.0]}, repeat=1), cell({"ttft": []}, repeat=2)]
    assert across_cells(limit, no_values, pooled_check) is pooled_check


# ---- the stored record ----

def _verdict(name: str, passes: bool) -> TierVerdict:
    return TierVerdict(tier=name, ok=True, checks=[Check(limit=lim("ttft:mean<=10"), value=5 if passes else 20,
                                                         lo=4, hi=6)])


def test_a_load_verdict_and_a_search_find_theirs():
    lv = LoadVerdict(load=4.0, cells=2, verdicts=[_verdict("a", True), _verdict("b", False)])
    assert lv.of("b").tier == "b" and lv.of("a").passes
    rec_ = SearchRecord(workload="w", dimension="rate", tiers=[], budget=8, precision=0.1,
                        loads=[lv, LoadVerdict(load=8.0, cells=1, verdicts=[])])
    assert rec_.load(8.0).load == 8.0 and rec_.load(4.0) is lv and rec_.load(5.0) is None


def _drift(drifted: bool) -> Drift:
    return Drift(figure="output_tps", first=1.0, last=1.0, change=0.0, lo=None, hi=None, slices=2, drifted=drifted)


def test_a_sustain_cell_holds_when_the_first_tier_passes_and_nothing_drifted():
    def sustain(verdicts, drift) -> Sustain:
        return Sustain(key="k", repeat=0, load=4.0, duration_s=60, status="ok", verdicts=verdicts, drift=drift)
    assert sustain([_verdict("a", True), _verdict("b", False)], [_drift(False)]).holds
    assert not sustain([_verdict("a", False), _verdict("b", True)], []).holds
    assert not sustain([], []).holds
    moved = sustain([_verdict("a", True)], [_drift(False), _drift(True)])
    assert moved.drifted and not moved.holds
    assert not sustain([_verdict("a", True)], [_drift(False)]).drifted


@pytest.mark.parametrize(("over_ms", "slack_ms", "doubt"), [(19.0, 19.5, True), (19.0, 18.5, False), (0.5, None, False)])
def test_a_fail_is_in_doubt_only_where_the_clients_or_the_schedules_slack_could_flip_it(over_ms, slack_ms, doubt):
    """A p99 TTFT over its 200 ms limit: in doubt for the client (or the schedule) only when the figure's client
    bound (or the latest send's lateness) is larger than the excess; a cell stating neither has no slack (0)."""
    t = [Tier(name="t", limits=["ttft:p99<=200"])]
    values = {"ttft": [100.0] * 290 + [200.0 + over_ms] * 10}
    bound = {} if slack_ms is None else {"p99_ttft_ms": slack_ms}
    marked = cell(values, causes={"p99_ttft_ms": "host_contention"}, bounds=bound)
    assert (marked.with_doubt(t, closed=False).doubt == "client") == doubt
    late = cell(values, schedule_off="client", **({} if slack_ms is None else {"late_ms": slack_ms}))
    assert (late.with_doubt(t, closed=False).doubt == "schedule") == doubt
    assert cell(values, schedule_off="client").late_ms == 0.0 and cell(values).bounds == {}


def _check(lo: float, hi: float, allowance: float = 0.0) -> Check:
    return Check(limit=lim("ttft:p99<=200"), value=(lo + hi) / 2, lo=lo, hi=hi, n=300, allowance=allowance)


@pytest.mark.parametrize(("sustain", "search", "apart"), [
    ((100, 110), (111, 120), True), ((100, 110), (110, 120), False), ((121, 130), (100, 120), True),
    ((100, 110, 5.0), (114, 120), False), ((100, 110, 5.0), (116, 120), True),
    ((116, 130), (100, 110, 5.0), True), ((114, 130), (100, 110, 5.0), False)])
def test_the_sustain_cell_is_apart_where_the_intervals_miss_each_other_by_more_than_the_clients_allowance(
        sustain, search, apart):
    """Each interval's low end less the other side's client allowance (the client only slows a latency)."""
    a = TierVerdict(tier="t", ok=True, checks=[_check(*sustain)])
    b = TierVerdict(tier="t", ok=True, checks=[_check(*search)])
    assert capacity_apart(a, b) == (["ttft:p99<=200"] if apart else [])
    none = TierVerdict(tier="t", ok=True, checks=[Check(limit=lim("ttft:p99<=200"))])
    assert capacity_apart(none, b) == [] and capacity_apart(a, none) == []
