"""judge/tune.py against references written from docs/metrics.md ("Tune") over any set of configs hypothesis draws:
worse by brute force (a sure failure at or below another's sure pass, the highest such named), the best by its
tie-breaks (capacity, the surer low end, the baseline, the earlier config), the gain's ends from each config's
span (whole streams: one below the sure failure), the frontier as a Pareto set over the tiers, the rules the tune
runs by at their edges, and the recommended `deploy up` command."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.judge import tune as tn
from tokenbench.logs.launch import LaunchFailure
from tokenbench.metrics.capacity import Answer, SearchRecord
from tokenbench.spec.slo import Tier

SLO = Tier(name="slo", limits=["tpot:mean<=20"])
WIDE = Tier(name="wide", limits=["tpot:mean<=30"])


def answer(tier: Tier, capacity: float | None, lo: float | None, hi: float | None, reason: str = "converged") -> Answer:
    return Answer(tier=tier.name, limits=tier.limits, capacity=capacity, lo=lo, hi=hi, reason=reason)


def entrant(name: str, *answers: Answer, dimension: str = "concurrency", launch: LaunchFailure | None = None,
            searched: bool = True) -> tn.Entrant:
    record = SearchRecord(workload="32:16", dimension=dimension, tiers=[SLO, WIDE][:max(1, len(answers))], budget=24,
                          precision=0.1, answers=list(answers)) if searched else None
    return tn.Entrant(name, {"slots": name}, record, launch)


@st.composite
def boundaries(draw, tier: Tier = SLO) -> Answer:
    """A search's answer: a capacity (None: not met at the lowest load), lo at most it, hi above it."""
    capacity = draw(st.none() | st.integers(1, 12))
    lo = None if capacity is None else draw(st.none() | st.integers(1, capacity))
    hi = draw(st.none() | st.integers((capacity or 0) + 1, 14))
    return answer(tier, None if capacity is None else float(capacity), None if lo is None else float(lo),
                  None if hi is None else float(hi))


def _worse_by(x: Answer, others: dict[str, Answer]) -> str | None:
    above = [(a.lo, n) for n, a in others.items() if x.hi is not None and a.lo is not None and x.hi <= a.lo]
    return max(above)[1] if above else None


@settings(deadline=None)
@given(st.lists(boundaries(), min_size=1, max_size=5), st.integers(0, 4))
def test_verdicts_and_the_best_by_the_documented_rules(answers, base_i):
    names = [f"c{i}" for i in range(len(answers))]
    baseline = names[min(base_i, len(names) - 1)]
    entrants = [entrant(n, a) for n, a in zip(names, answers, strict=True)]
    r = tn.rank(SLO, entrants, baseline, integer=True)
    by_name = dict(zip(names, answers, strict=True))
    if not any((a.capacity or 0) > 0 for a in answers):
        assert r.best is None and {s.verdict for s in r.standings} == {"unmet"} and r.gain is None
        return
    best = max(names, key=lambda n: (by_name[n].capacity or 0.0, by_name[n].lo or 0.0, n == baseline, -names.index(n)))
    assert r.best == best and r.of(best).verdict == "best" and r.best_answer == by_name[best]
    for n in names:
        if n == best:
            continue
        by = _worse_by(by_name[n], {m: a for m, a in by_name.items() if m != n})
        assert (r.of(n).verdict, r.of(n).beaten_by) == (("worse", by) if by else ("indistinguishable", None))
    if best == baseline:
        assert (r.gain.value, r.gain.lo, r.gain.hi) == (0.0, 0.0, 0.0)


def test_ties_go_to_the_surer_low_end_then_the_baseline_then_the_earlier_config():
    a, b = answer(SLO, 8.0, 6.0, 9.0), answer(SLO, 8.0, 7.0, 9.0)
    assert tn.rank(SLO, [entrant("a", a), entrant("b", b)], "a", True).best == "b"
    same = answer(SLO, 8.0, 7.0, 9.0)
    assert tn.rank(SLO, [entrant("a", same), entrant("b", same)], "b", True).best == "b"
    assert tn.rank(SLO, [entrant("a", same), entrant("b", same)], "x", True).best == "a"
    assert tn.rank(SLO, [entrant("a", same), entrant("b", same), entrant("c", same)], "x", True).best == "a"


