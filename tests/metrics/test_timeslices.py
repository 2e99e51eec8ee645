"""Timeslices (metrics/timeslices.py): per-slice figures from a cell's tally, the steady-state verdict, the
drift between a cell's first and last slices, and the monitor's samples per slice; tiny ns fixtures."""

from __future__ import annotations

import pytest

from tokenbench.client.records import RequestRecord
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary import of_tally, summarize
from tokenbench.metrics.tally import CellTally
from tokenbench.metrics.timeslices import DRIFT_MAX, Timeslices, drift, steady
from tokenbench.spec.bench import Load

MS = 1_000_000


def rec(i: int, sent_ms: float, ttft_ms: float, gap_ms: float, n: int, error: str | None = None) -> RequestRecord:
    times = [int((sent_ms + ttft_ms + k * gap_ms) * MS) for k in range(n)]
    return RequestRecord(index=i, phase="measure", input_len=4, output_len=n, intended_ns=int(sent_ms * MS),
                         sent_ns=int(sent_ms * MS), end_ns=times[-1] + MS, token_times_ns=[] if error else times,
                         token_counts=[] if error else [1] * n, prompt_tokens=4, completion_tokens=0 if error else n,
                         usage_source="server", error_kind=error)


LOAD = Load(concurrency=1, num_prompts=1)


def test_slices_cut_the_cell_by_send_arrival_and_end():
    # one request every 100 ms for 25 s; TTFT 50 ms, 10 tokens 20 ms apart (it ends 231 ms after its send)
    recs = [rec(i, 100 * i, 50, 20, 10) for i in range(250)]
    s = summarize(recs, LOAD, 4, 10).slices
    assert s is not None and s.width_s == 10 and len(s) == 3
    assert s.start_s == [0, 10, 20] and s.span_s[:2] == [10, 10] and s.span_s[2] == pytest.approx(5.131, abs=1e-3)
    assert s.sent == [100, 100, 50] and s.completed == [98, 100, 52] and s.errors == [0, 0, 0]
    assert s.output_tps[0] == pytest.approx(1000 / 10 - 1, abs=1)                # 100 tokens/s, the edge aside
    assert s.ttft_mean_ms == [pytest.approx(50)] * 3 and s.tpot_mean_ms == [pytest.approx(20)] * 3   # to the last
    # token, as the cell's own TPOT: the end (1 ms after it) is not a token
    assert s.full() == [0, 1] and (s.steady, s.steady_spread) == (None, None)   # 2 full slices: too short


def test_every_slice_equals_its_recomputation_from_the_records():
    """Each slice's mean TTFT, p99 TTFT and mean TPOT are the cell's own definitions (metrics/request.py) over
    the ok requests sent in it, recomputed here from the records; its tokens those that arrived in it. The
    streams end well after their last token (a slow end), which TPOT must not count."""
    import random

    from tokenbench.metrics import request as rm
    from tokenbench.metrics.request import percentile
    rng = random.Random(7)
    recs = []
    for i in range(400):
        r = rec(i, rng.uniform(0, 30_000), rng.uniform(20, 400), rng.uniform(5, 40), rng.randint(1, 30))
        r.end_ns += int(rng.uniform(0, 500) * MS)                       # the stream's tail
        recs.append(r)
    s = summarize(recs, Load(request_rate=10, num_prompts=400), 4, 10).slices
    assert s is not None and s.t0_ns is not None
    for k in range(len(s)):
        w = int(s.width_s * 10**9)
        a, b = s.t0_ns + k * w, s.t0_ns + (k + 1) * w
        mine = [r for r in recs if a <= r.sent_ns < b or (k == len(s) - 1 and r.sent_ns >= b)]
        ttft = sorted(v for r in mine if (v := rm.ttft_ms(r)) is not None)
        tpot = [v for r in mine if (v := rm.tpot_ms(r)) is not None]
        assert s.ttft_mean_ms[k] == (pytest.approx(sum(ttft) / len(ttft)) if ttft else None)
        assert s.ttft_p99_ms[k] == (pytest.approx(percentile(ttft, 99)) if ttft else None)
        assert s.tpot_mean_ms[k] == (pytest.approx(sum(tpot) / len(tpot)) if tpot else None)
        tokens = sum(c for r in recs for t, c in zip(r.token_times_ns, r.token_counts, strict=True) if a <= t < b)
        assert s.output_tps[k] * s.span_s[k] == pytest.approx(tokens)


def test_latencies_belong_to_the_slice_they_were_sent_in_and_errors_to_where_they_ended():
    recs = [rec(0, 0, 50, 10, 5), rec(1, 9_990, 300, 10, 5), rec(2, 10_500, 0, 0, 1, error="http")]
    s = CellSummary.from_dict(summarize(recs, LOAD, 4, 5).to_dict()).slices      # through the stored form
    assert s is not None and s.ttft_mean_ms[0] == pytest.approx(175) and s.ttft_mean_ms[1] is None
    assert s.completed == [1, 1] and s.errors == [0, 1] and s.sent == [2, 1]


