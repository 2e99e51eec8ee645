"""The tune's judgement (judge/tune.py), pure: verdicts from the configs' boundary intervals, the gain over
the baseline with its interval, the frontier, and the rules the tune runs by (stop a config that cannot reach
another, start where the best sure pass lies). Properties hold for any true capacities the intervals cover."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tokenbench.judge.tune import Entrant, judge, outranked, rivals, warm_start
from tokenbench.logs.launch import LaunchFailure
from tokenbench.metrics.capacity import Answer, SearchRecord
from tokenbench.spec.slo import Tier

SLO = Tier(name="slo", limits=["tpot:mean<=20"])
WIDE = Tier(name="wide", limits=["tpot:mean<=30"])


def answer(tier: Tier, capacity, lo, hi, reason="converged") -> Answer:
    fail = None if hi is None else (capacity + 1 if capacity is not None else hi)
    return Answer(tier=tier.name, limits=tier.limits, capacity=capacity, fail_load=fail, lo=lo, hi=hi, reason=reason)


def entrant(name: str, *answers: Answer, dimension="concurrency") -> Entrant:
    tiers = [SLO, WIDE][:len(answers)]
    record = SearchRecord(workload="32:16", dimension=dimension, tiers=tiers, budget=24, precision=0.1,
                          answers=list(answers))
    return Entrant(name, {"slots": name}, record)


def test_a_config_surely_below_another_is_worse_and_the_gain_is_exact_when_the_boundaries_are():
    base, best = entrant("4", answer(SLO, 4, 4, 5)), entrant("16", answer(SLO, 5, 5, 6))
    stopped = entrant("2", answer(SLO, None, None, 4, "outranked"))
    t = judge([SLO], [base, stopped, best], "4")
    r = t.rankings[0]
    assert [(s.config, s.verdict, s.beaten_by) for s in r.standings] == [
        ("4", "worse", "16"), ("2", "worse", "16"), ("16", "best", None)]
    assert r.gain is not None and (r.gain.value, r.gain.lo, r.gain.hi) == (0.25, 0.25, 0.25)
    assert t.recommended == "16" and t.frontier == ["16"]


def test_overlapping_intervals_cannot_tell_configs_apart():
    t = judge([SLO], [entrant("a", answer(SLO, 4, 4, 5)), entrant("b", answer(SLO, 5, 4, 8, "undecided"))], "a")
    r = t.rankings[0]
    assert [s.verdict for s in r.standings] == ["indistinguishable", "best"]
    assert r.gain is not None and r.gain.lo == 0.0 and r.gain.hi == 0.75       # [4/4, 7/4] - 1
    assert r.gain.holds(0.25) and not r.gain.holds(0.8)


def test_configs_that_did_not_start_or_were_not_reached_are_listed_not_ranked():
    oom = LaunchFailure(cause="out_of_memory", evidence="failed to allocate buffer for kv cache")
    t = judge([SLO], [entrant("a", answer(SLO, 4, 4, 5)), Entrant("b", launch=oom), Entrant("c", note="not run: x")],
              "a")
    r = t.rankings[0]
    assert [(s.verdict, s.launch) for s in r.standings] == [("best", None), ("failed", oom), ("not_run", None)]
    assert r.gain is not None and r.gain.value == 0.0 and t.frontier == ["a"]


def test_each_tier_has_its_own_best_and_the_frontier_keeps_both():
    a = entrant("a", answer(SLO, 4, 4, 5), answer(WIDE, 16, 16, None, "above_max"))
    b = entrant("b", answer(SLO, 5, 5, 6), answer(WIDE, 4, 4, 5))
    c = entrant("c", answer(SLO, 2, 2, 3), answer(WIDE, 2, 2, 3))
    t = judge([SLO, WIDE], [a, b, c], "a")
    assert [r.best for r in t.rankings] == ["b", "a"] and t.frontier == ["a", "b"]
    wide = t.ranking("wide")
    assert wide.gain is not None and wide.gain.value == 0.0             # the baseline is the best there
    slo = t.ranking("slo")
    assert slo.gain is not None and slo.gain.lo == 0.25 and slo.gain.hi == 0.25


def test_a_search_stops_only_when_it_cannot_reach_the_rivals_in_every_tier():
    rival = rivals([entrant("a", answer(SLO, 4, 4, 5), answer(WIDE, 16, 16, None, "above_max"))], [SLO, WIDE])
    assert rival == {"slo": 4, "wide": 16}
    assert outranked([answer(SLO, None, None, 4), answer(WIDE, None, None, 4)], rival)
    assert not outranked([answer(SLO, None, None, 4), answer(WIDE, 20, 20, None, "above_max")], rival)
    assert not outranked([answer(SLO, 4, 4, 5), answer(WIDE, None, None, 4)], rival)      # 5 > 4: may reach
    assert not outranked([answer(SLO, None, None, 4)], {"slo": None})


def test_the_next_search_starts_at_the_highest_sure_pass_so_far():
    done = [entrant("a", answer(SLO, 4, 4, 5)), entrant("b", answer(SLO, 6, 5, 8, "undecided"))]
    assert warm_start(done, SLO) == 5
    assert warm_start([entrant("c", answer(SLO, 3, None, 4, "budget"))], SLO) == 3
    assert warm_start([], SLO) is None


@st.composite
def tunes(draw):
    """True integer capacities and, for each config, a search's answer whose sure ends cover it."""
    n = draw(st.integers(2, 6))
    true = [draw(st.integers(1, 20)) for _ in range(n)]
    out = []
    for c in true:
        lo = draw(st.integers(max(1, c - 3), c))
        hi = draw(st.integers(c + 1, c + 4))
        out.append((c, answer(SLO, draw(st.integers(lo, hi - 1)), lo, hi)))
    return out