def test_a_sure_failure_at_another_configs_sure_pass_is_worse_and_just_above_it_is_not():
    best = answer(SLO, 10.0, 8.0, 11.0)
    assert tn.beaten(answer(SLO, 7.0, 5.0, 8.0), {"b": best}) == "b"
    assert tn.beaten(answer(SLO, 7.0, 5.0, 8.5), {"b": best}) is None
    assert tn.beaten(answer(SLO, 7.0, 5.0, None), {"b": best}) is None
    two = {"b": answer(SLO, 10.0, 8.0, 11.0), "c": answer(SLO, 12.0, 9.0, 13.0), "d": answer(SLO, 5.0, None, 6.0)}
    assert tn.beaten(answer(SLO, 4.0, 2.0, 5.0), two) == "c"


def test_configs_not_searched_are_failed_with_their_cause_or_not_run():
    cause = LaunchFailure(cause="out_of_memory", evidence="CUDA out of memory")
    r = tn.rank(SLO, [entrant("a", answer(SLO, 4.0, 4.0, 5.0)), entrant("b", launch=cause, searched=False),
                      entrant("c", searched=False)], "a", True)
    assert [(s.config, s.verdict) for s in r.standings] == [("a", "best"), ("b", "failed"), ("c", "not_run")]
    assert r.of("b").launch == cause and r.of("a").cells == 0
    assert entrant("z", searched=False).answer("slo") is None and entrant("z", searched=False).cells == 0


@pytest.mark.parametrize(("integer", "best", "base", "want"), [
    (True, (10.0, 8.0, 12.0), (5.0, 4.0, 6.0), (1.0, 8 / 5 - 1, 11 / 4 - 1)),
    (False, (10.0, 8.0, 12.0), (5.0, 4.0, 6.0), (1.0, 8 / 6 - 1, 12 / 4 - 1)),
    (True, (10.0, 8.0, None), (5.0, 4.0, 6.0), (1.0, 8 / 5 - 1, None)),
    (True, (10.0, 8.0, 12.0), (5.0, None, 6.0), (1.0, 8 / 5 - 1, None)),
    (True, (10.0, 8.0, 12.0), (5.0, 4.0, None), (1.0, None, 11 / 4 - 1)),
    (True, (10.0, 8.0, 12.0), (None, None, 1.0), (None, None, None)),
    (True, (10.0, 8.0, 9.0), (5.0, 4.0, 5.0), (1.0, 8 / 4 - 1, 8 / 4 - 1))])
def test_the_gains_ends_combine_one_end_of_each_configs_span(integer, best, base, want):
    """Whole streams: a config's capacity lies in [lo, hi - 1]; rates: [lo, hi]; a span never ends below lo."""
    got = tn.gain(answer(SLO, *best), answer(SLO, *base), integer)
    assert (got.value, got.lo, got.hi) == tuple(pytest.approx(w) if w is not None else None for w in want)


def test_a_span_is_lo_to_one_below_the_sure_failure_for_whole_streams():
    assert tn.span(answer(SLO, 4.0, 3.0, 6.0), True) == tn.Span(3.0, 5.0)
    assert tn.span(answer(SLO, 4.0, 3.0, 6.0), False) == tn.Span(3.0, 6.0)
    assert tn.span(answer(SLO, 3.0, 3.0, 3.5), True) == tn.Span(3.0, 3.0)
    assert tn.span(answer(SLO, None, None, 2.0), True) == tn.Span(0.0, 1.0)
    assert tn.span(answer(SLO, 9.0, 9.0, None), True) == tn.Span(9.0, None)
    assert tn.score(None) == 0.0 and tn.score(answer(SLO, None, None, 1.0)) == 0.0 and tn.score(answer(SLO, 2.5, 1, 3)) == 2.5