def test_steady_state_is_the_last_three_full_slices_within_ten_percent():
    def cell(gaps: list[float]) -> Timeslices:
        recs, t, i = [], 0.0, 0
        for k, gap in enumerate(gaps):                    # slice k: requests `gap` ms apart
            while t < (k + 1) * 1000:
                recs.append(rec(i, t, 5, 1, 4))
                t, i = t + gap, i + 1
        tally = CellTally(slice_s=1.0)
        for r in recs:
            tally.add(r)
        out = of_tally(tally, LOAD, 4, 4).slices
        assert out is not None
        return out

    flat = cell([10, 10, 10, 10, 10])
    assert flat.steady is True and flat.steady_spread is not None and flat.steady_spread < 0.05
    rising = cell([40, 30, 20, 14, 10, 10])               # still ramping in the last three
    assert rising.steady is False and rising.steady_spread > 0.10
    assert steady(Timeslices(width_s=1.0, span_s=[1.0, 1.0], output_tps=[1.0, 1.0])) == (None, None)


def test_drift_compares_the_first_and_last_quarter_of_the_full_slices():
    still = Timeslices(width_s=10.0, span_s=[10.0] * 8, output_tps=[100, 101, 99, 100, 100, 101, 99, 100],
                       tpot_mean_ms=[20.0, 20.2, 19.9, 20.0, 20.1, 20.0, 19.8, 20.1])
    assert not any(d.drifted for d in drift(still))
    falling = still.model_copy(update={"output_tps": [100, 101, 99, 100, 90, 80, 70, 71]})
    [tps] = [d for d in drift(falling) if d.figure == "output_tps"]
    assert tps.drifted and tps.change == pytest.approx(70.5 / 100.5 - 1) and tps.slices == 2
    assert tps.hi is not None and tps.hi < -DRIFT_MAX / 2
    assert drift(Timeslices(width_s=10.0, span_s=[10.0], output_tps=[1.0])) == []


def test_the_monitor_samples_fall_in_their_slices():
    s = summarize([rec(i, 100 * i, 5, 5, 4) for i in range(200)], LOAD, 4, 4).slices
    assert s is not None and s.t0_ns == 0
    samples = [(t * MS, name, v) for t, name, v in ((500, "running", 2), (900, "running", 4), (900, "waiting", 1),
                                                     (12_000, "kv_usage", 0.5), (25_000, "running", 9))]
    m = s.with_monitor(samples)
    assert m.monitor_samples == [2, 1] and m.running_mean == [3, None] and m.waiting_max == [1, None]
    assert m.kv_usage_max == [None, 0.5]
    assert "slice_running_mean" in CellSummary().with_(m).to_dict()


def test_a_slow_stream_under_one_token_a_second_is_judged_steady_and_no_output_is_not():
    """The steady verdict is judged at any positive rate, however low (0.5 tok/s: spread 0, steady; 0.45 to 0.55:
    spread 0.2, not), and a window of slices without a single token is not steady (no spread)."""
    slow = Timeslices(width_s=10.0, span_s=[10.0] * 4, output_tps=[0.5, 0.5, 0.5, 0.5])
    assert steady(slow) == (True, 0.0)
    assert steady(slow.model_copy(update={"output_tps": [0.5, 0.45, 0.5, 0.55]})) == (False, pytest.approx(0.2))
    assert steady(slow.model_copy(update={"output_tps": [0.5, 0.0, 0.0, 0.0]})) == (False, None)


def test_a_token_on_a_slice_edge_counts_in_the_later_slice_only():
    # request 0's 10 tokens arrive every 100 ms from 100 ms: the one at exactly 1 s is the second slice's
    recs = [rec(0, 0, 100, 100, 10), rec(1, 1500, 50, 10, 1)]
    tally = CellTally(slice_s=1.0)
    for r in recs:
        tally.add(r)
    s = of_tally(tally, LOAD, 4, 10).slices
    assert s is not None and s.t0_ns == 0 and s.span_s[0] == 1.0
    assert s.output_tps[0] == 9.0                     # 100 .. 900 ms: 9 tokens; the token at 1000 ms is not one
    assert s.output_tps[1] * s.span_s[1] == pytest.approx(2)   # 1000 ms and request 1's token at 1550 ms


def test_a_send_stamped_before_the_first_due_time_counts_in_the_first_slice():
    """Slices start at the earliest due time; a send stamped 2 ms before it (its due time is the schedule's, not a
    measurement) still counts once, in the first slice, as each of the others in its own."""
    early = rec(0, 0, 50, 20, 10)
    early.intended_ns = 2 * MS
    recs = [early, *(rec(i, 2 + 100 * i, 50, 20, 10) for i in range(1, 150))]
    s = summarize(recs, LOAD, 4, 10).slices
    assert s is not None and len(s) == 2 and s.start_s == [0, 10]
    assert s.sent == [100, 50] and sum(s.completed) == 150 and s.errors == [0, 0]
