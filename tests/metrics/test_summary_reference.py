"""metrics/summary.py (and the tally it reads, metrics/tally.py) against the formulas of docs/metrics.md ("Per
cell", "Steady-state window", "Stream tail", "Early ends", "Send rates"), each written out here over the records
directly with numpy and plain loops, for any cell hypothesis draws: ok and failed requests, any token times,
counts, prompts and cached tokens, closed and open loops; then each rule's edge on both sides."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import summary as sm
from tokenbench.metrics.summary_groups import SendRates
from tokenbench.metrics.tally import JobTally, SendTimes, SlotWaits, TurnTally
from tokenbench.spec.bench import SLO, Load

MS, S = 1_000_000, 1_000_000_000


@st.composite
def records(draw, n_max: int = 14) -> list[RequestRecord]:
    out = []
    for i in range(draw(st.integers(1, n_max))):
        intended = draw(st.integers(0, 5 * S))
        sent = intended + draw(st.integers(0, 50 * MS))
        failed = draw(st.sampled_from([None, None, None, "timeout", "http_status"]))
        gaps = draw(st.lists(st.integers(0, 80 * MS), max_size=6))
        first = sent + draw(st.integers(1, 300 * MS))
        times = [first + sum(gaps[:k]) for k in range(len(gaps) + 1)] if draw(st.booleans()) or failed else []
        counts = [draw(st.integers(1, 3)) for _ in times]
        end = (times[-1] if times else sent) + draw(st.integers(1, 20 * MS))        # a request takes time
        out.append(RequestRecord(
            index=i, phase="measure", input_len=16, output_len=draw(st.integers(1, 12)), intended_ns=intended,
            sent_ns=sent, end_ns=end, status=200, token_times_ns=times,
            token_counts=counts, prompt_tokens=draw(st.none() | st.integers(1, 40)),
            completion_tokens=draw(st.none() | st.integers(0, 20)), cached_tokens=draw(st.none() | st.integers(0, 8)),
            error_kind=failed, connect_ns=draw(st.sampled_from([0, 0, 3 * MS])),
            expected_prompt_tokens=draw(st.none() | st.integers(1, 40)),
            first_content_ns=times[-1] if times and draw(st.booleans()) else None,
            length_error=draw(st.sampled_from(["", "", "", "short"])), usage_source=draw(st.sampled_from(["server", "none"])),
            count_source=draw(st.sampled_from(["usage", "tokenizer", "none"])), reasoning_tokens=draw(st.integers(0, 2))))
    return out


def _stats(values: list[float], name: str) -> dict[str, float]:
    x = np.asarray(values, dtype=float)
    if not len(x):
        return {}
    out = {f"mean_{name}_ms": x.mean(), f"median_{name}_ms": np.percentile(x, 50), f"std_{name}_ms": x.std(),
           f"min_{name}_ms": x.min(), f"max_{name}_ms": x.max()}
    return out | {f"p{q}_{name}_ms": np.percentile(x, q) for q in (50, 90, 95, 99)}


def _reference(recs: list[RequestRecord], slo: SLO) -> dict:
    ok = [r for r in recs if r.ok]
    out = {"num_prompts": len(recs), "completed": len(ok), "failed": len(recs) - len(ok),
           "total_input_tokens": sum(r.prompt_tokens or r.input_len for r in ok),
           "total_output_tokens": sum(r.output_tokens for r in ok),
           "failed_by_kind": dict(sorted(Counter(r.error_kind for r in recs if not r.ok).items())),
           "length_mismatches": sum(bool(r.length_error) for r in recs),
           "usage_source": dict(Counter(r.usage_source for r in ok)), "count_source": dict(Counter(r.count_source for r in ok)),
           "total_reasoning_tokens": sum(r.reasoning_tokens for r in ok),
           "reasoning_requests": sum(bool(r.reasoning_tokens) for r in ok),
           "zero_token_requests": sum(not r.token_times_ns for r in ok)}
    dur = (max(r.end_ns for r in recs) - min(r.intended_ns for r in recs)) / S
    out |= {"duration": dur, "request_throughput": len(ok) / dur,
            "output_throughput": out["total_output_tokens"] / dur,
            "total_token_throughput": (out["total_input_tokens"] + out["total_output_tokens"]) / dur,
            "achieved_concurrency": sum(r.end_ns - r.sent_ns for r in recs) / S / dur}
    good = [r for r in ok if (r.ttft_ns is not None and r.ttft_ns / MS <= slo.ttft_ms)]
    out |= {"request_goodput": len(good) / dur, "goodput_fraction": len(good) / len(recs)}
    told = [r for r in ok if r.cached_tokens is not None and r.prompt_tokens]
    if told:
        out |= {"total_cached_tokens": sum(r.cached_tokens for r in told), "cache_reported_requests": len(told),
                "cache_hit_rate": sum(r.cached_tokens for r in told) / sum(r.prompt_tokens for r in told)}
    diffs = [r.prompt_tokens - r.expected_prompt_tokens for r in ok
             if r.prompt_tokens is not None and r.expected_prompt_tokens is not None]
    if diffs:
        out |= {"prompt_tokens_disagreeing": sum(d != 0 for d in diffs),
                "prompt_tokens_diff_mean": sum(diffs) / len(diffs),
                "prompt_tokens_diff_max": next(d for d in diffs if abs(d) == max(map(abs, diffs)))}
    timed = [r for r in ok if r.token_times_ns]
    out |= _stats([(r.token_times_ns[0] - r.sent_ns) / MS for r in timed], "ttft")
    out |= _stats([(r.token_times_ns[-1] - r.token_times_ns[0]) / (r.output_tokens - 1) / MS
                   for r in timed if r.output_tokens >= 2], "tpot")
    out |= _stats([(b - a) / MS for r in ok for a, b in zip(r.token_times_ns, r.token_times_ns[1:], strict=False)],
                  "itl")
    out |= _stats([(r.end_ns - r.sent_ns) / MS for r in ok], "e2el")
    out |= _stats([(r.end_ns - r.sent_ns) / r.output_tokens / MS for r in ok if r.output_tokens > 0], "ntpot")
    out |= _stats([(r.sent_ns - r.intended_ns - r.connect_ns) / MS for r in ok], "queue")
    out |= _stats([(r.first_content_ns - r.sent_ns) / MS for r in ok if r.first_content_ns is not None], "ttfc")
    out |= _stats([r.connect_ns / MS for r in ok if r.connect_ns], "connect")
    out["new_connections"] = sum(bool(r.connect_ns) for r in ok)
    tails = sorted((r.end_ns - r.token_times_ns[-1]) / MS for r in timed)
    if tails:
        out |= {"mean_stream_tail_ms": float(np.mean(tails)), "median_stream_tail_ms": np.percentile(tails, 50),
                "p99_stream_tail_ms": np.percentile(tails, 99), "max_stream_tail_ms": tails[-1]}
    early = sorted(r.output_tokens for r in ok if r.output_tokens < r.output_len and not r.length_error)
    if early:
        out |= {"ended_early": len(early), "ended_early_share": len(early) / len(ok), "ended_early_out_min": early[0],
                "ended_early_out_median": np.percentile(early, 50), "ended_early_out_mean": float(np.mean(early)),
                "ended_early_out_max": early[-1]}
    return out


@settings(deadline=None, max_examples=80)
@given(records(), st.integers(1, 4))
def test_every_figure_is_its_formula_over_the_records(recs, c):
    slo = SLO(ttft_ms=120.0)
    s = sm.summarize(recs, Load(concurrency=c, num_prompts=len(recs)), 16, 12, slo)
    flat = s.to_dict()
    for key, want in _reference(recs, slo).items():
        assert flat.get(key) == (pytest.approx(want, rel=1e-9, abs=1e-9) if not isinstance(want, dict) else want), key
    assert (s.concurrency, s.input_len, s.output_len, s.request_rate) == (c, 16, 12, None)


def test_a_cell_of_failed_requests_only_counts_them():
    recs = [RequestRecord(index=i, phase="measure", input_len=16, output_len=4, intended_ns=0, sent_ns=0, end_ns=MS,
                          status=500, error_kind="http_status") for i in range(3)]
    s = sm.summarize(recs, Load(concurrency=1, num_prompts=3), 16, 4)
    assert (s.num_prompts, s.completed, s.failed, s.failed_by_kind) == (3, 0, 3, {"http_status": 3})
    assert (s.request_throughput, s.duration, s.mean_ttft_ms) == (0.0, 0.001, None)


def test_a_cell_without_a_first_answer_stamp_states_no_ttfc():
    recs = [RequestRecord(index=i, phase="measure", input_len=16, output_len=2, intended_ns=0, sent_ns=0,
                          end_ns=9 * MS, status=200, token_times_ns=[MS, 2 * MS], token_counts=[1, 1])
            for i in range(3)]
    s = sm.summarize(recs, Load(concurrency=1, num_prompts=3), 16, 2)
    assert s.mean_ttfc_ms is None and s.p99_ttfc_ms is None and s.mean_ttft_ms == 1.0


def test_the_load_keys_and_a_burstiness_other_than_1():
    s = sm.summarize([], Load(request_rate=2.0, burstiness=0.5, max_concurrency=3, num_prompts=4), 8, 4)
    assert (s.request_rate, s.burstiness, s.max_concurrency, s.arrival, s.concurrency) == (2.0, 0.5, 3, "poisson", None)
    plain = sm.summarize([], Load(request_rate=2.0, num_prompts=4), 8, 4)
    assert plain.burstiness is None
    closed = sm.summarize([], Load(concurrency=2, num_prompts=4), 8, 4)
    assert closed.arrival is None


# ---- concurrency and the steady window ---------------------------------------------------------
def _in_flight_reference(sent: list[int], end: list[int], a: int, b: int) -> float:
    """Time-weighted mean of requests in flight over [a, b], by unit steps (an end before a send at one instant)."""
    total = 0
    for t in range(a, b):
        total += sum(1 for s, e in zip(sent, end, strict=True) if s <= t < e)
    return total / (b - a)


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 30)), min_size=1, max_size=10), st.integers(1, 4))
def test_sustained_concurrency_is_the_time_weighted_mean_from_the_cth_send_to_the_last(spans, c):
    sent = [s for s, _ in spans]
    end = [s + d for s, d in spans]
    got = sm.sustained(np.asarray(sent), np.asarray(end), Load(concurrency=c, num_prompts=len(sent)))
    sends = sorted(sent)
    if len(sent) <= c or sends[-1] <= sends[c - 1]:
        assert got is None
        return
    assert got == pytest.approx(_in_flight_reference(sent, end, sends[c - 1], sends[-1]), rel=1e-12)
    assert sm.sustained(np.asarray(sent), np.asarray(end), Load(request_rate=1.0, num_prompts=len(sent))) is None


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 30)), min_size=1, max_size=10), st.integers(1, 4))
def test_the_closed_loops_steady_window_is_first_to_last_moment_at_full_concurrency(spans, c):
    sent = np.asarray([s for s, _ in spans])
    end = np.asarray([s + d for s, d in spans])
    events = sorted([(int(t), 1) for t in sent] + [(int(t), -1) for t in end], key=lambda e: (e[0], e[1]))
    level, full, after = 0, [], []
    for t, d in events:
        level += d
        full.append(t) if level >= c else after.append((t, level))
    got = sm.window(sent, end, Load(concurrency=c, num_prompts=len(sent)))
    want = None
    if len(full) >= 2:
        last_full = full[-1]
        later = [t for t, lv in after if t > last_full]
        if later and later[0] > full[0]:
            want = (full[0], later[0])
    assert got == want


def test_the_open_loops_steady_window_starts_a_mean_e2el_after_the_first_send():
    sent, end = np.array([0, 10, 20, 30]), np.array([5, 17, 29, 31])
    assert sm.window(sent, end, Load(request_rate=1.0, num_prompts=4)) == (5, 30)      # mean E2EL 5.5 -> 5
    assert sm.window(np.array([0, 4]), np.array([10, 12]), Load(request_rate=1.0, num_prompts=2)) is None


def test_the_steady_figures_count_what_finished_and_was_emitted_inside_the_window():
    recs = [RequestRecord(index=i, phase="measure", input_len=10, output_len=2, intended_ns=i * S, sent_ns=i * S,
                          end_ns=i * S + S, status=200, token_times_ns=[i * S + S // 2, i * S + S],
                          token_counts=[1, 1], prompt_tokens=10) for i in range(6)]
    got = sm._steady(recs, (S, 4 * S))
    assert got["steady_duration"] == 3.0
    assert got["steady_request_throughput"] == pytest.approx(4 / 3)        # ends at 1, 2, 3, 4 s
    assert got["steady_output_throughput"] == pytest.approx(sm.tally_of(recs).tokens.tokens_between(S, 4 * S) / 3)
    assert got["steady_total_token_throughput"] == pytest.approx((30 + got["steady_output_throughput"] * 3) / 3)
    assert sm.steady(sm.tally_of(recs), None) == dict.fromkeys(got)


# ---- send rates --------------------------------------------------------------------------------
@pytest.mark.parametrize(("times", "want"), [([0, S], 1.0), ([0, S // 2, S], 2.0), ([], None), ([5], None), ([3, 3], None),
                                             ([0, 4 * S, 2 * S], 0.5)])
def test_a_rate_over_events_is_n_minus_1_over_their_span(times, want):
    assert sm.rate_over(np.asarray(times)) == want


def _send_times(intended: list[int], late: list[int], connect: list[int]) -> SendTimes:
    i = np.asarray(intended, np.int64)
    return SendTimes(i, i + np.asarray(late, np.int64) + np.asarray(connect, np.int64), np.asarray(connect, np.int64))


def test_the_schedules_fidelity():
    t = _send_times([0, S, 2 * S, 3 * S, 4 * S], [0, 2 * MS, 60 * MS, 10 * MS, 0], [0, 5 * MS, 0, 0, 0])
    got = sm.schedule_fidelity(t)
    late = [0.0, 2.0, 60.0, 10.0, 0.0]
    assert got["send_late_p99_ms"] == pytest.approx(np.percentile(late, 99)) and got["send_late_max_ms"] == 60.0
    assert got["send_late_tolerance_ms"] == pytest.approx(0.05 * 1000.0)        # 5 % of the 1 s scheduled gap
    assert got["send_late_share"] == pytest.approx(1 / 5)
    assert got["send_gap_cv_scheduled"] == 0.0
    gaps = np.diff(np.sort(t.wrote)).astype(float)
    assert got["send_gap_cv_sent"] == pytest.approx(gaps.std() / gaps.mean())
    fast = sm.schedule_fidelity(_send_times([0, 10 * MS, 20 * MS], [0, 0, 0], [0, 0, 0]))
    assert fast["send_late_tolerance_ms"] == 1.0                                  # at least 1 ms
    one = sm.schedule_fidelity(_send_times([0], [3 * MS], [0]))
    assert one["send_late_tolerance_ms"] == 1.0 and one["send_gap_cv_scheduled"] is None


def test_the_means_of_the_sends():
    t = _send_times([0, S], [10 * MS, 30 * MS], [2 * MS, 0])
    late, slot, connect = sm._means(t, SlotWaits(sends=1, total_ns=8 * MS))
    assert (late, slot, connect) == (pytest.approx(20.0 - 4.0), pytest.approx(4.0), pytest.approx(1.0))
    assert sm._means(t, SlotWaits(sends=1, total_ns=100 * MS))[0] == 0.0


def _rates(**kw) -> SendRates:
    return SendRates(**{"send_rate_asked": 10.0, "send_rate_scheduled": 10.0, **kw})


@pytest.mark.parametrize(("kw", "want"), [
    ({"send_rate_achieved": 10.49}, None), ({"send_rate_achieved": 9.51}, None),
    ({"send_rate_achieved": 10.51, "send_late_mean_ms": 3.0}, "client"),
    ({"send_rate_achieved": 9.0, "send_slot_wait_mean_ms": 5.0, "send_late_mean_ms": 3.0}, "cap"),
    ({"send_rate_achieved": 9.0, "send_connect_mean_ms": 5.0, "send_late_mean_ms": 3.0}, "connect"),
    ({"send_rate_achieved": 9.0}, "few_requests"),
    ({"send_rate_achieved": 9.0, "send_rate_scheduled": 9.4}, "few_requests"),
    ({"send_rate_achieved": 9.0, "send_rate_scheduled": 9.51, "send_late_mean_ms": 1.0}, "client"),
    ({}, "few_requests")])
def test_why_the_sent_rate_is_off_the_asked_one(kw, want):
    assert sm.RATE_TOLERANCE == 0.05
    assert sm.off_reason(_rates(**kw), Load(request_rate=10.0, num_prompts=4)) == want


def test_a_gated_schedule_that_waited_for_slots_is_the_caps_and_a_trace_has_no_asked_rate():
    rates = _rates(send_rate_achieved=5.0, send_rate_scheduled=5.0, send_slot_waits=3)
    gated = Load(request_rate=10.0, max_concurrency=2, rate_cap="gate", num_prompts=4)
    assert sm.off_reason(rates, gated) == "cap"
    assert sm.off_reason(rates.model_copy(update={"send_slot_waits": 0}), gated) == "few_requests"
    assert sm.off_reason(rates.model_copy(update={"send_slot_waits": 1}), gated) == "cap"
    assert sm.off_reason(rates, Load(arrival="trace", num_prompts=4)) is None
    assert sm.off_reason(_rates(send_rate_asked=None), Load(request_rate=10.0, num_prompts=4)) is None


@pytest.mark.parametrize(("kw", "want"), [
    ({"send_late_p99_ms": 5.0, "send_late_tolerance_ms": 5.0}, None),
    ({"send_late_p99_ms": 5.01, "send_late_tolerance_ms": 5.0, "send_late_mean_ms": 1.0}, "client"),
    ({"send_gap_cv_sent": 1.09, "send_gap_cv_scheduled": 1.0}, None),
    ({"send_gap_cv_sent": 1.11, "send_gap_cv_scheduled": 1.0, "send_connect_mean_ms": 2.0}, "connect"),
    ({"send_gap_cv_sent": 0.89, "send_gap_cv_scheduled": 1.0, "send_slot_wait_mean_ms": 2.0}, "cap"),
    ({"send_gap_cv_sent": 0.5}, None)])
def test_the_sends_left_their_schedule_beyond_its_tolerance_or_its_shape(kw, want):
    assert sm.schedule_off(_rates(**kw)) == want


def test_send_rates_of_an_open_loop_only():
    t = _send_times([0, S, 2 * S], [0, 0, 0], [0, 0, 0])
    capped = Load(request_rate=1.0, max_concurrency=2, num_prompts=3)
    got = sm.send_rates(t, capped, SlotWaits(sends=2, total_ns=6 * MS), seed=7)
    assert (got.arrival_seed, got.send_rate_asked, got.send_rate_scheduled, got.send_rate_achieved) == (7, 1.0, 1.0, 1.0)
    assert got.send_slot_wait_mean_ms == pytest.approx(2.0) and got.send_slot_waits == 2 and got.send_cap == "queue"
    plain = sm.send_rates(t, Load(request_rate=1.0, arrival="constant", num_prompts=3), SlotWaits(), seed=7)
    assert plain.arrival_seed is None and plain.send_slot_wait_mean_ms is None and plain.send_cap is None
    assert sm.send_rates(t, Load(concurrency=2, num_prompts=3), SlotWaits()) is None
    assert sm.send_rates(_send_times([], [], []), capped, SlotWaits()) is None


# ---- repeats merged -------------------------------------------------------------------------------
def test_repeats_merge_into_the_mean_of_each_figure_every_ok_repeat_gives():
    from tokenbench.metrics.cell_summary import CellSummary
    from tokenbench.metrics.summary_groups import FigureHealth, FigureMark
    from tokenbench.metrics.timeslices import Timeslices

    mark = lambda b: FigureHealth(client_marks={"p99_ttft_ms": FigureMark(cause="client_cpu", bound=b, tolerance=1.0)})  # noqa: E731
    a = CellSummary(completed=10, num_prompts=10, mean_ttft_ms=10.0, p99_ttft_ms=30.0, usage_source={"server": 10},
                    failed_by_kind={"timeout": 1}, arrival="poisson").with_(Timeslices(width_s=10.0), mark(2.0))
    b = CellSummary(completed=11, num_prompts=10, mean_ttft_ms=20.0, usage_source={"server": 9, "none": 2},
                    failed_by_kind={"timeout": 2, "connect": 1}, arrival="constant").with_(mark(5.0))
    c = CellSummary(completed=12, num_prompts=10, mean_ttft_ms=60.0, failed_by_kind={"http_status": 4})
    got = sm.mean_of_repeats([a, b], [a, b, c])
    assert got.completed == 10.5 and got.num_prompts == 10 and isinstance(got.num_prompts, int)
    assert got.mean_ttft_ms == 15.0 and got.p99_ttft_ms is None                  # only one repeat gave a p99
    assert got.usage_source == {"server": 19, "none": 2} and got.arrival == "poisson"
    assert got.failed_by_kind == {"timeout": 3, "connect": 1, "http_status": 4}   # every repeat's failures
    assert got.slices == Timeslices(width_s=10.0) and got.figures.client_marks["p99_ttft_ms"].bound == 5.0
    tie = b.with_(FigureHealth(client_marks={"p99_ttft_ms": FigureMark(cause="host_contention", bound=2.0,
                                                                      tolerance=1.0)}))
    assert sm.mean_of_repeats([a, tie], [a, tie]).figures.client_marks["p99_ttft_ms"].cause == "client_cpu"  # the first
    whole = sm.mean_of_repeats([a, c.model_copy(update={"completed": 12})], [a, c])
    assert whole.completed == 11 and isinstance(whole.completed, int)


def test_repeats_none_of_which_is_ok_keep_their_counts_only():
    from tokenbench.metrics.cell_summary import CellSummary
    a = CellSummary(completed=0, num_prompts=5, failed=5, length_mismatches=1, mean_ttft_ms=3.0,
                    failed_by_kind={"timeout": 5})
    b = CellSummary(completed=1, num_prompts=5, failed=4, failed_by_kind={"connect": 4})
    got = sm.mean_of_repeats([], [a, b])
    assert (got.completed, got.num_prompts, got.failed, got.length_mismatches) == (1, 10, 9, 1)
    assert got.mean_ttft_ms is None and got.failed_by_kind == {"timeout": 5, "connect": 4}
    assert sm.mean_of_repeats([], [CellSummary(num_prompts=2)]).failed_by_kind == {}


def test_a_sessions_cells_shape_is_what_it_asked():
    from tokenbench.spec.bench import Workload
    wl = Workload(kind="sessions", input_len=32, output_len=8, turns=3, think_time_s=0.5)
    got = sm.shape_of(wl, Load(users=4, num_sessions=8, ramp_up_s=2.0))
    assert (got.users, got.rate, got.ramp_up_s, got.turns, got.user_len, got.output_len) == (4, None, 2.0, 3, 32, 8)
    assert got.system_len == 0 and got.think_time_s == 0.5
    with_system = sm.shape_of(wl.model_copy(update={"system_prompt_len": 64}), Load(session_rate=1.5, num_sessions=8))
    assert with_system.system_len == 64 and with_system.rate == 1.5 and with_system.users is None


def test_the_theoretical_hit_is_the_oracles_tokens_over_the_prompt_tokens_by_turn_and_over_every_turn():
    """Turn 0: sessions s-0 and s-1 (100 and 200 prompt tokens, the oracle found 0 and 50); turn 1: only a failed
    request (no prompt counted: none); turn 2: s-0 (400 tokens, 300 found). A session the turn did not count adds
    nothing."""
    def turn(i: int, sid: str, k: int, prompt: int, error: str | None = None) -> RequestRecord:
        return RequestRecord(index=i, phase="measure", input_len=prompt, output_len=1, intended_ns=0, sent_ns=0,
                             end_ns=2_000_000, token_times_ns=[] if error else [1_000_000],
                             token_counts=[] if error else [1], prompt_tokens=prompt, completion_tokens=1,
                             usage_source="server", error_kind=error, session_id=sid, turn=k)
    turns = TurnTally()
    for r in (turn(0, "s-0", 0, 100), turn(1, "s-1", 0, 200), turn(2, "s-1", 1, 300, error="timeout"),
              turn(3, "s-0", 2, 400)):
        turns.add(r)
    theory = {("s-0", 0): 0, ("s-1", 0): 50, ("s-1", 1): 80, ("s-0", 2): 300, ("s-9", 2): 999}
    got = sm.theory_figures(turns, theory)
    assert got == {"turn_theory_hit_rate": [50 / 300, None, 300 / 400], "theory_hit_rate": 350 / 700}
    assert sm.theory_figures(TurnTally(), theory) == {"turn_theory_hit_rate": [], "theory_hit_rate": None}


def test_jobs_are_in_the_order_they_started_by_the_number_their_id_ends_with():
    """s-2 before s-10 (by number, not as text); an id without a number first."""
    jobs = JobTally()
    for i, sid in enumerate(["s-10", "s-2", "warm", "s-1"]):
        jobs.add(RequestRecord(index=i, phase="measure", input_len=4, output_len=1, intended_ns=0, sent_ns=0,
                               end_ns=(i + 2) * MS, token_times_ns=[(i + 1) * MS], token_counts=[1],
                               completion_tokens=1, usage_source="server", session_id=sid, turn=0))
    got = sm.job_figures(jobs, {sid: (0,) for sid in jobs.jobs})
    assert got.ids == ["warm", "s-1", "s-2", "s-10"] and got.each_completion_ms == [3.0, 4.0, 2.0, 1.0]


def test_jobs_without_tool_delays_have_no_tool_share_even_one_of_no_length():
    """T = 0 in every job: the tool share is 0, also for a job answered at the nanosecond it was sent (JCT = 0,
    where S / JCT and T / JCT are 0 / 0); the three shares still add up to 1."""
    jobs = JobTally()
    for i, (sid, last) in enumerate([("s-1", 10 * MS), ("s-2", 0)]):
        jobs.add(RequestRecord(index=i, phase="measure", input_len=4, output_len=1, intended_ns=0, sent_ns=0,
                               end_ns=last, token_times_ns=[last], token_counts=[1], completion_tokens=1,
                               usage_source="server", session_id=sid, turn=0))
    got = sm.job_figures(jobs, {sid: (0,) for sid in jobs.jobs})
    assert got.complete == 2 and got.each_completion_ms == [10.0, 0.0] and got.each_tool_ms == [0.0, 0.0]
    assert got.tool_share == 0.0
    assert got.server_share + got.tool_share + got.client_share == pytest.approx(1.0)


def test_a_jobs_worst_tpot_is_over_its_turns_that_have_one():
    """Seed 4's draw: a job whose first turn answered one token (no TPOT) and whose second answered three, 4 ms
    apart, has a worst-turn TPOT of 4 ms, not none."""
    jobs = JobTally()
    jobs.add(RequestRecord(index=0, phase="measure", input_len=4, output_len=1, intended_ns=0, sent_ns=0,
                           end_ns=2 * MS, token_times_ns=[1 * MS], token_counts=[1], completion_tokens=1,
                           usage_source="server", session_id="s-1", turn=0))
    jobs.add(RequestRecord(index=1, phase="measure", input_len=8, output_len=3, intended_ns=3 * MS, sent_ns=3 * MS,
                           end_ns=14 * MS, token_times_ns=[5 * MS, 9 * MS, 13 * MS], token_counts=[1, 1, 1],
                           completion_tokens=3, usage_source="server", session_id="s-1", turn=1))
    got = sm.job_figures(jobs, {"s-1": (0, 0)})
    assert got.complete == 1 and got.each_turns == [2] and got.each_tpot_max_ms == [pytest.approx(4.0)]
