"""metrics/server.py against the formulas of docs/metrics.md ("Where the time went", "Server counters over a cell",
"Server means from /metrics"), each written out here from the text: the clock offset as the middle of the
intersection of the requests' bounds (or of the smallest round trip), each request's phases, the cell's ledger
(mean, p50 and p99 by numpy, the flagged deliveries at the tolerance's edge), the counters' rates and the
histograms' means, over any requests hypothesis draws and at each rule's edges."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import server as sv
from tokenbench.metrics.health import claim_ms
from tokenbench.metrics.summary_groups import PHASES, TTFT_PHASES

MS = 1_000_000


def _record(sent: int, first: int, last: int, index: int = 0, phase: str = "measure", error: str | None = None
            ) -> RequestRecord:
    return RequestRecord(index=index, phase=phase, input_len=8, output_len=4, intended_ns=sent, sent_ns=sent,
                         end_ns=last + 1, status=200, token_times_ns=[first, last],
                         token_counts=[1, 1], error_kind=error)


def _joined(sent: int, first: int, last: int, timing: sv.ServerTiming, **kw) -> RequestRecord:
    return sv.attach(_record(sent, first, last, **kw), timing)


@st.composite
def joined_requests(draw, theta: int):
    """A measured request on the client's clock and its span on a server clock `theta` ahead, every phase drawn
    (queue and prefill may be untold); the token may be read before the span says it left (a clock off)."""
    sent = draw(st.integers(0, 10**12))
    arrival = sent + draw(st.integers(-2 * MS, 50 * MS))
    queue, prefill = (draw(st.none() | st.integers(0, 400 * MS)) for _ in range(2))
    ttft = (queue or 0) + (prefill or 0) + draw(st.integers(0, 50 * MS))
    decode = draw(st.none() | st.integers(0, 900 * MS))
    e2e = ttft + (decode or 0) + draw(st.integers(0, 5 * MS))
    first = arrival + ttft + draw(st.integers(-MS, 50 * MS))
    last = max(first, arrival + e2e + draw(st.integers(-MS, 50 * MS)))
    return _joined(sent, first, last, sv.ServerTiming(arrival_ns=arrival + theta, ttft_ns=ttft, e2e_ns=e2e,
                                                      queue_ns=queue, prefill_ns=prefill, decode_ns=decode,
                                                      request_id="id"))


# ---- the clock offset --------------------------------------------------------------------------
def test_a_requests_bounds_are_first_token_emitted_minus_read_and_arrival_minus_send():
    r = _joined(1_000, 9_000, 12_000, sv.ServerTiming(arrival_ns=50_300, ttft_ns=7_000, e2e_ns=10_000))
    assert sv.offset_bounds(r) == (50_300 + 7_000 - 9_000, 50_300 - 1_000)


def test_a_request_without_a_span_a_ttft_or_a_token_has_no_bounds():
    r = _record(0, 5, 9)
    assert sv.offset_bounds(r) is None
    r.server_arrival_ns, r.server_ttft_ns = 10, None
    assert sv.offset_bounds(r) is None
    no_token = RequestRecord(index=0, phase="measure", input_len=8, output_len=4, intended_ns=0, sent_ns=0, end_ns=9,
                             status=200)
    assert sv.offset_bounds(sv.attach(no_token, sv.ServerTiming(arrival_ns=3, ttft_ns=1, e2e_ns=2))) is None


def _reference_offset(bounds: list[tuple[int, int]]) -> tuple[int, int, bool]:
    lo, hi = max(b[0] for b in bounds), min(b[1] for b in bounds)
    if lo <= hi:
        mid = lo + (hi - lo) // 2
        return mid, hi - mid, True
    width = min(b[1] - b[0] for b in bounds)
    best = next(b for b in bounds if b[1] - b[0] == width)          # the first of the smallest
    mid = best[0] + (best[1] - best[0]) // 2
    return mid, abs(best[1] - mid), False


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(-10**9, 10**9), st.integers(0, 10**8)).map(lambda t: (t[0], t[0] + t[1])),
                min_size=1, max_size=12))
def test_the_offset_is_the_middle_of_the_intersection_or_of_the_smallest_round_trip(bounds):
    off = sv.clock_offset(bounds)
    assert off is not None and (off.offset_ns, off.error_ns, off.consistent) == _reference_offset(bounds)
    assert off.requests == len(bounds)


def test_bounds_that_meet_in_a_point_are_consistent_with_no_error():
    off = sv.clock_offset([(0, 10), (10, 20)])
    assert (off.offset_ns, off.error_ns, off.consistent) == (10, 0, True)


def test_of_round_trips_equally_small_the_first_is_used():
    off = sv.clock_offset([(0, 4), (10, 14), (20, 40)])
    assert (off.offset_ns, off.error_ns, off.consistent) == (2, 2, False)


def test_an_odd_width_rounds_the_middle_down_and_the_error_covers_the_top():
    off = sv.clock_offset([(-7, 0)])
    assert (off.offset_ns, off.error_ns) == (-4, 4)
    assert sv.clock_offset([(3, 10), (20, 27)]).offset_ns == 6 and sv.clock_offset([(3, 10), (20, 27)]).error_ns == 4


def test_no_bounds_no_offset():
    assert sv.clock_offset([]) is None


def test_the_offset_is_applied_to_joined_requests_only():
    off = sv.ClockOffset(5, 2, True, 1)
    joined = sv.apply_offset(_joined(0, 5, 9, sv.ServerTiming(arrival_ns=3, ttft_ns=1, e2e_ns=2)), off)
    assert (joined.clock_offset_ns, joined.clock_offset_error_ns) == (5, 2)
    plain = sv.apply_offset(_record(0, 5, 9), off)
    assert plain.clock_offset_ns is None and plain.clock_offset_error_ns is None
    assert sv.apply_offset(_joined(0, 5, 9, sv.ServerTiming(arrival_ns=3, ttft_ns=1, e2e_ns=2)),
                           None).clock_offset_ns is None


# ---- one request's phases ----------------------------------------------------------------------
@settings(deadline=None)
@given(st.integers(-10**12, 10**12).flatmap(lambda t: st.tuples(st.just(t), joined_requests(t))),
       st.integers(0, 5 * MS))
def test_a_requests_phases_are_the_documented_formulas(case, error):
    theta, r = case
    r.clock_offset_ns, r.clock_offset_error_ns = theta, error
    p = sv.phases_of(r)
    arrival = r.server_arrival_ns - theta
    q, pf, d = r.server_queue_ns, r.server_prefill_ns, r.server_decode_ns
    assert p.network == arrival - r.sent_ns and p.queue == q and p.prefill == pf and p.decode == d
    assert p.server_other == (None if q is None or pf is None else r.server_ttft_ns - q - pf)
    assert p.delivery == r.token_times_ns[0] - arrival - r.server_ttft_ns
    assert p.decode_other == (None if d is None else r.server_e2e_ns - r.server_ttft_ns - d)
    assert p.last_delivery == r.token_times_ns[-1] - arrival - r.server_e2e_ns
    assert p.error_ns == error
    assert [p.get(name) for name in PHASES] == [getattr(p, name) for name in PHASES]
    if q is not None and pf is not None:
        assert sum(p.get(x) for x in TTFT_PHASES) == r.ttft_ns
    assert sv.phases_of(r, theta + 7).network == p.network - 7 and sv.phases_of(r, theta + 7).delivery == p.delivery + 7


def test_phases_need_a_span_an_offset_and_a_token():
    r = _joined(0, 50, 90, sv.ServerTiming(arrival_ns=10, ttft_ns=30, e2e_ns=70))
    assert sv.phases_of(r) is None                          # no offset applied yet
    assert sv.phases_of(r, 0) is not None and sv.phases_of(r, 0).error_ns == 0
    for name in ("server_arrival_ns", "server_ttft_ns", "server_e2e_ns"):
        broken = _joined(0, 50, 90, sv.ServerTiming(arrival_ns=10, ttft_ns=30, e2e_ns=70))
        setattr(broken, name, None)
        assert sv.phases_of(broken, 0) is None
    assert sv.phases_of(sv.attach(RequestRecord(index=0, phase="measure", input_len=8, output_len=4, intended_ns=0,
                                                sent_ns=0, end_ns=9, status=200), sv.ServerTiming(arrival_ns=1,
                                                                                                  ttft_ns=2,
                                                                                                  e2e_ns=3)), 0) is None


@pytest.mark.parametrize(("ttft_ms", "tolerance_ms"), [(10.0, 1.0), (100.0, 5.0), (20.0, 1.0), (400.0, 20.0)])
def test_a_delivery_is_flagged_past_the_tolerance_beyond_the_offset_error(ttft_ms, tolerance_ms):
    assert claim_ms(ttft_ms) == pytest.approx(tolerance_ms)
    error = 300_000
    def phases(delivery_ns: int) -> sv.RequestPhases:
        return sv.RequestPhases(network=0, queue=0, prefill=0, server_other=0, delivery=delivery_ns, decode=0,
                                decode_other=0, last_delivery=0, error_ns=error)
    edge = int(tolerance_ms * MS) + error
    assert not sv.delivery_flagged(phases(edge), int(ttft_ms * MS), claim_ms)
    assert sv.delivery_flagged(phases(edge + 1_000), int(ttft_ms * MS), claim_ms)


# ---- the cell's ledger -------------------------------------------------------------------------
def _reference_ledger(records: list[RequestRecord], tolerance) -> dict:
    bounds = [b for r in records if (b := sv.offset_bounds(r)) is not None]
    mid, error, _ = _reference_offset(bounds)
    measured = [r for r in records if r.phase == "measure" and r.ok]
    joined = [r for r in measured if r.server_arrival_ns is not None and r.token_times_ns]
    per: dict[str, list[float]] = {name: [] for name in PHASES}
    for r in joined:
        p = sv.phases_of(r, mid)
        for name in PHASES:
            if p.get(name) is not None:
                per[name].append(p.get(name) / MS)
    delivery = [sv.phases_of(r, mid).delivery for r in joined]
    network = [sv.phases_of(r, mid).network for r in joined]
    return {
        "requests": len(measured), "joined": len(joined), "missing": len(measured) - len(joined),
        "mean_ms": {k: float(np.mean(v)) for k, v in per.items() if v},
        "p50_ms": {k: float(np.percentile(v, 50)) for k, v in per.items() if v},
        "p99_ms": {k: float(np.percentile(v, 99)) for k, v in per.items() if v},
        "clock_offset_ms": mid / MS, "clock_offset_error_ms": error / MS,
        "clock_consistent": all(min(n, d) >= -error for n, d in zip(network, delivery, strict=True)),
        "client_ttft_mean_ms": float(np.mean([r.ttft_ns / MS for r in joined])),
        "delivery_flagged": sum((d - error) / MS > tolerance(r.ttft_ns / MS) for d, r in zip(delivery, joined, strict=True)),
        "delivery_max_ms": max(delivery) / MS,
    }


@settings(deadline=None)
@given(st.integers(-10**12, 10**12).flatmap(lambda t: st.lists(joined_requests(t), min_size=1, max_size=25)),
       st.integers(0, 3))
def test_the_ledger_is_the_documented_statistics_over_the_joined_measured_requests(records, extra):
    for i, r in enumerate(records):
        r.index = i
    others = [_record(0, 5, 9, index=100), _record(0, 5, 9, index=101, error="http_status")][:extra]
    warm = _joined(0, 9 * MS, 10 * MS, sv.ServerTiming(arrival_ns=records[0].server_arrival_ns, ttft_ns=MS,
                                                       e2e_ns=2 * MS), phase="warmup")
    everything = [*records, *others, warm]
    book = sv.ledger(everything, sv.SpanCounts(3, 4, 5), claim_ms)
    ref = _reference_ledger(everything, claim_ms)
    assert (book.unjoined_spans, book.other_spans, book.dropped_payloads) == (3, 4, 5)
    for key, want in ref.items():
        got = getattr(book, key)
        if isinstance(want, dict):
            assert set(got) == set(want), key
            assert [got[k] for k in want] == pytest.approx(list(want.values()), rel=1e-9, abs=1e-9), key
        else:
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9), key


def test_a_p99_of_a_phase_interpolates_below_the_largest():
    """100 requests whose queue is 1..100 ms: p99 is 99.01 ms (numpy's linear), not the maximum."""
    records = [_joined(0, 200 * MS, 300 * MS, sv.ServerTiming(arrival_ns=0, ttft_ns=150 * MS, e2e_ns=250 * MS,
                                                              queue_ns=(i + 1) * MS, prefill_ns=MS, decode_ns=10 * MS),
                       index=i) for i in range(100)]
    book = sv.ledger(records, sv.SpanCounts(), claim_ms)
    assert book.stat("queue", "p99") == pytest.approx(99.01) and book.stat("queue", "p50") == pytest.approx(50.5)
    assert book.stat("queue") == pytest.approx(50.5)


def test_the_ledger_states_the_offset_and_its_error_in_ms():
    a = _joined(0, 10 * MS, 20 * MS, sv.ServerTiming(arrival_ns=3 * MS, ttft_ns=4 * MS, e2e_ns=10 * MS),
                index=0)    # [-3, 3] ms
    b = _joined(0, 9 * MS, 20 * MS, sv.ServerTiming(arrival_ns=2 * MS, ttft_ns=4 * MS, e2e_ns=10 * MS),
                index=1)     # [-3, 2] ms
    book = sv.ledger([a, b], sv.SpanCounts(), claim_ms)
    assert book.clock_offset_ms == pytest.approx(-0.5) and book.clock_offset_error_ms == pytest.approx(2.5)


def test_a_request_running_backwards_beyond_the_error_makes_the_clock_inconsistent():
    good = _joined(0, 10 * MS, 20 * MS, sv.ServerTiming(arrival_ns=3 * MS, ttft_ns=4 * MS, e2e_ns=10 * MS), index=0)
    # read before it was sent on the server's account: its bounds do not meet the other's
    bad = _joined(0, 5 * MS, 20 * MS, sv.ServerTiming(arrival_ns=8 * MS, ttft_ns=4 * MS, e2e_ns=10 * MS), index=1)
    book = sv.ledger([good, bad], sv.SpanCounts(), claim_ms)
    assert book.clock_consistent is False
    assert sv.ledger([good], sv.SpanCounts(), claim_ms).clock_consistent is True


def test_a_ledger_without_a_joined_request_counts_only():
    book = sv.ledger([_record(0, 5, 9), _record(0, 5, 9, index=1, error="http_status")], sv.SpanCounts(1, 0, 0),
                     claim_ms)
    assert (book.requests, book.joined, book.missing, book.unjoined_spans) == (1, 0, 1, 1)
    assert book.mean_ms is None and book.clock_offset_ms is None


# ---- counters and histograms -------------------------------------------------------------------
@settings(deadline=None)
@given(st.floats(0.0, 1e9), st.floats(0.0, 1e9))
def test_the_prefix_cache_hit_rate_is_hits_over_queries(queries, hits):
    h = sv.hits_from_counters(queries, hits)
    assert h.rate == (hits / queries if queries else None)
    assert h.summary() == {"server_prefix_cache_queries": queries, "server_prefix_cache_hits": hits,
                           "server_prefix_cache_hit_rate": h.rate}


def test_a_missing_counter_gives_no_hit_rate():
    assert sv.hits_from_counters(None, 3.0) is None and sv.hits_from_counters(3.0, None) is None


@settings(deadline=None)
@given(st.floats(1.0, 1e6), st.floats(1.0, 1e6), st.floats(0.0, 1e6))
def test_acceptance_is_vllms_derivation(drafts, draft_tokens, accepted):
    a = sv.acceptance_from_counters(drafts, draft_tokens, accepted)
    assert a.rate == pytest.approx(accepted / draft_tokens, rel=1e-12)
    assert a.mean_length == pytest.approx(1 + accepted / drafts, rel=1e-12)
    assert (a.drafts, a.draft_tokens, a.accepted_tokens, a.source) == (drafts, draft_tokens, accepted, "counters")
    assert a.summary() == {"spec_acceptance_rate": a.rate, "spec_mean_acceptance_length": a.mean_length,
                           "spec_source": "counters", "spec_drafts": drafts, "spec_draft_tokens": draft_tokens,
                           "spec_accepted_tokens": accepted}


@pytest.mark.parametrize("args", [(0.0, 5.0, 1.0), (5.0, 0.0, 1.0), (None, 5.0, 1.0), (5.0, None, 1.0),
                                  (5.0, 5.0, None)])
def test_nothing_drafted_or_a_missing_counter_gives_no_acceptance(args):
    assert sv.acceptance_from_counters(*args) is None


def test_gauges_give_their_means_without_counts():
    a = sv.acceptance_from_gauges(0.6, 2.5)
    assert (a.rate, a.mean_length, a.source) == (0.6, 2.5, "gauges")
    assert a.summary() == {"spec_acceptance_rate": 0.6, "spec_mean_acceptance_length": 2.5, "spec_source": "gauges"}
    assert sv.acceptance_from_gauges(None, 2.0).mean_length == 2.0 and sv.acceptance_from_gauges(0.5, None).rate == 0.5
    assert sv.acceptance_from_gauges(None, None) is None


def test_the_counters_fill_the_hit_rate_only_where_no_response_reported_it():
    hits = sv.CounterHits(200.0, 50.0)
    fill, group = sv.counters(sv.Readings(hits=hits), None)
    assert fill == {"cache_hit_rate": 0.25, "total_cached_tokens": 50.0}
    assert group.cache_hit_source == "counters" and group.server_prefix_cache_hit_rate == 0.25
    fill, group = sv.counters(sv.Readings(hits=hits), 0.4)
    assert fill == {} and group.cache_hit_source == "usage"
    fill, group = sv.counters(sv.Readings(hits=sv.CounterHits(0.0, 0.0)), None)
    assert fill == {} and group.cache_hit_source is None


def test_the_counters_group_carries_acceptance_and_speculative_decoding():
    r = sv.Readings(acceptance=sv.acceptance_from_counters(10.0, 30.0, 15.0), speculative="ngram, 3 draft tokens",
                    random_prompts="random prompts", window={"server_counters_window_s": 4.0})
    _, group = sv.counters(r, None)
    assert group.spec_acceptance_rate == 0.5 and group.spec_mean_acceptance_length == 2.5
    assert group.speculative == "ngram, 3 draft tokens" and group.spec_random_prompts == "random prompts"
    assert group.server_counters_window_s == 4.0
    _, plain = sv.counters(sv.Readings(speculative="ngram", random_prompts=None), None)
    assert plain.speculative == "ngram" and plain.spec_random_prompts is None
    _, none = sv.counters(sv.Readings(random_prompts="x"), None)
    assert none is None
    assert sv.counters(sv.Readings(), 0.5) == ({}, sv.ServerCounters.model_validate({"cache_hit_source": "usage"}))


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(sv.HISTOGRAM_ROLES), st.tuples(st.floats(0.0, 1e4), st.integers(0, 1000)),
                       min_size=1))
