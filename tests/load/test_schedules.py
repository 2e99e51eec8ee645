"""Open-loop schedules that are what they say (issue 24, build 1): Poisson and gamma gaps scaled so N
requests span (N - 1) / rate, a seed per cell, the one t0 of several senders, and the send rates a cell
stores (asked, scheduled, achieved) with the reason when the achieved one is off."""

from __future__ import annotations

import asyncio
import random
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.client.records import RawExchange
from tokenbench.client.request import PreparedRequest
from tokenbench.load.arrivals import arrival_seed, offsets_ns, planned_arrivals, schedule
from tokenbench.load.runner import PhasePlan, run_phase
from tokenbench.metrics.summary import RATE_TOLERANCE, send_rates
from tokenbench.metrics.tally import SendTimes, SlotWaits
from tokenbench.spec.bench import Load

MS = 1_000_000


@settings(max_examples=300, deadline=None)
@given(st.floats(0.05, 5000), st.integers(2, 3000), st.integers(0, 2**48), st.sampled_from([1.0, 0.25, 0.5, 2.0, 8.0]))
def test_n_requests_span_exactly_n_minus_1_over_the_rate(rate, n, seed, burstiness):
    offs = schedule(Load(request_rate=rate, num_prompts=n, burstiness=burstiness), seed)
    assert len(offs) == n and offs[0] == 0 and offs == sorted(offs)
    assert abs(offs[-1] - (n - 1) / rate * 1e9) <= 1          # to the nanosecond the offsets are kept in


def test_scaling_keeps_the_shape_of_the_gaps():
    """One factor scales every gap: the scaled offsets are the unscaled draws times (N-1) / (r x their sum)."""
    rng = random.Random(11)
    draws = [rng.expovariate(1.0) for _ in range(99)]
    t = np.cumsum(draws) * (99 / 20.0) / sum(draws)
    got = list(offsets_ns(20.0, "poisson", random.Random(11), 100))
    assert all(abs(a - x * 1e9) <= 1 for a, x in zip(got[1:], t, strict=True))


def test_duration_cells_have_n_from_the_rate_and_fit_inside():
    load = Load(request_rate=7.0, duration_s=3.0)
    offs = schedule(load, 5)
    assert planned_arrivals(load) == 21 == len(offs)
    assert offs[-1] < 3e9 and 20 / (offs[-1] / 1e9) == pytest.approx(7.0, rel=1e-6)
    assert schedule(Load(request_rate=7.0, duration_s=3.0, arrival="constant"), 5)[-1] == round(20 / 7 * 1e9)


def test_each_cell_its_own_reproducible_seed():
    a, b = arrival_seed(0, "8:4/rate=2/s"), arrival_seed(0, "8:4/rate=4/s")
    assert a != b and a == arrival_seed(0, "8:4/rate=2/s") and arrival_seed(1, "8:4/rate=2/s") != a
    assert 0 <= a < 2**48
    load = Load(request_rate=2.0, num_prompts=50)
    assert schedule(load, a) == schedule(load, a) != schedule(load, b)


def test_send_rates_formulas_and_no_mark_on_schedule():
    intended = np.arange(0, 100) * 50 * MS
    t = SendTimes(intended, intended + 2 * MS, np.zeros(100, np.int64))
    r = send_rates(t, Load(request_rate=20.0, num_prompts=100), SlotWaits(), seed=7)
    assert r is not None and r.send_rate_asked == 20.0 and r.arrival_seed == 7
    assert r.send_rate_scheduled == pytest.approx(20.0) and r.send_rate_achieved == pytest.approx(20.0)
    assert r.send_late_mean_ms == pytest.approx(2.0) and r.send_rate_off is None
    assert send_rates(t, Load(concurrency=4, num_prompts=100), SlotWaits()) is None


def _drifting(n: int, ms_per_send: float, connect: bool = False) -> SendTimes:
    """Sends falling behind a 20/s schedule by `ms_per_send` each (so the sent rate is lower)."""
    intended = np.arange(n) * 50 * MS
    late = (np.arange(n) * ms_per_send * MS).astype(np.int64)
    return SendTimes(intended, intended + late, late if connect else np.zeros(n, np.int64))


@pytest.mark.parametrize("case, reason", [("cap", "cap"), ("connect", "connect"), ("client", "client")])
def test_an_off_rate_names_its_cause(case, reason):
    n, capped = 40, Load(request_rate=20.0, num_prompts=40, max_concurrency=2)
    t = _drifting(n, 5.0, connect=case == "connect")
    waits = SlotWaits(n - 1, int(t.wrote.sum() - t.intended.sum())) if case == "cap" else SlotWaits()
    r = send_rates(t, capped if case == "cap" else Load(request_rate=20.0, num_prompts=40), waits)
    assert r is not None and r.off is not None and r.off < -RATE_TOLERANCE
    assert r.send_rate_off == reason


