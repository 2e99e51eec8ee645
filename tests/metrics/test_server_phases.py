"""Where the time went, per request and per cell (metrics/server.py): the clock offset found from the
requests' round trips contains the true offset, the phases add up to the client's TTFT and last token exactly,
the ledger's means add up to the joined requests' mean TTFT, and /metrics histogram increases give the means."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.client.records import RequestRecord
from tokenbench.metrics.health import claim_ms
from tokenbench.metrics.server import (
    ServerTiming,
    SpanCounts,
    apply_offset,
    attach,
    clock_offset,
    ledger,
    offset_bounds,
    phases_of,
    server_means,
)
from tokenbench.metrics.summary_groups import PHASES, TTFT_PHASES

MS = 1_000_000


@st.composite
def round_trips(draw, theta: int):
    """A request whose server saw it `up` ns after the send and emitted its tokens `down` ns before the client read
    them, with server phases of any length; the server's clock is the client's + theta."""
    sent = draw(st.integers(0, 10**12))
    up, down = draw(st.integers(0, 50 * MS)), draw(st.integers(0, 50 * MS))
    queue, prefill, other = (draw(st.integers(0, 500 * MS)) for _ in range(3))
    decode, after = draw(st.integers(0, 900 * MS)), draw(st.integers(0, 5 * MS))
    ttft = queue + prefill + other
    arrival = sent + up
    first = arrival + ttft + down
    last = arrival + ttft + decode + after + draw(st.integers(0, 50 * MS))
    r = RequestRecord(index=0, phase="measure", input_len=8, output_len=4, intended_ns=sent, sent_ns=sent,
                      end_ns=last + 1, status=200, token_times_ns=[first, max(first, last)], token_counts=[1, 1])
    return attach(r, ServerTiming(arrival_ns=arrival + theta, ttft_ns=ttft, e2e_ns=ttft + decode + after,
                                  queue_ns=queue, prefill_ns=prefill, decode_ns=decode, request_id="rid"))


@settings(max_examples=200, deadline=None)
@given(st.integers(-10**15, 10**15).flatmap(lambda t: st.tuples(st.just(t), st.lists(round_trips(t), min_size=1,
                                                                                           max_size=20))))
def test_the_offset_interval_holds_the_true_offset_and_no_phase_runs_backwards_beyond_it(case):
    theta, records = case
    off = clock_offset(b for r in records if (b := offset_bounds(r)) is not None)
    assert off is not None and off.consistent and off.requests == len(records)
    assert abs(off.offset_ns - theta) <= off.error_ns
    smallest = min((r.token_times_ns[0] - r.sent_ns) - r.server_ttft_ns for r in records)
    assert 2 * off.error_ns <= smallest + 1                 # never looser than the smallest round trip
    for r in records:
        p = phases_of(apply_offset(r, off))
        assert p is not None and p.network >= 0 and p.delivery >= 0


@settings(max_examples=200, deadline=None)
@given(st.lists(round_trips(123_456_789), min_size=1, max_size=20))
def test_the_phases_add_up_to_the_client_ttft_and_last_token_exactly(records):
    off = clock_offset(offset_bounds(r) for r in records)
    for r in records:
        p = phases_of(apply_offset(r, off))
        assert p is not None
        assert sum(p.get(x) for x in TTFT_PHASES) == r.ttft_ns
        assert p.network + r.server_e2e_ns + p.last_delivery == r.token_times_ns[-1] - r.sent_ns
        assert p.decode + p.decode_other == r.server_e2e_ns - r.server_ttft_ns


@settings(max_examples=100, deadline=None)
@given(st.lists(round_trips(-5 * MS), min_size=1, max_size=30))
def test_the_ledger_means_add_up_to_the_mean_client_ttft(records):
    off = clock_offset(offset_bounds(r) for r in records)
    joined = [apply_offset(r, off) for r in records]
    failed = RequestRecord(index=1, phase="measure", input_len=8, output_len=4, intended_ns=0, sent_ns=0, end_ns=1,
                           status=500, error_kind="http_status")
    warm = RequestRecord(index=2, phase="warmup", input_len=8, output_len=4, intended_ns=0, sent_ns=0, end_ns=1,
                         status=200)
    plain = RequestRecord(index=3, phase="measure", input_len=8, output_len=4, intended_ns=0, sent_ns=0, end_ns=5,
                          status=200, token_times_ns=[3], token_counts=[1])
    book = ledger([*joined, failed, warm, plain], SpanCounts(unjoined_spans=2), claim_ms)
    assert (book.requests, book.joined, book.missing, book.unjoined_spans) == (len(records) + 1, len(records), 1, 2)
    assert book.mean_ms is not None and set(book.mean_ms) == set(PHASES)
    assert math.isclose(sum(book.mean_ms[p] for p in TTFT_PHASES), book.client_ttft_mean_ms, rel_tol=1e-9,
                        abs_tol=1e-6)
    assert book.stat("queue", "p50") <= book.stat("queue", "p99") <= max(r.server_queue_ns for r in records) / MS
    assert book.clock_consistent is True


def test_intervals_that_do_not_meet_fall_back_to_the_smallest_round_trip_marked():
    off = clock_offset([(0, 10), (20, 24), (30, 40)])
    assert off is not None and not off.consistent
    assert (off.offset_ns, off.error_ns) == (22, 2)


def test_a_late_delivery_is_flagged_beyond_the_client_tolerance_and_the_offset_error():
    timing = ServerTiming(arrival_ns=1 * MS, ttft_ns=98 * MS, e2e_ns=150 * MS, queue_ns=0, prefill_ns=90 * MS,
                          decode_ns=50 * MS)
    fast = attach(RequestRecord(index=0, phase="measure", input_len=8, output_len=4, intended_ns=0, sent_ns=0,
                                end_ns=200 * MS, status=200, token_times_ns=[100 * MS], token_counts=[1]), timing)
    slow = attach(RequestRecord(index=1, phase="measure", input_len=8, output_len=4, intended_ns=0, sent_ns=0,
                                end_ns=200 * MS, status=200, token_times_ns=[120 * MS], token_counts=[1]), timing)
    off = clock_offset(offset_bounds(r) for r in (fast, slow))
    book = ledger([apply_offset(fast, off), apply_offset(slow, off)], SpanCounts(), claim_ms)
    assert book.delivery_flagged == 1 and book.delivery_max_ms is not None and book.delivery_max_ms > 20


def test_server_means_are_the_histogram_increases_sum_over_count():
    got = server_means({"queue_sum": 0.5, "queue_count": 10, "prefill_sum": 2.0, "prefill_count": 10,
                        "e2e_sum": 4.0, "e2e_count": 10, "decode_sum": 1.0, "decode_count": 0})
    assert got is not None and got.queue_ms == 50.0 and got.prefill_ms == 200.0 and got.requests == 10
    assert got.decode_ms is None
    assert server_means({"queue_sum": 0.0, "queue_count": 0}) is None