def test_server_means_are_the_histograms_sum_over_count_in_ms(hist):
    increases = {f"{k}_{part}": v for k, (s, n) in hist.items() for part, v in (("sum", s), ("count", n))}
    got = sv.server_means(increases)
    want = {k: s / n * 1000 for k, (s, n) in hist.items() if n > 0}
    if not want:
        assert got is None
        return
    for role in sv.HISTOGRAM_ROLES:
        assert getattr(got, f"{role}_ms") == (pytest.approx(want[role], rel=1e-12) if role in want else None)
    assert got.requests == (hist["e2e"][1] if "e2e" in hist else None)


def test_a_histogram_without_its_sum_gives_no_mean():
    got = sv.server_means({"queue_count": 4, "prefill_sum": 1.0, "prefill_count": 4})
    assert got.queue_ms is None and got.prefill_ms == 250.0 and got.requests is None
    assert sv.server_means({"queue_count": 4}) is None
    assert math.isclose(sv.server_means({"e2e_sum": 2.0, "e2e_count": 1}).e2e_ms, 2000.0)


@pytest.mark.parametrize("share", [0.95, 1.05])
def test_the_ledger_flags_a_delivery_at_the_tolerances_edge(share):
    """A TTFT of 10 ms has a tolerance of 1 ms: deliveries 0.95 and 1.05 ms beyond the offset's error."""
    def request(i: int, delivery_ns: int) -> RequestRecord:
        return _joined(0, 10 * MS, 20 * MS, sv.ServerTiming(arrival_ns=0, ttft_ns=10 * MS - delivery_ns,
                                                            e2e_ns=15 * MS), index=i)
    records = [request(0, 0), request(1, int(share * MS))]          # the first pins the offset at 0, error 0
    book = sv.ledger(records, sv.SpanCounts(), claim_ms)
    assert (book.clock_offset_ms, book.clock_offset_error_ms) == (0.0, 0.0)
    assert book.delivery_flagged == (share > 1) and book.delivery_max_ms == pytest.approx(share)