@given(tunes())
def test_whatever_the_true_capacities_the_intervals_cover_the_verdicts_and_the_gain_hold(configs):
    entrants = [entrant(str(i), a) for i, (_, a) in enumerate(configs)]
    t = judge([SLO], entrants, "0")
    r = t.rankings[0]
    true = {str(i): c for i, (c, _) in enumerate(configs)}
    for s in r.standings:
        if s.verdict == "worse":
            assert s.beaten_by is not None and true[s.config] < true[s.beaten_by]
    assert r.best is not None and r.gain is not None
    assert r.gain.holds(true[r.best] / true["0"] - 1)
    top = max(true.values())
    assert all(s.verdict != "worse" for s in r.standings if true[s.config] == top)
    rival = rivals([e for e in entrants if e.name != "0"], [SLO])
    if outranked([configs[0][1]], rival):
        assert true["0"] < max(c for name, c in true.items() if name != "0")


def test_when_no_config_meets_the_tier_there_is_no_best_and_nothing_to_recommend():
    t = judge([SLO], [entrant("a", answer(SLO, None, None, 1, "below_min")),
                      entrant("b", answer(SLO, None, None, 1, "below_min"))], "a")
    r = t.rankings[0]
    assert r.best is None and t.recommended is None and r.gain is None
    assert [s.verdict for s in r.standings] == ["unmet", "unmet"]


def test_what_the_budget_left_undecided_is_stated_and_a_decided_tier_states_nothing():
    """The best cannot be told from a rival whose search ran out of cells: the answer names both, the search cut
    short, and how to decide it; configs not run are named; a tier whose contenders converged (equal boundaries
    included) or whose rivals are surely worse leaves nothing open."""
    from tokenbench.judge.tune import undecided
    from tokenbench.report.tune import headline

    short = judge([SLO], [entrant("a", answer(SLO, 4, 4, 5)), entrant("b", answer(SLO, 2, 2, None, "budget")),
                          Entrant("c", note="not run: the cell budget was spent")], "a")
    u = undecided(short.rankings[0])
    assert u is not None and u.rivals == ["b"] and u.short == [("b", "budget")] and u.not_run == ["c"] and u.budget
    [line] = [x for x in headline(short, "concurrency", "en") if x.startswith("Undecided")]
    assert "the best, a, is not surely above b" in line and "b (cell budget spent" in line and "not run: c" in line
    assert "--budget-cells" in line
    assert any(x.startswith("档位 slo 下尚未判定") for x in headline(short, "concurrency", "zh"))
    equal = judge([SLO], [entrant("a", answer(SLO, 4, 4, 5)), entrant("b", answer(SLO, 4, 4, 5))], "a")
    beaten = judge([SLO], [entrant("a", answer(SLO, 8, 8, 9)), entrant("b", answer(SLO, 2, 2, 3, "budget"))], "a")
    for decided in (equal, beaten):
        assert undecided(decided.rankings[0]) is None
        assert not any(x.startswith("Undecided") for x in headline(decided, "concurrency", "en"))
