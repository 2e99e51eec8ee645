"""When a verdict between two sides is refused (judge/fingerprint.py), by value at the rule's edges, and what
two sides' fingerprints tell apart."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenbench.judge.fingerprint import (
    WARM_SHARE,
    FactDiff,
    Fingerprint,
    HostRule,
    cache_state,
    differences,
    refusals,
    refused,
    side_print,
    summaries,
)
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import CacheState, CpuShares
from tokenbench.store.rows import CellRow


def side(other: float | None = 10.0, host: float = 190.0, psi: float | None = 50.0, state: str | None = "cold",
         cpus: int = 2, wait: float = 5.0) -> list[CellSummary]:
    """One cell's summary with its CPU shares (other work None: the server's processes not seen)."""
    shares = CpuShares(count=cpus, host_pct=host, client_pct=20.0, server_pct=None if other is None else 60.0,
                       other_pct=other, psi_some_pct=psi, server_wait_pct=None if other is None else wait)
    return [CellSummary().with_(shares, CacheState(state=state) if state else None)]


def codes(reasons) -> list[tuple[str, bool]]:
    return [(r.code, r.refuses) for r in reasons]


def test_other_work_refuses_only_above_a_quarter_core_more_on_the_worse_side():
    rule = HostRule()
    calm = side(other=10.0)
    assert refusals(side(other=10.0 + rule.other_points), calm, "a") == ()          # at the limit: alike
    busy = refusals(side(other=10.0 + rule.other_points + 0.1), calm, "a")
    assert codes(busy) == [("other_work", True)] and refused(busy)
    r = busy[0]
    assert (r.side, r.a, r.b, r.limit) == ("a", pytest.approx(35.1), 10.0, rule.other_points)


def test_the_busier_side_must_be_the_worse_one():
    """A busier host explains a slower side, not a faster one: B busier and B better stands."""
    assert refusals(side(other=10.0), side(other=150.0), "a") == ()
    got = refusals(side(other=10.0), side(other=150.0), "b")
    assert codes(got) == [("other_work", True)] and got[0].side == "b" and (got[0].a, got[0].b) == (10.0, 150.0)


def test_no_difference_is_checked_both_ways():
    assert codes(refusals(side(other=10.0), side(other=150.0), None)) == [("other_work", True)]
    assert codes(refusals(side(other=150.0), side(other=10.0), None)) == [("other_work", True)]
    assert refusals(side(other=10.0), side(other=20.0), None) == ()


def test_other_work_on_a_host_with_a_core_idle_refuses_only_with_pressure():
    """16 CPUs, 4 busy: other work took 2 cores more, but 12 stayed idle: it could not have taken the server's
    CPU, unless the CPU pressure says tasks waited for one anyway."""
    rule = HostRule()
    worse = side(other=250.0, host=400.0, psi=20.0, cpus=16)
    better = side(other=50.0, host=200.0, psi=20.0, cpus=16)
    assert refusals(worse, better, "a") == ()
    pressed = side(other=250.0, host=400.0, psi=20.0 + rule.psi_points + 0.1, cpus=16)
    assert codes(refusals(pressed, better, "a")) == [("other_work", True)]
    # the idle limit itself: 100 % of one core idle is enough room
    assert refusals(side(other=200.0, host=1500.0, psi=20.0, cpus=16), side(other=10.0, host=1300.0, psi=20.0,
                                                                               cpus=16), "a") == ()
    assert codes(refusals(side(other=200.0, host=1500.1, psi=20.0, cpus=16),
                          side(other=10.0, host=1300.0, psi=20.0, cpus=16), "a")) == [("other_work", True)]


def test_on_a_full_host_the_servers_own_wait_for_a_cpu_decides():
    """Both hosts full of other work (it can take no more): the server's threads waiting for a CPU 10 points of
    a core more on the worse side refuses, unless other work took less there or a core stood idle."""
    rule = HostRule()
    full = dict(other=185.0, host=199.0)
    calm = side(**full, wait=5.0)
    assert refusals(side(**full, wait=5.0 + rule.wait_points), calm, "a") == ()
    got = refusals(side(**full, wait=35.0), calm, "a")
    assert codes(got) == [("server_wait", True)] and (got[0].a, got[0].b) == (35.0, 5.0)
    assert refusals(side(other=180.0, host=199.0, wait=35.0), calm, "a") == ()            # other work took less
    assert refusals(side(other=185.0, host=199.0, wait=35.0, cpus=4), side(other=185.0, host=199.0, wait=5.0,
                                                                          cpus=4), "a") == ()   # two cores idle


def test_where_the_server_is_not_seen_cpu_pressure_decides():
    rule = HostRule()
    assert refusals(side(other=None, psi=60.0), side(other=None, psi=60.0 - rule.psi_points), "a") == ()
    got = refusals(side(other=None, psi=70.1), side(other=None, psi=60.0), "a")
    assert codes(got) == [("cpu_pressure", True)] and (got[0].a, got[0].b) == (pytest.approx(70.1), 60.0)


def test_what_cannot_be_checked_is_said_not_refused():
    got = refusals(side(other=None, psi=None), side(other=None, psi=None), "a")
    assert codes(got) == [("host_unknown", False)] and not refused(got)
    assert codes(refusals([CellSummary()], [CellSummary()], None)) == [("host_unknown", False)]


def test_cache_states_that_differ_refuse_whichever_side_is_worse():
    for worse in ("a", "b", None):
        got = refusals(side(state="cold"), side(state="warm"), worse)
        assert codes(got) == [("cache_differs", True)] and (got[0].a, got[0].b) == ("cold", "warm")
    assert refusals(side(state="unknown"), side(state="unknown"), "a") == ()
    one = refusals(side(state=None), side(state="warm"), "a")
    assert codes(one) == [("cache_unknown", False)] and one[0].side == "a"


def test_a_side_is_the_mean_of_its_cells_and_every_cell_must_tell():
    """Several runs on a side: their mean (here 10 and 60: 35 against 10 is within the limit); a cell without
    shares makes the side's figure unknown."""
    assert refusals(side(other=10.0) + side(other=60.0), side(other=10.0), "a") == ()
    assert codes(refusals(side(other=40.0) + side(other=60.0), side(other=10.0), "a")) == [("other_work", True)]
    mixed = side(other=40.0) + [CellSummary()]
    assert codes(refusals(mixed, side(other=10.0), "a")) == [("cache_unknown", False), ("host_unknown", False)]
    assert codes(refusals(side(state="cold") + side(state="warm"), side(state="cold"), None)) == [("cache_differs", True)]