def test_a_gain_holds_what_its_ends_hold():
    g = tn.Gain(value=0.5, lo=0.2, hi=0.8)
    assert g.holds(0.2) and g.holds(0.8) and not g.holds(0.19) and not g.holds(0.81)
    assert g.holds(0.2 - 0.95e-12) and not g.holds(0.2 - 1.05e-12)          # the ends' float rounding, 1e-12
    assert g.holds(0.8 + 0.95e-12) and not g.holds(0.8 + 1.05e-12)
    edge = tn.Gain(value=0.7, lo=0.5, hi=0.9)
    assert 0.5 - 1e-12 + 1e-12 == 0.5 and edge.holds(0.5 - 1e-12) and edge.holds(0.9 + 1e-12)     # at the tolerance
    assert tn.Gain(value=None, lo=None, hi=0.1).holds(-5.0) and tn.Gain(value=None, lo=0.1, hi=None).holds(1e9)


@settings(deadline=None)
@given(st.lists(st.tuples(boundaries(SLO), boundaries(WIDE)), min_size=1, max_size=5))
def test_the_frontier_is_the_configs_no_other_beats_in_one_tier_while_matching_the_rest(pairs):
    entrants = [entrant(f"c{i}", a, b) for i, (a, b) in enumerate(pairs)]
    scores = {e.name: [tn.score(e.answer("slo")), tn.score(e.answer("wide"))] for e in entrants}
    want = [n for n, x in scores.items()
            if not any(y[0] >= x[0] and y[1] >= x[1] and y != x for y in scores.values())]
    assert tn.frontier(entrants, [SLO, WIDE]) == want


def test_the_frontier_leaves_out_configs_not_searched():
    got = tn.frontier([entrant("a", answer(SLO, 1.0, 1.0, 2.0)), entrant("b", searched=False)], [SLO])
    assert got == ["a"]


def test_judge_ranks_each_tier_on_the_integer_axis_unless_a_search_ran_on_rates():
    es = [entrant("a", answer(SLO, 4.0, 3.0, 6.0)), entrant("b", answer(SLO, 8.0, 7.0, 9.0))]
    t = tn.judge([SLO], es, "a")
    assert t.integer and t.recommended == "b" and t.ranking("slo").gain.lo == pytest.approx(7 / 5 - 1)
    rates = [entrant("a", answer(SLO, 4.0, 3.0, 6.0), dimension="rate"), es[1]]
    assert not tn.judge([SLO], rates, "a").integer
    assert tn.Tuning(baseline="a", rankings=[], frontier=[], integer=True).recommended is None


# ---- the rules the tune runs by -----------------------------------------------------------------
def test_rivals_are_each_tiers_highest_sure_pass():
    es = [entrant("a", answer(SLO, 4.0, 3.0, 6.0), answer(WIDE, 9.0, None, 10.0)),
          entrant("b", answer(SLO, 8.0, 7.0, 9.0), answer(WIDE, 5.0, 5.0, 6.0)), entrant("c", searched=False)]
    assert tn.rivals(es, [SLO, WIDE]) == {"slo": 7.0, "wide": 5.0}
    assert tn.rivals([entrant("a", answer(SLO, None, None, 1.0))], [SLO]) == {"slo": None}


@pytest.mark.parametrize(("his", "out"), [((7.0, 5.0), True), ((7.5, 5.0), False), ((7.0, 5.5), False),
                                          ((None, 5.0), False), ((6.0, 4.0), True)])
def test_a_search_is_outranked_only_when_every_tier_fails_at_or_below_the_rivals_sure_pass(his, out):
    rival = {"slo": 7.0, "wide": 5.0}
    answers = [answer(SLO, 1.0, 1.0, his[0]), answer(WIDE, 1.0, 1.0, his[1])]
    assert tn.outranked(answers, rival) == out
    assert not tn.outranked([], rival) and not tn.outranked(answers[:1], {"slo": None})


def test_the_next_search_starts_at_the_highest_sure_pass_else_the_highest_capacity():
    es = [entrant("a", answer(SLO, 6.0, 3.0, 7.0)), entrant("b", answer(SLO, 9.0, 5.0, 10.0))]
    assert tn.warm_start(es, SLO) == 5.0
    unsure = [entrant("a", answer(SLO, 6.0, None, 7.0)), entrant("b", answer(SLO, 9.0, None, 10.0))]
    assert tn.warm_start(unsure, SLO) == 9.0
    assert tn.warm_start([entrant("a", answer(SLO, None, None, 1.0)), entrant("b", searched=False)], SLO) is None


