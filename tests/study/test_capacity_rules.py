"""study/capacity.py's rules one by one against docs/metrics.md ("Capacity search"), each at its edge: the cell sizes
near the boundary (the fewest requests whose largest value bounds the percentile at 95 %), the sustain cell's
length, the bracket by brute force over any set of loads, "narrow" and the grid's midpoint, the floor of a rate
search, the remeasure and replicate caps, and the console's lines word for word."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.metrics.capacity import Answer, CellSamples, Check, SearchRecord, Sustain, TierVerdict
from tokenbench.metrics.timeslices import Drift
from tokenbench.spec.slo import Limit, Tier
from tokenbench.study import capacity as cap
from tokenbench.study import capacity_lines
from tokenbench.study.capacity import Settings

TIER = Tier(name="slo", limits=["tpot:mean<=16"])


@pytest.mark.parametrize(("stat", "p"), [("p99", 0.99), ("p95", 0.95), ("p90", 0.90), ("p50", 0.50)])
def test_a_cell_near_the_boundary_holds_the_fewest_requests_whose_largest_bounds_the_percentile(stat, p):
    """n requests all below the percentile happen with probability p^n: the fewest n with p^n < 0.05."""
    n = cap.REQUESTS_FOR[stat]
    assert p**n < 0.05 <= p ** (n - 1)


@pytest.mark.parametrize(("rate", "want"), [(None, 60.0), (0.0, 60.0), (200 / 60, 60.0), (200 / 61, 61.0),
                                            (2.0, 100.0), (200 / 1800, 1800.0), (0.05, 1800.0)])
def test_the_sustain_cell_is_200_requests_at_the_measured_rate_within_60_s_and_30_min(rate, want):
    cells = [CellSamples(key="k", repeat=0, status="ok", request_rate=rate)]
    assert cap.sustain_s(Settings(dimension="rate", tiers=(TIER,)), cells) == pytest.approx(want)
    assert cap.sustain_s(Settings(dimension="rate", tiers=(TIER,), sustain_s=42.0), cells) == 42.0


def test_the_sustain_rate_is_the_mean_of_the_cells_that_measured_one():
    cells = [CellSamples(key="k", repeat=i, status="ok", request_rate=r) for i, r in enumerate((1.0, None, 3.0))]
    assert cap.sustain_s(Settings(dimension="rate", tiers=(TIER,)), cells) == pytest.approx(100.0)


def test_the_settings_of_a_search():
    rate = Settings(dimension="rate", tiers=(TIER,), start=8.0)
    assert not rate.integer and rate.first == 8.0 and rate.floor == 8.0 / 64 and rate.sustains
    streams = Settings(dimension="concurrency", tiers=(TIER,), sustain_s=0)
    assert streams.integer and streams.first == 1.0 and streams.floor == 1.0 and not streams.sustains
    assert Settings(dimension="users", tiers=(TIER,)).integer and Settings(dimension="rate",
                                                                           tiers=(TIER,)).floor == 1 / 64


@settings(deadline=None)
@given(st.dictionaries(st.integers(1, 40).map(float), st.booleans(), max_size=10))
def test_the_bracket_is_the_lowest_fail_and_the_highest_pass_below_it(passes):
    fails = [x for x, ok in passes.items() if not ok]
    high = min(fails) if fails else None
    low = max((x for x, ok in passes.items() if ok and (high is None or x < high)), default=None)
    assert cap.bracket(passes) == (low, high)


@pytest.mark.parametrize(("lo", "hi", "integer", "want"), [
    (90.0, 100.0, False, True), (89.9, 100.0, False, False), (9.0, 10.0, True, True), (8.0, 10.0, True, False),
    (0.5, 1.4, True, True), (1.0, 2.0, False, False), (1.8, 2.0, False, True)])
def test_narrow_is_within_precision_of_the_high_end_or_one_stream_apart(lo, hi, integer, want):
    s = Settings(dimension="concurrency" if integer else "rate", tiers=(TIER,), precision=0.1)
    assert cap.narrow(s, lo, hi) == want


def test_the_midpoint_on_the_dimensions_grid():
    streams, rate = Settings(dimension="concurrency", tiers=(TIER,)), Settings(dimension="rate", tiers=(TIER,))
    assert cap.between(streams, 4, 9) == 6.0 and cap.between(streams, 4, 6) == 5.0 and cap.between(streams, 4, 5) is None
    assert cap.between(rate, 1.0, 2.0) == 1.5 and cap.between(rate, 100.0, 100.5) == 100.2
    assert cap.between(rate, 100.0, 100.02) == 100.01 and cap.between(rate, 1000.0, 1000.02) == 1000.01
    assert cap.between(rate, 1.0, 1.0000001) is None
    assert cap.between(rate, 1.0, 1.2345) == 1.12 and cap.between(rate, 10.0, 10.2) == 10.1   # 3 digits where they fall between
    assert cap._grid(streams, 7.9) == 7.0 and cap._grid(streams, 0.3) == 1.0 and cap._grid(rate, 3.14159) == 3.14
    assert cap._round(123456.0, 3) == 123000.0


def _drive(s: Settings, stat, doubt=lambda probe: False) -> list[cap.Probe]:
    gen, probes = cap.search(s), []
    probe = next(gen)
    try:
        while True:
            probes.append(probe)
            values = [stat(probe.load)] * 8
            probe = gen.send(CellSamples(key=f"x={probe.load:g}", repeat=probe.repeat, status="ok",
                                         values={"tpot": values}, request_rate=2.0,
                                         doubt="client" if doubt(probe) else None))
    except StopIteration:
        return probes


def test_a_load_in_doubt_is_measured_again_four_times_at_most():
    probes = _drive(Settings(dimension="concurrency", tiers=(TIER,), sustain_s=0, budget=30), lambda x: 10 + 0.7 * x,
                    doubt=lambda p: p.load == 4)
    at4 = [p for p in probes if p.load == 4]
    assert len(at4) == cap.MAX_REMEASURE == 4 and [p.role for p in at4] == ["bracket", *["remeasure"] * 3]
    assert [p.repeat for p in at4] == [0, 1, 2, 3]


def test_the_budget_holds_the_sustain_cell_back():
    probes = _drive(Settings(dimension="concurrency", tiers=(TIER,), budget=3), lambda x: 10 + 0.7 * x)
    assert [p.role for p in probes] == ["bracket", "bracket", "sustain"]
    none = _drive(Settings(dimension="concurrency", tiers=(TIER,), budget=3, sustain_s=0), lambda x: 10 + 0.7 * x)
    assert [p.role for p in none] == ["bracket"] * 3


def test_the_first_probe_is_the_start_on_the_grid():
    assert _drive(Settings(dimension="rate", tiers=(TIER,), start=3.14159, budget=1, sustain_s=0),
                  lambda x: 1.0)[0].load == 3.14
    assert _drive(Settings(dimension="concurrency", tiers=(TIER,), start=5.7, budget=1, sustain_s=0),
                  lambda x: 1.0)[0].load == 5.0


# ---- the console -------------------------------------------------------------------------------
def _check(value: float) -> Check:
    return Check(limit=Limit.model_validate("tpot:mean<=16"), value=value, lo=value - 1, hi=value + 1, n=64)


def _record(answer: Answer, dimension: str = "concurrency", sustain: Sustain | None = None) -> SearchRecord:
    return SearchRecord(workload="32:16", dimension=dimension, tiers=[TIER], budget=24, precision=0.1,
                        answers=[answer], sustain=sustain)


def _answer(**kw) -> Answer:
    return Answer(tier="slo", limits=TIER.limits, **kw)


def test_an_answer_line_with_its_interval_binding_and_doubts():
    a = _answer(capacity=8.0, fail_load=9.0, lo=8.0, hi=9.0, binding=_check(16.8), remeasured=2,
                client_loads=[12.0], nonmonotone=[10.0, 11.0], hi_unreliable=True)
    [line, note] = capacity_lines.describe(_record(a))
    assert line == ("capacity 32:16 (tier slo: tpot:mean<=16): 8 streams, boundary in [8, 9◊] (95 %), converged; "
                    "binding tpot:mean<=16 at 9: 16.8 (-5.0%); 2 cells measured again: the client's own delays may "
                    "have moved them; no clean cell at 12 streams (the client's delays); 10, 11 streams met it above "
                    "9, which failed (non-monotone: the answer stays below the first failure)")
    assert note.startswith("◊ that end rests on a percentile from too few requests")


@pytest.mark.parametrize(("kw", "tail"), [
    ({"fail_load": 1.0, "reason": "below_min"}, "none (the lowest load tried missed it: 1 streams)"),
    ({"reason": "budget"}, "none (cell budget spent: - streams)"),
    ({"fail_load": 4.0, "reason": "outranked"}, "below 4 streams (stopped early: its boundary cannot reach the best "
                                                "config's)"),
    ({"fail_load": 4.0, "reason": "time"}, "below 4 streams (time budget spent)"),
    ({"fail_load": 4.0, "reason": "budget"}, "below 4 streams (cell budget spent)")])
def test_an_answer_without_a_capacity_says_why(kw, tail):
    assert capacity_lines.describe(_record(_answer(**kw))) == [f"capacity 32:16 (tier slo: tpot:mean<=16): {tail}"]


def test_a_rate_answer_and_the_sustain_line():
    drift = [Drift(figure="ttft_mean_ms", first=10.0, last=12.0, change=0.2, lo=0.1, hi=0.3, slices=2, drifted=True),
             Drift(figure="tpot_mean_ms", first=10.0, last=10.1, change=0.01, lo=None, hi=None, slices=1,
                   drifted=False)]
    verdict = TierVerdict(tier="slo", ok=True, checks=[_check(15.0)])
    sustain = Sustain(key="k", repeat=0, load=2.5, duration_s=80.4, status="ok", verdicts=[verdict], drift=drift,
                      apart=["tpot:mean<=16"], doubt="client")
    lines = capacity_lines.describe(_record(_answer(capacity=2.5, lo=2.0, hi=None, reason="above_max"), "rate", sustain))
    assert lines[0] == ("capacity 32:16 (tier slo: tpot:mean<=16): 2.5 requests/s, boundary in [2, -] (95 %), "
                        "every load up to the limit met it")
    assert lines[1] == ("sustain 32:16 at 2.5 requests/s for 80 s: does not hold (ok; drifted (ttft_mean_ms +20.0%); "
                        "tpot:mean<=16 apart from the search's cells at that load: they do not confirm it; the "
                        "client's own delays may have moved it)")
    held = sustain.model_copy(update={"drift": [], "apart": [], "doubt": None})
    assert capacity_lines.describe(_record(_answer(capacity=2.5), "users", held))[1] == (
        "sustain 32:16 at 2.5 users for 80 s: holds (ok; no drift)")
    load_text = capacity_lines.load_text
    assert load_text(None) == "-" and load_text(2.0) == "2" and math.isclose(float(load_text(0.125)), 0.125)


def _seen(s: Settings, stat, until: int) -> list[tuple[cap.Probe, CellSamples]]:
    """The first `until` probes of a search and the cells they got (a server whose TPOT is stat(load))."""
    gen, out = cap.search(s), []
    probe = next(gen)
    for _ in range(until):
        got = CellSamples(key=f"x={probe.load:g}", repeat=probe.repeat, status="ok",
                          values={"tpot": [stat(probe.load) * f for f in (0.99, 1.0, 1.01) * 3]}, request_rate=2.0)
        out.append((probe, got))
        try:
            probe = gen.send(got)
        except StopIteration:
            break
    return out


def test_a_search_stopped_from_outside_answers_from_the_cells_it_saw():
    s = Settings(dimension="concurrency", tiers=(TIER,), sustain_s=0, budget=30)
    seen = _seen(s, lambda x: 10 + 0.7 * x, 5)                         # 1, 2, 4, 8 pass; 16 fails
    [a] = cap.halted(s, seen, "outranked").answers
    assert (a.capacity, a.fail_load, a.reason) == (8.0, 16.0, "outranked")
    [none] = cap.halted(s, [], "time").answers
    assert (none.capacity, none.fail_load, none.lo, none.hi, none.reason) == (None, None, None, None, "time")
    done = _seen(s, lambda x: 10 + 0.7 * x, 30)
    assert cap.halted(s, done, "time").answers[0].reason == "converged"     # a finished tier keeps its reason


def test_with_nothing_failing_cleanly_the_search_bisects_toward_the_clients_loads():
    """Cells at 24 requests/s and above are always in doubt (the client's): the boundary is sought up to them."""
    s = Settings(dimension="rate", tiers=(Tier(name="t", limits=["tpot:mean<=20"]),), start=1.0, sustain_s=0, budget=40)
    probes = _drive(s, lambda x: 10 + 0.4 * x, doubt=lambda p: p.load >= 24)
    rec_loads = sorted({p.load for p in probes})
    assert 16.0 in rec_loads and any(16.0 < x < 24.0 for x in rec_loads)      # refined above the last clean pass
    assert max(x for x in rec_loads if x < 24.0) >= 22.0


def test_an_undecided_end_steps_out_by_twice_the_gap_of_the_bracket():
    """The highest pass stays unsure after MAX_CELLS_AT_LOAD cells (its mean sits on the limit) and nothing
    below surely passed: the search tries a load twice the bracket's gap further out (a rate: 24 - 2 x 0.5;
    streams: at least one stream a side)."""
    t = Tier(name="t", limits=["tpot:mean<=20"])
    def state(dimension: str, low: float, high: float) -> cap._State:
        st = cap._State(Settings(dimension=dimension, tiers=(t,), sustain_s=0))
        on = [CellSamples(key="lo", repeat=i, status="ok", values={"tpot": [19.0, 21.0, 20.0]}) for i in range(4)]
        over = [CellSamples(key="hi", repeat=i, status="ok", values={"tpot": [30.0, 30.1, 29.9]}) for i in range(4)]
        st.cells = {low: on, high: over}
        return st
    rate = cap._settle(state("rate", 24.0, 24.5), t, 24.0, 24.5)
    assert rate.probe is not None and (rate.probe.load, rate.probe.role, rate.priority) == (23.0, "bracket", 2)
    streams = cap._settle(state("concurrency", 8.0, 9.0), t, 8.0, 9.0)
    assert (streams.probe.load, streams.probe.role) == (6.0, "bracket")


def test_the_tiers_steps_are_taken_in_their_order_the_most_urgent_kind_first():
    """At 4 streams a loose tier passes (it brackets up: 8) and a strict one fails (it brackets down: 2), both
    bracket steps: the first tier's goes first; a bracket step goes before a refine step whatever the tier."""
    loose, strict = Tier(name="loose", limits=["tpot:mean<=100"]), Tier(name="strict", limits=["tpot:mean<=5"])
    st = cap._State(Settings(dimension="concurrency", tiers=(loose, strict), sustain_s=0))
    st.cells = {4.0: [CellSamples(key="x", repeat=0, status="ok", values={"tpot": [10.0, 10.1, 9.9]})]}
    reasons: dict = {}
    assert cap._step(st, reasons).load == 8.0 and reasons == {}
    st.s = Settings(dimension="concurrency", tiers=(strict, loose), sustain_s=0)
    assert cap._step(st, reasons).load == 2.0
    st.cells[8.0] = [CellSamples(key="y", repeat=0, status="ok", values={"tpot": [200.0] * 3})]
    st.s = Settings(dimension="concurrency", tiers=(loose, strict), sustain_s=0)
    got = cap._step(st, reasons)                                # loose refines 4..8 (6), strict brackets down (2)
    assert (got.load, got.role) == (2.0, "bracket")


def test_a_tier_of_means_needs_no_larger_cell_near_the_boundary():
    """Only percentiles need a cell large enough for their largest value to bound them; a mean limit leaves
    the cell as asked (no request count), and a tier mixing both takes the percentile's."""
    mean_only = _drive(Settings(dimension="concurrency", tiers=(TIER,), sustain_s=0), lambda x: 10 + 0.7 * x)
    assert any(p.role in ("refine", "replicate") for p in mean_only)
    assert all(p.requests is None for p in mean_only)
    mixed = Tier(name="m", limits=["tpot:mean<=16", "tpot:p90<=30"])
    both = _drive(Settings(dimension="concurrency", tiers=(mixed,), sustain_s=0), lambda x: 10 + 0.7 * x)
    assert {p.requests for p in both if p.role in ("refine", "replicate")} == {cap.REQUESTS_FOR["p90"]}


def _cells(key: str, values: list[float], n: int) -> list[CellSamples]:
    return [CellSamples(key=key, repeat=i, status="ok", values={"tpot": values}) for i in range(n)]


def test_when_neither_end_can_step_out_the_end_with_fewer_cells_is_replicated():
    """Both ends of the bracket stay undecided past MAX_CELLS_AT_LOAD cells and the loads a gap further out
    were tried (in doubt): the search keeps replicating, the end with the fewer cells first."""
    t = Tier(name="t", limits=["tpot:mean<=20"])
    st = cap._State(Settings(dimension="rate", tiers=(t,), sustain_s=0))
    st.cells = {24.0: _cells("lo", [19.0, 21.0, 20.0], 5), 24.5: _cells("hi", [18.0, 23.0, 20.5], 4)}
    st.doubted = {23.0: _cells("out-lo", [19.0], 1), 25.5: _cells("out-hi", [21.0], 1)}
    step = cap._settle(st, t, 24.0, 24.5)
    assert step.probe is not None and (step.probe.load, step.probe.role, step.reason) == (24.5, "replicate", "undecided")
    st.cells[24.5] = _cells("hi", [18.0, 23.0, 20.5], 6)
    assert cap._settle(st, t, 24.0, 24.5).probe.load == 24.0


@pytest.mark.parametrize(("doubted", "reason"), [([6.0, 16.0], "client"), ([2.0, 6.0], "client"), ([6.0], "client"),
                                                 ([16.0], "budget"), ([2.0, 16.0], "budget")])
def test_a_client_load_inside_the_open_bracket_names_the_client_whatever_lies_outside(doubted, reason):
    """Passes at 4, fails at 8, and loads where every cell was in doubt: the answer is the client's when one of
    them lies between 4 and 8 (it may hold the boundary), not when all lie outside."""
    st = cap._State(Settings(dimension="concurrency", tiers=(TIER,), sustain_s=0))
    st.cells = {4.0: _cells("4", [10.0, 10.1, 9.9], 2), 8.0: _cells("8", [30.0, 30.1, 29.9], 2)}
    st.doubted = {x: [CellSamples(key=f"{x:g}", repeat=0, status="ok", doubt="client")] for x in doubted}
    a = cap.answer(st, TIER, "budget")
    assert (a.capacity, a.fail_load, a.reason, a.client_loads) == (4.0, 8.0, reason, doubted)
    assert cap.answer(st, TIER, "converged").reason == "converged"