def test_too_few_requests_for_a_rate():
    one = SendTimes(np.array([0]), np.array([MS]), np.array([0]))
    assert send_rates(one, Load(request_rate=20.0, num_prompts=1), SlotWaits()).send_rate_off == "few_requests"
    # a schedule cut short whose own draws are off the asked rate: the sends kept it, the draws did not hold
    part = np.array([0, 200 * MS, 300 * MS])
    r = send_rates(SendTimes(part, part, np.zeros(3, np.int64)), Load(request_rate=20.0, num_prompts=100), SlotWaits())
    assert r.send_rate_scheduled == pytest.approx(2 / 0.3) and r.send_rate_off == "few_requests"


def _req() -> PreparedRequest:
    return PreparedRequest(url="http://x/v1/completions", body=b"{}", headers={}, input_len=4, output_len=2,
                           expected_prompt_tokens=4)


def test_a_phase_given_t0_keeps_it_however_late_it_starts():
    """Workers share the coordinator's t0: a process that wakes 80 ms after it still stamps every intended
    time as t0 + offset (and sends the overdue ones at once, recorded as late), never its own t0."""
    offsets = [0, 50 * MS, 100 * MS, 150 * MS]
    load = Load(request_rate=20.0, num_prompts=4, arrival="constant")

    async def send(req, intended):
        return RawExchange(intended_ns=intended, sent_ns=time.perf_counter_ns(), end_ns=time.perf_counter_ns(),
                           status=500, error_kind="http_status", error_detail="x")

    async def go():
        start = time.perf_counter_ns() - 80 * MS
        run = await run_phase(send, [_req()] * 4, PhasePlan("measure", load, offsets=offsets, start_ns=start))
        return start, run

    start, run = asyncio.run(go())
    assert [r.intended_ns - start for r in run.records] == offsets
    assert run.records[0].sent_ns - run.records[0].intended_ns >= 80 * MS


def test_slot_waits_are_counted():
    load = Load(request_rate=200.0, num_prompts=6, arrival="constant", max_concurrency=1)

    async def send(req, intended):
        t = time.perf_counter_ns()
        await asyncio.sleep(0.03)                   # each request holds the one slot for 30 ms: 6 x the gap
        return RawExchange(intended_ns=intended, sent_ns=t, end_ns=time.perf_counter_ns(), status=500,
                           error_kind="http_status", error_detail="x")

    run = asyncio.run(run_phase(send, [_req()] * 6, PhasePlan("measure", load, seed=1)))
    assert run.slot_waits.sends == 5 and run.slot_waits.total_ns > 0


def test_fewer_requests_prepared_than_asked_span_their_own_schedule():
    offs = schedule(Load(request_rate=5.0, num_prompts=100), 3, count=10)      # a dataset of 10 entries
    assert len(offs) == 10 and abs(offs[-1] - 9 / 5.0 * 1e9) <= 1


@pytest.mark.parametrize("arrival", ["poisson", "constant", "gamma"])
def test_a_cell_with_a_count_and_a_duration_keeps_its_count_cut_at_the_duration(arrival):
    """--num-prompts N with --duration D: the N-request schedule (spanning (N - 1) / rate), its arrivals
    after D left out; N is never replaced by rate x D (issue 39: a single-point change did that unseen)."""
    kw = {"arrival": "poisson", "burstiness": 0.5} if arrival == "gamma" else {"arrival": arrival}
    few = schedule(Load(request_rate=10.0, num_prompts=5, duration_s=2.0, **kw), 3)
    assert len(few) == 5 and abs(few[-1] - 0.4e9) <= 1                   # 5 arrivals over 0.4 s, not 20 over 2 s
    full = schedule(Load(request_rate=10.0, num_prompts=50, **kw), 3)
    cut = schedule(Load(request_rate=10.0, num_prompts=50, duration_s=2.0, **kw), 3)
    assert cut == [t for t in full if t < 2e9] and 0 < len(cut) < 50


@pytest.mark.parametrize("kind", ["poisson", "constant"])
def test_offsets_without_a_count_take_rate_times_duration_arrivals(kind):
    """offsets_ns(count=None, duration_s=D): round(rate x D) arrivals (at least 1), as if that count was given."""
    direct = list(offsets_ns(7.0, kind, random.Random(4), duration_s=3.0))
    assert direct == list(offsets_ns(7.0, kind, random.Random(4), count=21, duration_s=3.0)) and len(direct) == 21
    assert abs(direct[-1] - 20 / 7.0 * 1e9) <= 1
    assert list(offsets_ns(0.1, kind, random.Random(4), duration_s=1.0)) == [0]
