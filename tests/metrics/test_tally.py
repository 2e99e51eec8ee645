"""metrics/tally.py's parts against references written from their docstrings and docs/metrics.md ("Client
health"): the reads of a request (a read's chunks share its stamp) with every burst's stamp, base (two reads
earlier, the send for the first two), gaps, chunks, the read before, pace and place; each request's bases and
largest hold; a stall's cause from what its thread did; the slot waits; a sessions cell's requests by turn; the
images counted."""

from __future__ import annotations

from itertools import groupby

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import tally as ta
from tokenbench.metrics.summary import summarize, turn_figures
from tokenbench.spec.bench import Load


def _reads_reference(times: list[int], sent: int) -> tuple[list[tuple], tuple[int, int, int, int]]:
    reads = [(t, len(list(g))) for t, g in groupby(times)]
    stamps = [sent, sent, *(t for t, _ in reads)]
    pace = (times[-1] - times[0]) // (len(times) - 1) if len(times) > 1 else 0
    bursts = []
    for g, (t, n) in enumerate(reads):
        if n < ta.PIECE_CHUNKS:
            continue
        out = g + 1 < len(reads) and reads[g + 1][1] < ta.PIECE_CHUNKS
        bursts.append((t, stamps[g], n - 1 + (g > 0) + out, n, reads[g - 1][0] if g else sent, pace,
                       int(g == 0) | int(g == len(reads) - 1) << 1))
    last = len(reads) - 1
    hold = max(t - stamps[g] for g, (t, _) in enumerate(reads))
    return bursts, (stamps[0], stamps[last], stamps[last + 1], hold)


stamps = st.lists(st.integers(0, 30), min_size=1, max_size=12).map(lambda gaps: np.cumsum([5, *gaps[1:]]).tolist())


@settings(deadline=None)
@given(st.lists(stamps, min_size=1, max_size=5))
def test_reads_and_bursts_are_what_each_request_read(requests):
    r = ta.Reads()
    want_bursts, want_requests = [], []
    for i, times in enumerate(requests):
        r.add(times, 0)
        bursts, per = _reads_reference(times, 0)
        want_bursts += [(*b[:6], i, b[6]) for b in bursts]
        want_requests.append(per)
    got = r.bursts()
    keys = ("stamp", "base", "gaps", "chunks", "prev", "pace", "req", "pos")
    assert [tuple(int(got[k][j]) for k in keys) for j in range(len(got["stamp"]))] == want_bursts
    cols = [r.requests.np(k).tolist() for k in ("first", "last", "end", "hold")]
    assert list(zip(*cols, strict=True)) == want_requests


def test_a_request_without_a_token_reads_at_its_send_and_holds_nothing():
    r = ta.Reads()
    r.add([], 7)
    assert [r.requests.np(k).tolist() for k in ("first", "last", "end", "hold")] == [[7], [7], [7], [0]]


def test_bursts_past_the_kept_ones_are_counted_not_kept(monkeypatch):
    monkeypatch.setattr(ta, "BURSTS_KEPT", 2)
    r = ta.Reads()
    r.add([5, 5, 9, 9, 9, 20, 20], 0)
    assert len(r.bursts()["stamp"]) == 2 and r.more_chunks == 2


def _attribution(lag: int, cpu: int, wait: int | None, others: int) -> str:
    """The docstring's rule: unknown run delay: the client's own CPU when it (and its other threads) ran at
    least half the stall; else the largest of the wait for a CPU, the thread's own work (its CPU, plus the
    rest while the process's other threads ran at least a quarter of it) and the rest, stopped."""
    if wait is None:
        return "client_cpu" if 2 * (cpu + others) >= lag else "client_delay"
    rest = max(0, lag - cpu - wait)
    held = 4 * others >= rest
    own = cpu + (rest if held else 0)
    stopped = 0 if held else rest
    if wait >= own and wait >= stopped:
        return "host_contention"
    return "client_cpu" if own >= stopped else "client_stopped"


@settings(deadline=None)
@given(st.integers(2_000_001, 10**8), st.integers(0, 10**8), st.none() | st.integers(0, 10**8), st.integers(0, 10**8))
def test_a_stalls_cause_is_what_its_thread_did_most(lag, cpu, wait, others):
    assert ta.attribute(lag, cpu, wait, others) == _attribution(lag, cpu, wait, others)