def test_a_merged_cell_is_judged_by_its_repeats():
    a = CellRow(key="k", input_len=1, output_len=1, status="ok", summary=side(other=200.0)[0])
    b = CellRow(key="k", input_len=1, output_len=1, status="ok", summary=side(other=10.0)[0])
    merged = replace(a, summary=CellSummary(), repeats=(a, b))
    assert summaries([merged]) == [a.summary, b.summary]


def _print(**changed: str) -> Fingerprint:
    base = dict(engine="vllm", version="0.11", model="m", flags="-", image="-", tool="0.1.0", host="box",
                cpu_model="EPYC", cpus="2", launch="pid 1 started x", cache="cold")
    return Fingerprint(**{**base, **changed})


def test_differences_list_each_fact_with_both_values_in_order():
    assert differences(_print(), _print()) == []
    got = differences(_print(), _print(version="0.12", launch="pid 2 started y", cache="warm"))
    assert got == [FactDiff("version", "0.11", "0.12"), FactDiff("launch", "pid 1 started x", "pid 2 started y"),
                   FactDiff("cache", "cold", "warm")]


def test_a_cells_cache_state_is_the_recorded_one_else_the_share_the_server_served_from_its_cache():
    def s(state: str | None, share: float | None) -> CellSummary:
        return CellSummary(cache_hit_rate=share).with_(CacheState(state=state) if state else None)
    assert WARM_SHARE == 0.05
    assert [cache_state(s(x, 0.5)) for x in ("cold", "warm")] == ["cold", "warm"]       # recorded: it stands
    assert [cache_state(s("unknown", v)) for v in (0.0, 0.0499, 0.05, 0.98)] == ["cold", "cold", "warm", "warm"]
    assert [cache_state(s(None, v)) for v in (0.01, 0.2)] == ["cold", "warm"]           # an older run: measured
    assert cache_state(s("unknown", None)) == "unknown" and cache_state(s(None, None)) is None
    assert cache_state(s(None, float("nan"))) is None
    got = refusals([s("unknown", 0.0)], [s("unknown", 0.98)], "b")
    assert codes(got) == [("cache_differs", True), ("host_unknown", False)]
    assert (got[0].a, got[0].b, got[0].shares) == ("cold", "warm", (0.0, 0.98))
    unknown = refusals([s("unknown", None)], [s("cold", 0.0)], None)
    assert codes(unknown)[0] == ("cache_differs", True)            # a recorded unknown against cold: refused


def test_a_side_print_joins_each_facts_distinct_values():
    joined = side_print([_print(), _print(version="0.12"), _print()])
    assert joined.version == "0.11, 0.12" and joined.engine == "vllm"
    assert differences(joined, _print(), ("engine", "version")) == [FactDiff("version", "0.11, 0.12", "0.11")]
