"""The capacity search as a generator that receives results (study/capacity.py), driven here by a simulated
server whose statistic grows with the load (so the true boundary is known), and the limits and tiers it
answers (spec/slo.py). In process, no clock."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.errors import UsageError
from tokenbench.metrics.capacity import CellSamples, Check, judge
from tokenbench.spec.slo import PRESETS, Limit, Tier, parse_tiers
from tokenbench.spec.study import StudySpec
from tokenbench.study import capacity, capacity_lines
from tokenbench.study.capacity import Settings, between, bracket, narrow, search


def tiers(*specs: str) -> tuple[Tier, ...]:
    return tuple(Tier.model_validate({"name": f"t{i}", "limits": text}) for i, text in enumerate(specs))


def drive(s: Settings, stat, noise: float = 0.05, seed: int = 0, status=lambda x: "ok",
          stalled=lambda k, probe: False):
    """Run the search against a server whose per-request TPOT at load x is stat(x) x U(1 - noise, 1 + noise);
    the k-th cell is one the client stalled in when `stalled(k, probe)`: its figures 3 s too slow, marked."""
    rng, gen, probes = random.Random(seed), search(s), []
    probe = next(gen)
    while True:
        probes.append(probe)
        values = [stat(probe.load) * rng.uniform(1 - noise, 1 + noise) for _ in range(64)]
        stop = stalled(len(probes) - 1, probe)
        values = [v + 3000.0 for v in values] if stop else values
        got = CellSamples(key=f"w/x={probe.load:g}", repeat=probe.repeat, status=status(probe.load),
                          values={"tpot": values, "ttft": values}, request_rate=4.0,
                          doubt="client" if stop else None)
        try:
            probe = gen.send(got)
        except StopIteration as end:
            return end.value, probes


def linear(a: float, b: float):
    return lambda x: a + b * x


def test_concurrency_brackets_bisects_and_brackets_the_true_boundary():
    # tpot = 10 + 0.7 x <= 16  <=>  x <= 8.57: the highest passing concurrency is 8
    rec, probes = drive(Settings(dimension="concurrency", tiers=tiers("tpot:mean<=16"), sustain_s=30), linear(10, 0.7))
    [a] = rec.answers
    assert (a.capacity, a.fail_load, a.lo, a.hi, a.reason) == (8, 9, 8, 9, "converged")
    assert a.binding is not None and a.binding.limit.text == "tpot:mean<=16" and a.binding.margin < 0
    assert a.headroom is not None and a.headroom.margin > 0
    assert [p.role for p in probes][:4] == ["bracket"] * 4 and [p.load for p in probes][:4] == [1, 2, 4, 8]
    assert probes[-1].role == "sustain" and probes[-1].load == 8 and probes[-1].duration_s == 30
    assert rec.sustain is not None and rec.sustain.holds
    assert [c.role for c in rec.tried] == [p.role for p in probes]


def test_rate_is_continuous_and_several_tiers_come_from_one_set_of_cells():
    # tpot = 10 + 0.4 r: mean <= 20 up to 25/s; p99 (about 1.05 x) <= 30 up to about 46/s
    rec, probes = drive(Settings(dimension="rate", tiers=tiers("tpot:mean<=20", "tpot:p99<=30"), start=1.0,
                                 sustain_s=0), linear(10, 0.4))
    first, second = rec.answers
    assert first.lo is not None and first.hi is not None and first.lo <= 25 <= first.hi
    assert first.hi - first.lo <= 0.1 * first.hi and first.reason == "converged"
    p99 = (30 / 1.049 - 10) / 0.4                                           # p99 of U(0.95, 1.05) is 1.049
    assert second.lo is not None and second.hi is not None and second.lo - 0.5 <= p99 <= second.hi + 0.5
    assert len({(p.load, p.repeat) for p in probes}) == len(probes)        # no cell twice
    assert rec.sustain is None and all(p.role != "sustain" for p in probes)
    cells = {t.key for t in rec.tried}
    assert all(len(t.verdicts) == 2 for t in rec.tried) and len(cells) == len({p.load for p in probes})


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(b=st.floats(0.05, 5.0), limit=st.floats(12, 200), budget=st.integers(4, 30), precision=st.floats(0.03, 0.4),
       dim=st.sampled_from(["concurrency", "rate"]), seed=st.integers(0, 10))
def test_the_interval_holds_the_boundary_and_the_budget_holds(b, limit, budget, precision, dim, seed):
    """Whatever the boundary and the settings: at most `budget` cells, and the answer's interval holds the
    boundary: its low end's statistic is within the limit and its high end's beyond it, up to the noise of
    a sure decision (per-request noise 1 %: a cell's mean is within 0.15 % with 95 %, a wrong sure
    decision needs 4 standard errors, 0.3 %)."""
    s = Settings(dimension=dim, tiers=tiers(f"tpot:mean<={limit}"), start=1.0, maximum=4096, precision=precision,
                 budget=budget)
    stat = linear(10, b)
    rec, probes = drive(s, stat, noise=0.01, seed=seed)
    assert len(probes) <= budget
    [a] = rec.answers
    if a.lo is not None:
        assert stat(a.lo) <= limit * 1.003
    if a.hi is not None:
        assert stat(a.hi) >= limit * 0.997
    if a.reason == "converged" and a.lo is not None and a.hi is not None:
        assert narrow(s, a.lo, a.hi)


def test_a_load_at_the_boundary_stays_undecided_and_the_search_steps_out():
    """tpot = 16 exactly at 8 streams: 8 can never be told apart; after MAX_CELLS_AT_LOAD cells there the
    search takes a load a gap further out, and says why it stopped."""
    rec, probes = drive(Settings(dimension="concurrency", tiers=tiers("tpot:mean<=16"), sustain_s=0), linear(10, 0.75))
    [a] = rec.answers
    assert a.lo is not None and a.hi is not None and a.lo <= 8 <= a.hi
    assert sum(p.load in (8, 9) for p in probes) >= capacity.MAX_CELLS_AT_LOAD


def test_edges_none_and_above_the_limit_and_failed_cells():
    none, _ = drive(Settings(dimension="concurrency", tiers=tiers("tpot:mean<=5"), sustain_s=0), linear(10, 1))
    assert (none.answers[0].capacity, none.answers[0].reason) == (None, "below_min")
    assert none.sustain is None
    top, probes = drive(Settings(dimension="concurrency", tiers=tiers("tpot:mean<=1000"), maximum=16, sustain_s=0),
                        linear(10, 1))
    assert (top.answers[0].capacity, top.answers[0].reason) == (16, "above_max")
    assert [p.load for p in probes] == [1, 2, 4, 8, 16]
    down, probes = drive(Settings(dimension="rate", tiers=tiers("tpot:mean<=14"), start=64, sustain_s=0), linear(10, 1))
    assert [p.load for p in probes][:4] == [64, 32, 16, 8]                  # halving from the start
    failed, _ = drive(Settings(dimension="concurrency", tiers=tiers("tpot:mean<=1000"), maximum=64, sustain_s=0),
                      linear(10, 1), status=lambda x: "failed" if x > 4 else "ok")   # the server gives up above 4
    assert (failed.answers[0].capacity, failed.answers[0].fail_load) == (4, 5)


def test_a_resume_replays_the_same_probes():
    """The generator decides only from what it is sent: the same results give the same cells (a resumed
    search replays the stored cells and asks for the same next one)."""
    s = Settings(dimension="rate", tiers=tiers("tpot:mean<=20"), start=3.0, budget=12)
    one, a = drive(s, linear(10, 0.4), seed=3)
    two, b = drive(s, linear(10, 0.4), seed=3)
    assert a == b and one == two


def test_the_grid():
    s = Settings(dimension="rate", tiers=tiers("tpot:mean<=1"))
    assert between(s, 24.0, 28.0) == 26.0 and between(s, 1.0, 1.001) == 1.0005
    assert between(Settings(dimension="concurrency", tiers=s.tiers), 6, 7) is None
    assert bracket({1: True, 2: True, 4: False, 8: True}) == (2, 4)          # a pass above a fail is not the answer
    assert bracket({1: False}) == (None, 1) and bracket({4: True}) == (4, None)


def test_limits_tiers_and_presets():
    assert Limit.model_validate("ttft:p99<=2000").model_dump() == "ttft:p99<=2000"
    assert Limit.model_validate("goodput:fraction>=0.9").holds(0.95)
    assert Limit.model_validate("itl:p95<50").holds(49.9) and not Limit.model_validate("itl:p95<50").holds(50)
    for bad in ("ttft:p99>=5", "ttft:p42<=5", "speed:p99<=5", "goodput:fraction>=2", "ttft p99 5"):
        with pytest.raises(ValueError):
            Limit.model_validate(bad)
    assert PRESETS["mlperf-llama2-70b-server"] == "ttft:p99<=2000,tpot:p99<=200"
    assert PRESETS["mlperf-llama2-70b-interactive"] == "ttft:p99<=450,tpot:p99<=40"
    both = parse_tiers("mlperf-llama3.1-8b-interactive; chat=ttft:mean<=500,tpot:p90<=50")
    assert [(t.name, t.text) for t in both] == [("mlperf-llama3.1-8b-interactive", "ttft:p99<=500,tpot:p99<=30"),
                                                 ("chat", "ttft:mean<=500,tpot:p90<=50")]


def test_a_check_is_sure_only_when_its_interval_is_on_one_side():
    limit = Limit.model_validate("tpot:mean<=10")
    assert Check(limit=limit, value=9, lo=8, hi=9.5).sure == "pass"
    assert Check(limit=limit, value=9, lo=8, hi=11).sure is None
    assert Check(limit=limit, value=12, lo=10.5, hi=13).sure == "fail"
    assert Check(limit=limit).sure == "fail" and Check(limit=limit).margin == -math.inf
    pooled = judge(Tier(name="x", limits=[limit]), [
        CellSamples(key="k", repeat=r, status="ok", values={"tpot": [9.0, 9.5, 10.4]}) for r in range(3)])
    assert pooled.checks[0].n == 9 and pooled.passes and pooled.sure is None
    invalid = judge(Tier(name="x", limits=[limit]), [CellSamples(key="k", repeat=0, status="invalid",
                                                                 values={"tpot": [9.0] * 5})])
    assert invalid.passes and invalid.client


def test_a_fail_is_sure_only_beyond_what_the_clients_delays_could_add_to_that_figure():
    ttft, tpot = Limit.model_validate("ttft:mean<=100"), Limit.model_validate("tpot:p99<=10")
    def moved(bound: float, ms: float, metric: str, key: str) -> CellSamples:
        return CellSamples(key="k", repeat=0, status="ok", values={metric: [ms, ms + 0.2, ms - 0.2] * 40},
                           bounds={key: bound, "p99_e2el_ms": 500.0}, marked=[key] if bound > 5 else [])
    assert judge(Tier(name="x", limits=[ttft]), [moved(0.0, 130.0, "ttft", "mean_ttft_ms")]).sure == "fail"
    near = judge(Tier(name="x", limits=[ttft]), [moved(50.0, 130.0, "ttft", "mean_ttft_ms")])
    assert near.sure is None and not near.passes and near.client          # 130 - 50 < 100: it may be the client's
    far = judge(Tier(name="x", limits=[ttft]), [moved(20.0, 130.0, "ttft", "mean_ttft_ms")])
    assert far.sure == "fail" and far.client
    assert judge(Tier(name="x", limits=[ttft]), [moved(50.0, 130.0, "ttft", "p99_ttft_ms")]).sure == "fail"
    assert judge(Tier(name="x", limits=[tpot]), [moved(5.0, 14.0, "tpot", "p99_tpot_ms")]).sure is None
    small = judge(Tier(name="x", limits=[tpot]), [moved(3.0, 14.0, "tpot", "p99_tpot_ms")])
    assert small.sure == "fail" and not small.client                     # within tolerance: not marked


def test_a_p99_from_few_requests_is_marked_as_no_95_percent_bound():
    limit = Limit.model_validate("tpot:p99<=10")
    def cell(n: int) -> CellSamples:
        return CellSamples(key="k", repeat=0, status="ok", values={"tpot": [5.0 + i / n for i in range(n)]})
    assert judge(Tier(name="x", limits=[limit]), [cell(40)]).unreliable
    assert not judge(Tier(name="x", limits=[limit]), [cell(4000)]).unreliable
    assert not judge(Tier(name="x", limits=[Limit.model_validate("tpot:mean<=10")]), [cell(40)]).unreliable


def _spec(**kw) -> StudySpec:
    return StudySpec.model_validate({"target": {"base_url": "http://x"}, "pairs": [[16, 8]], **kw})


def test_the_spec_states_the_dimension_and_refuses_what_cannot_be_searched():
    assert _spec(find_capacity=True, slo={"ttft_ms": 80}).find_capacity == "concurrency"      # a stored old spec
    legacy = _spec(find_capacity=True, slo={"ttft_ms": 80}).capacity_tiers()
    assert [t.text for t in legacy] == ["goodput:fraction>=0.9"]
    both = _spec(find_capacity="rate", slo={"limits": ["ttft:p99<=2000"]}, slo_tiers=["mlperf-llama2-70b-interactive"])
    assert [t.name for t in both.capacity_tiers()] == ["slo", "mlperf-llama2-70b-interactive"]
    with pytest.raises(ValueError, match="needs the sessions workload"):
        _spec(find_capacity="users", slo={"limits": ["ttft:p99<=2000"]})
    users = _spec(find_capacity="users", slo={"limits": ["ttft:p99<=2000"]}, workload={"kind": "sessions", "turns": 3})
    assert users.find_capacity == "users"
    with pytest.raises(ValueError, match="search users"):
        _spec(find_capacity="rate", slo={"limits": ["ttft:p99<=2000"]}, workload={"kind": "sessions", "turns": 3})
    with pytest.raises(ValueError, match="find_capacity needs SLOs"):
        _spec(find_capacity="rate")
    with pytest.raises(ValueError, match="names must differ"):
        _spec(find_capacity="rate", slo={"limits": ["ttft:p99<=9"]}, slo_tiers=[{"name": "slo", "limits": "tpot:p99<=9"}])


def test_flags_spell_the_search(tmp_path):
    from tokenbench.cli.main import main
    assert main(["sweep", "--base-url", "http://127.0.0.1:9", "--pairs", "16:8", "--find-capacity", "users",
                 "--slo", "ttft:p99<=3", "--db", str(tmp_path / "db")]) == UsageError.exit_code


def _cell(values: list[float], repeat: int = 0) -> CellSamples:
    return CellSamples(key="w/x=8", repeat=repeat, status="ok", values={"ttft": values})


def test_one_cells_p99_from_too_few_requests_never_surely_passes_alone():
    """A p99 of 60 requests rests on the largest of them (◊): one such cell passing is no sure pass; a second
    cell at the load that also passes makes it one."""
    tier = tiers("ttft:p99<=100")[0]
    rng = random.Random(1)
    a, b = ([rng.uniform(20, 60) for _ in range(60)] for _ in range(2))
    one = judge(tier, [_cell(a)])
    assert one.passes and one.checks[0].unreliable and one.sure is None
    assert judge(tier, [_cell(a), _cell(b, 1)]).sure == "pass"


def test_cells_that_disagree_widen_the_pooled_interval_to_their_spread():
    """Two cells whose requests each sit tightly around different means (a lucky arrival pattern and an
    unlucky one): the pooled interval alone is narrow; the verdict's holds both cells' means and more."""
    tier = tiers("ttft:mean<=100")[0]
    rng = random.Random(2)
    lucky, unlucky = [rng.gauss(70, 1) for _ in range(300)], [rng.gauss(95, 1) for _ in range(300)]
    pooled = judge(tier, [_cell(lucky + unlucky)]).checks[0]
    both = judge(tier, [_cell(lucky), _cell(unlucky, 1)]).checks[0]
    assert pooled.hi is not None and pooled.hi < 86 and pooled.sure == "pass"
    assert both.cells == 2 and both.lo is not None and both.hi is not None and both.lo < 70 and both.hi > 100
    assert both.value == pytest.approx(pooled.value) and judge(tier, [_cell(lucky), _cell(unlucky, 1)]).sure is None


def test_cells_the_client_stalled_in_are_measured_again_and_never_pooled():
    """The client stopped for 3 s in each of the first four cells (every figure in them 3 s slow, marked for
    the client): each is measured again at once and replaced; the answer is the one an undisturbed search
    gives, and it says how many cells were measured again. A load no clean cell could be measured at is
    named, and where the boundary lies there the answer says it could not decide because of the client."""
    s = Settings(dimension="rate", tiers=tiers("tpot:mean<=20"), start=1.0, sustain_s=0)
    clean, _ = drive(s, linear(10, 0.4))
    rec, probes = drive(s, linear(10, 0.4), stalled=lambda k, p: k < 4)
    a, b = clean.answers[0], rec.answers[0]
    assert (b.capacity, b.lo, b.hi) == (a.capacity, a.lo, a.hi) and b.remeasured == 4 == a.remeasured + 4
    assert [p.role for p in probes[:5]] == ["bracket", "remeasure", "remeasure", "remeasure", "bracket"]
    assert [p.load for p in probes[:5]] == [1.0, 1.0, 1.0, 1.0, 2.0]        # 1/s given up to the client
    assert sum(t.doubt == "client" for t in rec.tried) == 4 and b.client_loads == [1.0]
    assert all(v.cells == 0 or not v.doubted or v.load != 1.0 for v in rec.loads)
    lines = capacity_lines.describe(rec)
    assert "4 cells measured again" in lines[0] and "no clean cell at 1 requests/s" in lines[0]
    # the client stalls in every cell near the boundary: no confident answer, the client named
    stuck, probes = drive(s, linear(10, 0.4), stalled=lambda k, p: 20 <= p.load <= 30)
    a = stuck.answers[0]
    assert a.reason == "client" and a.client_loads == [20.0, 24.0, 28.0] and a.lo == 16 and a.hi == 32
    assert "could not decide" in capacity_lines.describe(stuck)[0]
    assert len(probes) < s.budget                                 # no cell wasted on a load given up
    # nothing fails cleanly above the client's loads: they bound the bracket, and the answer names the client
    high, _ = drive(s, linear(10, 0.4), stalled=lambda k, p: p.load >= 24)
    assert high.answers[0].reason == "client" and high.answers[0].capacity is not None


def test_a_pass_above_a_fail_reopens_the_search():
    """One unlucky cell fails the first tier at 8 streams (a noisy server: 16.1 for a limit of 15.9); the second
    tier (16.2) then tries 12, which passes both, above that fail: the search replicates the fail at 8 before it
    answers, and the fail that does not hold up no longer caps the first tier's answer (14.75 by the closed
    form)."""
    seen = {"n": 0}

    def stat(x: float) -> float:                                    # called once per request: 64 per cell
        if x == 8 and seen["n"] < 64:
            seen["n"] += 1
            return 16.1
        return 10 + 0.4 * x
    rec, probes = drive(Settings(dimension="concurrency", tiers=tiers("tpot:mean<=15.9", "tpot:mean<=16.2"),
                                 sustain_s=0), stat, noise=0.01)
    first = rec.answers[0]
    assert sum(p.load == 8 for p in probes) >= 2                     # the fail at 8 was measured again
    assert first.capacity == 14 and first.fail_load == 15 and not first.nonmonotone


def test_cells_near_the_boundary_are_sized_to_the_limits_statistic_and_the_json_has_each_verdict():
    rec, probes = drive(Settings(dimension="rate", tiers=tiers("tpot:p99<=20"), start=1.0, sustain_s=0),
                        linear(10, 0.4))
    assert all(p.requests is None for p in probes if p.role == "bracket")
    assert all(p.requests == capacity.REQUESTS_FOR["p99"] for p in probes if p.role in ("refine", "replicate"))
    dumped = rec.model_dump(mode="json")
    assert all({"passes", "sure"} <= set(v) for load in dumped["loads"] for v in load["verdicts"])
    assert type(rec).model_validate(dumped) == rec                     # the stored form reads back


def test_the_sustain_cell_is_judged_against_the_cells_that_placed_the_boundary():
    """A sustain cell whose statistic lies apart from what the search's cells read at the same load (here:
    far faster, as if those cells had been slowed) does not confirm the boundary, though it passes."""
    s = Settings(dimension="concurrency", tiers=tiers("tpot:mean<=16"), sustain_s=30)
    gen, probe = search(s), None
    probe = next(gen)
    while True:
        x = 10 + 0.7 * probe.load if probe.role != "sustain" else 5.0
        got = CellSamples(key=f"x={probe.load:g}", repeat=probe.repeat, status="ok",
                          values={"tpot": [x * (1 + 0.01 * (i % 3)) for i in range(64)]}, request_rate=4.0)
        try:
            probe = gen.send(got)
        except StopIteration as end:
            rec = end.value
            break
    assert rec.sustain is not None and rec.sustain.verdicts[0].passes
    assert rec.sustain.apart == ["tpot:mean<=16"] and not rec.sustain.holds
    assert "do not confirm it" in capacity_lines.describe(rec)[-1]


def test_a_cell_is_in_doubt_only_where_the_clients_delays_could_have_made_its_verdict():
    """A p99 TTFT over its 200 ms limit by 19 ms, marked for the client with a 3 s bound (a stop), or with sends
    up to 3 s late off their schedule: in doubt (measured again). Over it by 7.9 s at an overload, where the
    client could have added 100 ms at most: a fail that stands. A pass marked for the client stands in an open
    loop (the client only slows a latency); in a closed loop a stopped client let the server idle: in doubt."""
    t = tiers("ttft:p99<=200")
    values = {"ttft": [100.0] * 290 + [219.0] * 10}
    stopped = CellSamples(key="c", repeat=0, status="ok", values=values, causes={"p99_ttft_ms": "client_stopped"},
                          bounds={"p99_ttft_ms": 3000.0})
    assert stopped.with_doubt(t, closed=False).doubt == "client"
    late = CellSamples(key="c", repeat=0, status="ok", values=values, schedule_off="client", late_ms=3000.0)
    assert late.with_doubt(t, closed=False).doubt == "schedule"
    over = {"ttft": [8100.0] * 300}
    assert CellSamples(key="c", repeat=0, status="ok", values=over, causes={"p99_ttft_ms": "host_contention"},
                       bounds={"p99_ttft_ms": 100.0}).with_doubt(t, closed=False).doubt is None
    assert CellSamples(key="c", repeat=0, status="ok", values=over, schedule_off="client",
                       late_ms=100.0).with_doubt(t, closed=False).doubt is None
    passing = CellSamples(key="c", repeat=0, status="ok", values={"ttft": [100.0] * 300},
                          causes={"p99_ttft_ms": "client_stopped"}, bounds={"p99_ttft_ms": 3000.0})
    assert passing.with_doubt(t, closed=False).doubt is None and passing.with_doubt(t, closed=True).doubt == "client"
    buffered = stopped.model_copy(update={"causes": {"p99_ttft_ms": "buffering"}})
    assert buffered.with_doubt(t, closed=False).doubt is None       # the server's delivery: no doubt of the client
    assert CellSamples(key="c", repeat=0, status="invalid", values=values).with_doubt(t, False).doubt == "client"