@pytest.mark.parametrize(("args", "cause"), [
    ((10, 5, 5, 1), "host_contention"), ((10, 5, 5, 0), "host_contention"),       # a tie names the host
    ((10, 4, 2, 1), "client_cpu"), ((10, 0, 2, 2), "client_cpu"), ((10, 0, 2, 1), "client_stopped"),
    ((10, 5, None, 0), "client_cpu"), ((10, 4, None, 0), "client_delay"), ((10, 2, None, 3), "client_cpu")])
def test_stall_causes_at_their_edges(args, cause):
    assert ta.attribute(*[a * 1_000_000 if a is not None else None for a in args]) == cause


MS = 1_000_000


@pytest.mark.parametrize(("lag", "cpu", "wait", "cause"), [
    (10 * 10**6, 6 * 10**6, 6 * 10**6 - 1, "client_cpu"), (10 * 10**6, 6 * 10**6, 6 * 10**6, "host_contention"),
    (3 * 10**6, 5 * 10**6 + 1, 5 * 10**6, "client_cpu")])
def test_the_cpu_and_the_wait_of_more_than_the_stall_are_compared_to_the_nanosecond(lag, cpu, wait, cause):
    """CPU and wait are the thread's since the probe's previous wake, so they may add up to more than the stall
    (none of it left off the CPU): the larger names the cause, 1 ns apart, a tie the host."""
    assert ta.attribute(lag, cpu, wait, 0) == cause == _attribution(lag, cpu, wait, 0)


@pytest.mark.parametrize(("off", "cause"), [(4 * 10**6, "client_cpu"), (4 * 10**6 + 1, "client_stopped")])
def test_time_off_the_cpu_names_the_thread_stopped_from_1_ns_beyond_its_cpu(off, cause):
    """No other thread ran (the rest is not the process's own work): off the CPU 1 ns longer than on it is
    stopped; as long, the client's CPU."""
    cpu = 4 * 10**6
    assert ta.attribute(cpu + off, cpu, 0, 0) == cause == _attribution(cpu + off, cpu, 0, 0)


