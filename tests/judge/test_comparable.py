"""judge/comparable.py: the facts that vary between runs and refuse a verdict where they differ, judged by
value: a cell's prefix-cache state from the server's counters (warm from 5 % of the prompt tokens), the host's
other load (a gap above 10 % of its CPU), and the engine fingerprint (stated, never refused)."""

from __future__ import annotations

from types import SimpleNamespace

from tokenbench.judge.comparable import (
    HOST_GAP,
    WARM_SHARE,
    Refusal,
    SideFacts,
    cache_state,
    facts_of,
    fingerprints_differ,
    refusals,
)


def _run(cache: dict) -> SimpleNamespace:
    return SimpleNamespace(cache=cache)


def _cell(cid: int, *repeats: int) -> SimpleNamespace:
    return SimpleNamespace(id=cid, repeats=tuple(SimpleNamespace(id=r) for r in repeats))


def test_cache_state_from_the_servers_counters():
    assert WARM_SHARE == 0.05
    assert cache_state(_run({1: (0, 640, 10)}), _cell(1)) == ("cold", 0.0)
    assert cache_state(_run({1: (31, 640, 10)}), _cell(1)) == ("cold", 31 / 640)
    assert cache_state(_run({1: (32, 640, 10)}), _cell(1)) == ("warm", 0.05)
    assert cache_state(_run({1: (630, 640, 10)}), _cell(1)) == ("warm", 630 / 640)
    assert cache_state(_run({}), _cell(1)) == ("unknown", None)                    # no counter
    assert cache_state(_run({1: (0, 0, 10)}), _cell(1)) == ("unknown", None)       # no prompt tokens reported
    assert cache_state(_run({1: (0, 640, 0)}), _cell(1)) == ("unknown", None)      # no request reported
    # a merged cell: its repeats together, unknown when one of them does not tell
    both = _run({2: (0, 640, 10), 3: (640, 640, 10)})
    assert cache_state(both, _cell(2, 2, 3)) == ("warm", 0.5)
    assert cache_state(_run({2: (0, 640, 10)}), _cell(2, 2, 3)) == ("unknown", None)
    facts = facts_of(both, _cell(2, 2, 3), "llamacpp b1")
    assert facts == SideFacts("warm", 0.5, None, "llamacpp b1")


def test_cache_states_that_differ_refuse_and_unknown_refuses_nothing():
    cold, warm, unknown = SideFacts("cold", 0.0), SideFacts("warm", 0.98), SideFacts()
    assert refusals([cold, cold], [warm]) == [Refusal("cache", (("cold (0 %)", "cold (0 %)"), ("warm (98 %)",)))]
    assert refusals([warm], [cold]) == [Refusal("cache", (("warm (98 %)",), ("cold (0 %)",)))]
    assert refusals([cold, warm], [cold]) != []                  # runs of one side that differ: refused too
    assert refusals([cold], [cold]) == refusals([warm], [warm]) == []
    assert refusals([unknown], [warm]) == refusals([cold], [unknown]) == []
    assert refusals([SideFacts("warm")], [SideFacts("cold")])[0].values == (("warm",), ("cold",))


def test_host_load_that_differs_by_more_than_the_gap_refuses():
    assert HOST_GAP == 0.10
    quiet, busy = SideFacts(host_busy=0.05), SideFacts(host_busy=0.40)
    assert refusals([quiet], [busy]) == [Refusal("host", (("5 %",), ("40 %",)))]
    assert refusals([busy], [quiet]) == [Refusal("host", (("40 %",), ("5 %",)))]
    assert refusals([SideFacts(host_busy=0.0)], [SideFacts(host_busy=0.1)]) == []   # exactly the gap: not refused
    assert refusals([SideFacts(host_busy=0.0)], [SideFacts(host_busy=0.1001)]) != []
    assert refusals([quiet], [SideFacts()]) == refusals([SideFacts()], [busy]) == []      # not recorded
    assert refusals([quiet, SideFacts()], [SideFacts(host_busy=0.3), SideFacts()])[0].values == (("5 %",), ("30 %",))
    both = refusals([SideFacts("cold", 0.0, 0.05)], [SideFacts("warm", 0.9, 0.5)])
    assert [r.reason for r in both] == ["cache", "host"]


def test_fingerprints_that_differ_are_stated():
    a, b = SideFacts(fingerprint="vllm 0.9"), SideFacts(fingerprint="vllm 0.10")
    assert fingerprints_differ([a], [b]) and fingerprints_differ([a, b], [a])
    assert not fingerprints_differ([a], [a]) and not fingerprints_differ([a], [SideFacts()])
    assert not fingerprints_differ([SideFacts()], [SideFacts()])
    assert refusals([a], [b]) == []                               # what a gate compares: never refused
