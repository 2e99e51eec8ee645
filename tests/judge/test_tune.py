"""The tune's judgement (judge/tune.py), pure: verdicts from the configs' boundary intervals, the gain over
the baseline with its interval, the frontier, and the rules the tune runs by (stop a config that cannot reach
another, start where the best sure pass lies). Properties hold for any true capacities the intervals cover."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from tokenbench.judge.tune import Entrant, judge, outcome, outranked, rivals, warm_start
from tokenbench.logs.launch import Death, LaunchFailure
from tokenbench.metrics.capacity import Answer, Check, SearchRecord, Sustain, TierVerdict
from tokenbench.report.tune import headline
from tokenbench.spec.slo import Limit, Tier

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
    [line] = [x for x in headline(short, "en") if x.startswith("Undecided")]
    assert "the best, a, is not surely above b" in line and "b (cell budget spent" in line and "not run: c" in line
    assert "--budget-cells" in line
    assert any(x.startswith("档位 slo 下尚未判定") for x in headline(short, "zh"))
    equal = judge([SLO], [entrant("a", answer(SLO, 4, 4, 5)), entrant("b", answer(SLO, 4, 4, 5))], "a")
    beaten = judge([SLO], [entrant("a", answer(SLO, 8, 8, 9)), entrant("b", answer(SLO, 2, 2, 3, "budget"))], "a")
    for decided in (equal, beaten):
        assert undecided(decided.rankings[0]) is None
        assert not any(x.startswith("Undecided") for x in headline(decided, "en"))


# ---- deaths under load and the confirmation on a fresh launch

OOM = LaunchFailure(cause="out_of_memory", evidence="RuntimeError: out of memory", exit_code=1)


def died(launch: int = 1, sustain: bool = False) -> Death:
    return Death(launch=launch, cell="32:16/c=5", sustain=sustain, failure=OOM)


def confirmed(e: Entrant, load: float, passes: bool, doubt=None) -> Entrant:
    """`e` with a sustain cell at `load` whose first tier reads `passes` (its TPOT limit met or not)."""
    limit = e.record.tiers[0].limits[0]
    check = Check(limit=limit, value=limit.value - 1 if passes else limit.value + 1, lo=0.0, hi=100.0, n=200)
    verdict = TierVerdict(tier=e.record.tiers[0].name, ok=True, checks=[check])
    sustain = Sustain(key=f"c={load:g}", repeat=1, load=load, duration_s=60.0, status="ok", verdicts=[verdict],
                      doubt=doubt)
    return dataclasses.replace(e, record=e.record.model_copy(update={"sustain": sustain}))


def test_the_sustain_cell_confirms_by_its_first_tiers_verdict_alone():
    """The sustain cell runs at the first tier's answer, and every tier is judged on it: only the first tier's
    verdict confirms or misses (a looser second tier met there says nothing of the first's boundary)."""
    def verdict(tier: Tier, met: bool) -> TierVerdict:
        limit = Limit.model_validate(tier.limits[0])
        value = limit.value - 1 if met else limit.value + 1
        return TierVerdict(tier=tier.name, ok=True, checks=[Check(limit=limit, value=value, lo=0.0, hi=100.0, n=200)])
    def sustain(*verdicts: TierVerdict) -> Sustain:
        return Sustain(key="c=8", repeat=1, load=8, duration_s=60.0, status="ok", verdicts=list(verdicts))
    assert outcome(sustain(verdict(SLO, False), verdict(WIDE, True))) == "missed"
    assert outcome(sustain(verdict(SLO, True), verdict(WIDE, False))) == "confirmed"


def test_a_config_searched_whose_last_launch_did_not_start_is_failed_never_the_best_nor_a_rival():
    """Searched to 8 streams, then relaunched and out of memory: it cannot be recommended (it no longer starts);
    the config searched to 4 is the best, the only rival and the next search's start."""
    relaunched = dataclasses.replace(entrant("8", answer(SLO, 8, 8, 9)), launch=OOM)
    four = entrant("4", answer(SLO, 4, 4, 5))
    t = judge([SLO], [four, relaunched], "4")
    assert [(s.config, s.verdict, s.launch) for s in t.rankings[0].standings] == [
        ("4", "best", None), ("8", "failed", OOM)]
    assert t.recommended == "4" and t.frontier == ["4"]
    assert rivals([four, relaunched], [SLO]) == {"slo": 4} and warm_start([four, relaunched], SLO) == 4
    assert judge([SLO], [four, dataclasses.replace(relaunched, launch=None)], "4").recommended == "8"


def test_a_config_whose_engine_died_is_never_the_best_nor_a_rival_whatever_its_capacity():
    """The highest capacity died under load (in any launch): it is `died` in every tier with its answer kept, in
    no frontier, no rival another is stopped against, and no config is 'worse' for being below it."""
    dead = dataclasses.replace(entrant("16", answer(SLO, 8, 8, 9), answer(WIDE, 16, 16, None, "above_max")),
                               deaths=(died(launch=2),))
    a = entrant("4", answer(SLO, 4, 4, 5), answer(WIDE, 6, 6, 7))
    b = entrant("2", answer(SLO, 2, 2, 3), answer(WIDE, 3, 3, 4))
    t = judge([SLO, WIDE], [a, b, dead], "4")
    for r in t.rankings:
        s = r.of("16")
        assert s.verdict == "died" and s.answer is not None and s.answer.capacity in (8, 16) and s.deaths[0].launch == 2
        assert r.best == "4" and all(x.beaten_by != "16" for x in r.standings)
    assert t.recommended == "4" and "16" not in t.frontier
    assert rivals([dead], [SLO, WIDE]) == {"slo": None, "wide": None} and warm_start([dead, b], SLO) == 2


def test_the_best_that_misses_its_confirmation_gives_way_to_the_next_ranked_in_the_first_tier_only():
    top = confirmed(entrant("8", answer(SLO, 8, 8, 9), answer(WIDE, 16, 16, None, "above_max")), 8, passes=False)
    nxt = confirmed(entrant("4", answer(SLO, 4, 4, 5), answer(WIDE, 6, 6, 7)), 4, passes=True)
    t = judge([SLO, WIDE], [nxt, top], "4")
    assert t.ranking("slo").of("8").verdict == "unconfirmed" and t.recommended == "4"
    assert t.ranking("wide").best == "8"                        # the confirmation is at the first tier's answer
    slo, wide = t.ranking("slo"), t.ranking("wide")             # each standing carries it in the first tier only
    assert (slo.of("8").confirmation.outcome, slo.of("4").confirmation.outcome) == ("missed", "confirmed")
    assert wide.of("8").confirmation is None and wide.of("4").confirmation is None
    assert [(c.config, c.outcome) for c in t.confirmations] == [("8", "missed"), ("4", "confirmed")]
    assert t.confirmed is not None and t.confirmed.outcome == "confirmed" and t.empty is None
    lines = headline(t, "en")
    assert lines[0].startswith("Recommended: 4 ") and any(x.startswith("Not confirmed: 8 missed tier slo") for x in lines)
    assert any(x.startswith("Confirmed on a fresh launch: 4 met tier slo over a sustain cell at 4 streams") for x in lines)


def test_a_death_on_the_confirmation_launch_is_said_and_the_next_ranked_is_recommended():
    top = dataclasses.replace(entrant("8", answer(SLO, 8, 8, 9)), deaths=(died(launch=2, sustain=True),))
    nxt = confirmed(entrant("4", answer(SLO, 4, 4, 5)), 4, passes=True)
    t = judge([SLO], [nxt, top], "4")
    assert t.recommended == "4" and [(c.config, c.outcome) for c in t.confirmations] == [("8", "died"), ("4", "confirmed")]
    en, zh = headline(t, "en"), headline(t, "zh")
    assert any("8's engine died on its confirmation (launch 2, cell 32:16/c=5: out of memory: RuntimeError: out "
               "of memory)" in x for x in en)
    assert any("8 的引擎在确认中崩溃" in x for x in zh)


def test_a_confirmation_in_doubt_keeps_the_best_and_says_it_is_unconfirmed():
    top = confirmed(entrant("8", answer(SLO, 8, 8, 9)), 8, passes=False, doubt="client")
    t = judge([SLO], [entrant("4", answer(SLO, 4, 4, 5)), top], "4")
    assert t.recommended == "8" and t.confirmed is not None and t.confirmed.outcome == "in_doubt"
    assert any(x.startswith("Recommended unconfirmed: the client's own delays") for x in headline(t, "en"))


def test_no_confirmation_is_said_with_why():
    t = judge([SLO], [entrant("4", answer(SLO, 4, 4, 5))], "4", confirm=False)
    assert "4 was not confirmed on a fresh launch (--no-confirm)" in headline(t, "en")
    t = judge([SLO], [entrant("4", answer(SLO, 4, 4, 5))], "4")
    assert any(x.startswith("4 is not confirmed yet") for x in headline(t, "en"))


def test_nothing_to_recommend_says_why_not_loosen_the_slo_when_no_config_started():
    missing = LaunchFailure(cause="command_missing", evidence="cannot start '/opt/x': No such file or directory")
    none = judge([SLO], [Entrant("a", launch=missing), Entrant("b", launch=missing)], "a")
    assert none.empty == "none_started" and none.recommended is None
    [first, *_] = headline(none, "en")
    assert first == ("No config started: nothing to recommend (the engine's command was not found (cannot start "
                     "'/opt/x': No such file or directory): a, b)")
    held = judge([SLO], [dataclasses.replace(entrant("a", answer(SLO, 4, 4, 5)), deaths=(died(),)),
                         confirmed(entrant("b", answer(SLO, 2, 2, 3)), 2, passes=False)], "a")
    assert held.empty == "none_held" and headline(held, "en")[0].startswith("Nothing to recommend: every config that met")
    unmet = judge([SLO], [entrant("a", answer(SLO, None, None, 1, "below_min"))], "a")
    assert unmet.empty == "none_met" and headline(unmet, "en")[0].startswith("No config met tier slo")


@given(tunes(), st.data())
def test_whatever_dies_the_recommendation_is_a_config_that_never_died(configs, data):
    entrants = [entrant(str(i), a) for i, (_, a) in enumerate(configs)]
    dead = data.draw(st.sets(st.sampled_from([e.name for e in entrants])))
    entrants = [dataclasses.replace(e, deaths=(died(),)) if e.name in dead else e for e in entrants]
    t = judge([SLO], entrants, "0")
    alive = [e for e in entrants if e.name not in dead]
    assert t.recommended not in dead
    assert (t.recommended is None) == (not alive)
    if alive:
        assert t.recommended == max(alive, key=lambda e: (e.answer("slo").capacity, e.answer("slo").lo,
                                                            e.name == "0", -entrants.index(e))).name