def test_the_send_times_are_each_sends_due_write_and_connect_times():
    """Due at 1 ms, sent at 3 ms after a 0.5 ms connection set-up (its write at the send); one whose send was
    moved back to the set-up's start (vLLM's TTFT) wrote after it."""
    t = ta.CellTally()
    for i, moved in enumerate((False, True)):
        t.add(RequestRecord(index=i, phase="measure", input_len=4, output_len=1, intended_ns=MS, sent_ns=3 * MS,
                            end_ns=9 * MS, status=200, token_times_ns=[8 * MS], token_counts=[1],
                            connect_ns=MS // 2, connect_in_ttft=moved))
    got = t.send_times()
    assert got.intended.tolist() == [MS, MS] and got.wrote.tolist() == [3 * MS, 3 * MS + MS // 2]
    assert got.connect.tolist() == [MS // 2, MS // 2]


def test_at_most_100_requests_of_a_wrong_length_are_kept_the_first_ones():
    """docs/architecture.md: the verdict's counts keep at most 100 requests with a wrong length (the first to
    finish), and count them all."""
    recs = [RequestRecord(index=i, phase="measure", input_len=4, output_len=1, intended_ns=0, sent_ns=0, end_ns=MS,
                          status=200, token_times_ns=[MS], token_counts=[1], length_error="prompt 5 != 4")
            for i in range(150)]
    got = ta.Outcomes.of(recs)
    assert got.mismatched == 150 and [r.index for r in got.bad] == list(range(100))


def test_slot_waits_count_every_send_and_no_negative_wait():
    w = ta.SlotWaits()
    for ns in (5, -3, 0, 10):
        w.add(ns)
    assert (w.sends, w.total_ns) == (4, 15)
    assert w.merged([ta.SlotWaits(2, 7), ta.SlotWaits(1, 1)]) == ta.SlotWaits(7, 23)



def _turn(i: int, turn: int, prompt: int | None, cached: int | None, ttft_ms: int, **fields) -> RequestRecord:
    """Request i, turn `turn` of its session; `fields`: the record's own (phase, error_kind)."""
    sent = i * 1000 * MS
    times = [sent + ttft_ms * MS, sent + (ttft_ms + 10) * MS, sent + (ttft_ms + 30) * MS]
    return RequestRecord(index=i, phase=fields.pop("phase", "measure"), input_len=16, output_len=3, intended_ns=sent,
                         sent_ns=sent, end_ns=times[-1] + MS, status=200,
                         token_times_ns=times, token_counts=[1, 1, 1], prompt_tokens=prompt, cached_tokens=cached,
                         turn=turn, **fields)


def test_a_sessions_cells_requests_by_turn():
    t = ta.TurnTally()
    for r in (_turn(0, 0, 100, None, 50), _turn(1, 0, None, None, 70), _turn(2, 1, 200, 150, 20),
              _turn(3, 1, 300, 100, 40), _turn(4, 1, 999, 999, 1, phase="warmup"), _turn(5, 2, 9, 9, 9, error_kind="x"),
              _turn(6, 3, 50, 0, 30)):
        t.add(r)
    got = turn_figures(t)
    assert got["turn_requests"] == [2, 2, 0, 1]
    assert got["turn_prompt_tokens_mean"] == [58.0, 250.0, None, 50.0]          # no prompt count: the asked 16
    assert got["turn_cached_tokens_mean"] == [None, 125.0, None, 0.0]
    assert got["turn_hit_rate"] == [None, pytest.approx(250 / 500), None, 0.0]
    assert got["turn_ttft_mean_ms"] == [60.0, 30.0, None, 30.0] and got["turn_ttft_p50_ms"] == [60.0, 30.0, None, 30.0]
    assert got["turn_tpot_mean_ms"] == [15.0, 15.0, None, 15.0]
    assert got["turn_ttft_lo_ms"][0] < 60.0 < got["turn_ttft_hi_ms"][0] and got["turn_ttft_lo_ms"][3] == 30.0
    assert turn_figures(ta.TurnTally()) == {k: [] for k in got}


def test_images_sent_by_every_request_and_by_the_ok_ones_with_their_bytes_and_the_servers_count():
    def rec(i: int, images: int, count: int | None, error: str | None = None) -> RequestRecord:
        return RequestRecord(index=i, phase="measure", input_len=16, output_len=1, intended_ns=0, sent_ns=0,
                             end_ns=MS, status=200, token_times_ns=[MS // 2], token_counts=[1],
                             images=images, image_bytes=1000 * images, image_count=count, error_kind=error)
    s = summarize([rec(0, 2, 2), rec(1, 1, None), rec(2, 3, 3, error="timeout")], Load(concurrency=1, num_prompts=3),
                  16, 1)
    assert (s.total_images, s.total_image_bytes, s.server_counted_images) == (3, 3000, 2)
    plain = summarize([rec(0, 2, None)], Load(concurrency=1, num_prompts=1), 16, 1)
    assert (plain.total_images, plain.server_counted_images) == (2, None)
    only_failed = summarize([rec(0, 0, None), rec(1, 2, None, error="timeout")], Load(concurrency=1, num_prompts=2), 16, 1)
    assert only_failed.total_images == 0
    none = summarize([rec(0, 0, None)], Load(concurrency=1, num_prompts=1), 16, 1)
    assert none.total_images is None


def test_up_to_65536_bursts_are_kept_one_by_one_and_later_ones_counted():
    """docs/metrics.md: 64 bytes a burst, 4 MiB at most; the rest counted by their chunks."""
    r = ta.Reads()
    r.add([t for k in range(65_536) for t in (2 * k + 1, 2 * k + 1)], 0)          # 65,536 reads of 2 chunks
    assert len(r.bursts()["stamp"]) == 65_536 and r.more_chunks == 0
    r.add([10**9, 10**9, 10**9], 0)
    assert len(r.bursts()["stamp"]) == 65_536 and r.more_chunks == 3


def test_stalls_are_equal_where_every_stall_is():
    one = ta.Stall(after_ns=0, due_ns=10, woke_ns=15, cause="host_contention")
    two = ta.Stall(after_ns=20, due_ns=30, woke_ns=38, cause="client_cpu", worker=1, caught_ns=40)
    kept = [one.model_copy(update={"caught_ns": 15}), two]  # a stall caught up at its wake reads back so
    assert ta.Stalls.of([one, two]) == ta.Stalls.of([one, two]) and list(ta.Stalls.of([one, two])) == kept
    assert ta.Stalls.of([one, two]) != ta.Stalls.of([one]) and ta.Stalls.of([one]) != kept[:1]
    assert ta.Stalls.of([one, two]) != ta.Stalls.of([two, one]) and ta.Stalls() == ta.Stalls()