def test_what_is_left_undecided():
    best, rival = answer(SLO, 8.0, 6.0, 9.0, "budget"), answer(SLO, 7.0, 5.0, 9.0, "converged")
    r = tn.rank(SLO, [entrant("a", best), entrant("b", rival), entrant("c", searched=False)], "a", True)
    got = tn.undecided(r)
    assert (got.rivals, got.short, got.not_run) == (["b"], [("a", "budget")], ["c"]) and got.budget
    decided = tn.rank(SLO, [entrant("a", answer(SLO, 8.0, 6.0, 9.0)), entrant("b", rival)], "a", True)
    assert tn.undecided(decided) is None
    time_left = tn.rank(SLO, [entrant("a", answer(SLO, 8.0, 6.0, 9.0, "client")), entrant("b", rival)], "a", True)
    open_ = tn.undecided(time_left)
    assert open_.short == [("a", "client")] and not open_.budget
    short = tn.rank(SLO, [entrant("a", best), entrant("b", answer(SLO, 7.0, 5.0, 9.0, "client"))], "a", True)
    got = tn.undecided(short)
    assert got.short == [("a", "budget"), ("b", "client")] and got.not_run == [] and got.budget
    unreached = tn.rank(SLO, [entrant("a", answer(SLO, 8.0, 6.0, 9.0, "client")), entrant("b", rival),
                              entrant("c", searched=False)], "a", True)
    assert tn.undecided(unreached).budget                                        # a config not run: more may tell
    alone = tn.rank(SLO, [entrant("a", best), entrant("c", searched=False)], "a", True)
    assert (tn.undecided(alone).rivals, tn.undecided(alone).short) == ([], [])
    assert set(tn.SHORT) == {"budget", "time"} and set(tn.FINAL) == {"converged", "above_max", "below_min",
                                                                     "outranked", "died"}


# ---- a stored tune -----------------------------------------------------------------------------
class _Config:
    def __init__(self, name: str, overrides: dict, message: str = "") -> None:
        self.name, self.overrides, self.launch, self.profile, self.message = name, overrides, None, None, message
        self.deaths = ()


def test_the_recommendation_is_deploy_up_with_the_studys_sets_and_the_configs_last_holding():
    spec = {"target": {"profile": "vllm-cpu", "set": ["engine.slots=4", "engine.dtype=bf16"]}}
    rec = tn.recommendation(spec, _Config("b", {"engine.slots": 16, "engine.block": 32}))
    assert rec.argv == ["tokenbench", "deploy", "up", "vllm-cpu", "--set", "engine.slots=16", "--set",
                        "engine.dtype=bf16", "--set", "engine.block=32"]
    assert rec.config == "b" and rec.profile is None
    assert tn.recommendation({}, _Config("x", {})).argv == ["tokenbench", "deploy", "up", ""]


def test_a_stored_tune_is_judged_and_any_other_run_is_not():
    from tokenbench.store.rows import SearchRow
    record = SearchRecord(workload="32:16", dimension="concurrency", tiers=[SLO], budget=8, precision=0.1,
                          answers=[answer(SLO, 4.0, 3.0, 5.0)])
    searches = [SearchRow(config="a", workload="32:16", record=record)]
    configs = [_Config("a", {"k": 1}), _Config("b", {}, message="not reached")]
    got = tn.of_run({"tune": {"baseline": None}, "target": {"profile": "p"}}, configs, searches)
    assert got.baseline == "default" and got.recommended == "a"
    assert got.recommendation.argv == ["tokenbench", "deploy", "up", "p", "--set", "k=1"]
    assert got.ranking("slo").of("b").note == "not reached" and got.ranking("slo").of("b").verdict == "not_run"
    assert tn.of_run({}, configs, searches) is None and tn.of_run({"tune": {}}, configs, []) is None
    assert tn.baseline_of({"tune": {"baseline": "x"}}) == "x" and tn.baseline_of({"tune": "no"}) is None
