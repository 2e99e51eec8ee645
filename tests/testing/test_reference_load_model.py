"""The load model: ITL by running batch (captured sizes, eager), the prefill queue, and the closed forms
(tokenbench.testing.expect). Over HTTP, the server's own send log (its deadlines, its prefill span) is
compared with the closed form: a busy host can make writes late, never change the schedule."""

from __future__ import annotations

import asyncio
import random
import statistics

import aiohttp
import pytest

from tokenbench.errors import UsageError
from tokenbench.testing import expect as X
from tokenbench.testing.load_model import PrefillQueue, itl_ms, padded, step_ns

from .helpers import config, post, read_log, run, served, stream_body


def test_itl_grows_with_running_is_padded_to_captured_sizes_and_eager_above():
    cfg = config(itl_ms=10, itl_per_running_ms=0.5, captured_batch_sizes=(8, 1, 2, 4), eager_itl_factor=2,
                 eager_itl_ms=3)
    assert cfg.captured_batch_sizes == (1, 2, 4, 8)
    assert [padded(cfg.captured_batch_sizes, r) for r in (1, 3, 5, 8, 9)] == [1, 4, 8, 8, None]
    assert itl_ms(cfg, 3) == 10 + 0.5 * 4 and itl_ms(cfg, 8) == 14.0
    assert itl_ms(cfg, 9) == (10 + 0.5 * 9) * 2 + 3
    plain = config(itl_ms=10, itl_per_running_ms=0.5)
    assert [itl_ms(plain, r) for r in (0, 1, 7)] == [10.5, 10.5, 13.5]
    assert step_ns(config(itl_ms=1.0000001), 50) == 1000000   # off: the fixed ITL, as it always was


def test_prefill_queue_is_one_prompt_at_a_time_in_order():
    q = PrefillQueue()
    assert [q.add(at, 5e6) for at in (1000, 1000, 1000)] == [
        (1000, 5_001_000), (5_001_000, 10_001_000), (10_001_000, 15_001_000)]   # k-th of a burst: k x 5 ms
    assert q.add(100_000_000, 2e6) == (100_000_000, 102_000_000)               # an idle queue starts at once
    assert q.add(50, 1e6) == (102_000_000, 103_000_000)                        # never before the one ahead


def test_poisson_prefill_wait_is_m_d_1_mean_and_p99():
    """The closed form's TTFT under Poisson arrivals, checked on the queue itself (seeded, no clock)."""
    rng, work_ms, rate = random.Random(7), 10.0, 60.0            # rho = 0.6
    q, t, waits = PrefillQueue(), 0.0, []
    for _ in range(200_000):
        t += rng.expovariate(rate / 1000.0)
        start, _ = q.add(int(t * 1e6), work_ms * 1e6)
        waits.append(start / 1e6 - int(t * 1e6) / 1e6)
    waits.sort()
    cfg = config(ttft_ms=0, itl_ms=1, prefill_ms_per_token=0.1)
    want = X.poisson_rate(cfg, rate, X.Shape(prompt_tokens=100, output_tokens=2))
    assert want.ttft_mean_ms == pytest.approx(work_ms + 0.6 * work_ms / 0.8)
    assert statistics.fmean(waits) + work_ms == pytest.approx(want.ttft_mean_ms, rel=0.03)
    assert waits[int(0.99 * len(waits))] + work_ms == pytest.approx(want.ttft_p99_ms, rel=0.03)
    assert X.md1_wait_cdf(0.0, rate, work_ms) == pytest.approx(0.4)            # 1 - rho never wait


def test_closed_loop_closed_forms_by_hand():
    cfg = config(ttft_ms=50, itl_ms=10, itl_per_running_ms=0.5, prefill_ms_per_token=0.05, max_running=16)
    shape = X.Shape(prompt_tokens=200, output_tokens=50)                  # one prefill: w = 10 ms
    four = X.closed_loop(cfg, 4, shape)
    assert (four.ttft_mean_ms, four.ttft_p99_ms, four.tpot_mean_ms) == (60, 60, 12)
    assert four.e2el_mean_ms == 60 + 49 * 12 and four.request_rate == pytest.approx(4 / 648 * 1000)
    over = X.closed_loop(cfg, 20, shape)       # 16 slots: a slot's cycle 942 ms, each request stays 20/16 of it
    assert over.e2el_mean_ms == 20 * 942 / 16 and over.ttft_mean_ms == 20 * 942 / 16 - 49 * 18
    assert over.ttft_p99_ms is None and over.running == 16 and over.tpot_mean_ms == 18
    bound = X.closed_loop(config(ttft_ms=50, itl_ms=10, itl_per_running_ms=0.5, prefill_ms_per_token=1.0),
                          8, shape)            # w = 200 ms: 8 prefills (1600 ms) outlast a request's own cycle
    assert bound.e2el_mean_ms == 1600 and bound.ttft_mean_ms == 1600 - 49 * 14 and bound.request_rate == 5
    cached = X.closed_loop(cfg, 4, X.Shape(200, 50, cached_tokens=160))
    assert cached.ttft_mean_ms == 50 + 0.05 * 40
    kv = config(ttft_ms=1, itl_ms=1, kv_capacity_tokens=1000)
    assert X.slots(kv, shape) == 4 and X.closed_loop(kv, 6, shape).running == 4


def test_rate_closed_forms_by_hand():
    cfg = config(ttft_ms=50, itl_ms=10, itl_per_running_ms=0.5, prefill_ms_per_token=0.05)
    shape = X.Shape(prompt_tokens=200, output_tokens=50)
    const = X.constant_rate(cfg, 5.0, shape)
    # N = R (t0 + w + (n-1)(a + bN))  =>  N = R (60 + 490) / (1 - R * 49 * 0.5)
    assert const.running == pytest.approx(5 / 1000 * 550 / (1 - 5 / 1000 * 24.5))
    assert const.ttft_p99_ms == const.ttft_mean_ms == 60 and const.tpot_mean_ms == 10 + 0.5 * const.running
    poisson = X.poisson_rate(cfg, 5.0, shape)
    assert poisson.ttft_mean_ms == pytest.approx(60 + 0.05 * 10 / (2 * 0.95)) and poisson.tpot_p99_ms is None
    assert 60 < poisson.ttft_p99_ms <= 70          # at rho = 0.05, 1 % waits for part of one prefill
    assert poisson.tpot_mean_ms == pytest.approx(10 + 0.5 * (1 + poisson.running))
    assert not X.constant_rate(cfg, 100.0, shape).stable               # prefill alone is 10 ms > 1/100 s
    assert not X.constant_rate(config(ttft_ms=1, itl_ms=1, max_running=2), 100.0, shape).stable


PREFILL_BOUND = {"ttft_ms": 50, "itl_ms": 10, "itl_per_running_ms": 0.1, "prefill_ms_per_token": 0.5}
GRAPHS = {"ttft_ms": 50, "itl_ms": 10, "itl_per_running_ms": 0.5, "prefill_ms_per_token": 0.05,
          "captured_batch_sizes": (1, 2, 4, 8, 16), "eager_itl_factor": 1.5}


@pytest.mark.parametrize("arrival", ["constant", "poisson"])
@pytest.mark.parametrize("model,slos", [
    (PREFILL_BOUND, [X.Slo("ttft", "p99", 200)]), (PREFILL_BOUND, [X.Slo("ttft", "mean", 160)]),
    (GRAPHS, [X.Slo("tpot", "mean", 16)]), (GRAPHS, [X.Slo("tpot", "p99", 16)]),
    (GRAPHS, [X.Slo("ttft", "mean", 300), X.Slo("e2el", "mean", 1000)])])
def test_highest_load_meeting_slos_sits_on_the_boundary(arrival, model, slos):
    cfg, shape = config(**model), X.Shape(prompt_tokens=200, output_tokens=50)
    c = X.max_concurrency(cfg, slos, shape)
    assert 0 < c < 4096
    assert X.closed_loop(cfg, c, shape).meets(slos) and not X.closed_loop(cfg, c + 1, shape).meets(slos)
    at = X.constant_rate if arrival == "constant" else X.poisson_rate
    if arrival == "poisson" and any(s.stat == "p99" and s.metric != "ttft" for s in slos):
        with pytest.raises(UsageError):                   # Poisson: means only, but TTFT's p99
            X.max_rate(cfg, slos, shape, arrival)
        return
    rate = X.max_rate(cfg, slos, shape, arrival)
    assert at(cfg, rate, shape).meets(slos) and not at(cfg, rate * 1.001, shape).meets(slos)


def test_the_boundaries_by_hand():
    shape = X.Shape(prompt_tokens=200, output_tokens=50)
    # one prefill is 100 ms; a request's own cycle 150 + 49 (10 + 0.1 C): the queue binds from C = 7 on,
    # where TTFT = 100 C - 49 (10 + 0.1 C): 175.7 ms at 7, 270.8 ms at 8
    assert X.max_concurrency(config(**PREFILL_BOUND), [X.Slo("ttft", "p99", 200)], shape) == 7
    assert X.max_concurrency(config(**GRAPHS), [X.Slo("tpot", "mean", 16)], shape) == 8  # 9 pads to 16: 18 ms
    assert X.max_concurrency(config(**GRAPHS), [X.Slo("tpot", "mean", 18)], shape) == 16  # 17 runs eager
    # constant rate: prefill alone (150 ms), TTFT p99 <= 200 until the queue overflows at 10/s
    assert X.max_rate(config(**PREFILL_BOUND), [X.Slo("ttft", "p99", 200)], shape) == pytest.approx(10, rel=1e-5)


def test_load_model_config_is_checked():
    for bad in ({"captured_batch_sizes": (0, 2)}, {"captured_batch_sizes": ()}, {"eager_itl_factor": 0.5},
                {"itl_per_running_ms": -1}, {"spec_tokens": 2, "tokens_per_chunk": 2}, {"block_size": 0},
                {"spec_accept_text": 1.5}, {"proxy_buffer_bytes": 0}):
        with pytest.raises(UsageError):
            config(**bad)
    cfg = config(captured_batch_sizes=[4, 2], prefix_cache_blocks=8, spec_tokens=2)
    assert type(cfg).from_json(cfg.to_json()) == cfg


# ---- over HTTP: the server's own schedule against the closed form ----

PROMPT, OUT = 100, 12


async def _wave(url, s, n: int) -> list:
    return await asyncio.gather(*[post(s, f"{url}/v1/completions", stream_body(list(range(3, 3 + PROMPT)), OUT))
                                  for _ in range(n)])


def _wave_log(tmp_path, cfg_extra: dict, n: int) -> tuple[list[dict], object]:
    cfg = config(send_log=str(tmp_path / "l"), **cfg_extra)

    async def main():
        async with served(cfg) as (ref, s):
            return await _wave(ref.url, s, n)

    replies = run(main())
    assert all(r.status == 200 and r.lines[-1] == "data: [DONE]" for r in replies)
    return read_log(tmp_path / "l"), cfg


def _steps(rec: dict) -> list[int]:
    return [b - a for a, b in zip(rec["due_ns"], rec["due_ns"][1:], strict=False)]


@pytest.mark.parametrize("n", [1, 4])
def test_a_burst_prefills_in_turn_then_decodes_at_the_batch_itl(tmp_path, n):
    log, cfg = _wave_log(tmp_path, {"ttft_ms": 20, "itl_ms": 5, "itl_per_running_ms": 1.0,
                                    "prefill_ms_per_token": 0.1}, n)
    want = X.closed_loop(cfg, n, X.Shape(PROMPT, OUT))
    ordered = sorted(log, key=lambda r: r["prefill_ns"][0])
    free = 0
    for rec in ordered:                   # FIFO: each starts at its admission or when the one before ends
        start, end = rec["prefill_ns"]
        assert start == max(rec["admitted_ns"], free) and end - start == 10_000_000
        free = end
        assert rec["due_ns"][0] == end + 20_000_000                       # ttft_ms after its prefill
        assert all(w >= d for w, d in zip(rec["write_ns"], rec["due_ns"], strict=True))   # never early
        assert set(_steps(rec)) <= {step_ns(cfg, r) for r in range(1, n + 1)}
        assert statistics.median(_steps(rec)) == want.tpot_mean_ms * 1e6   # the whole batch running
    assert len({r["prefill_ns"][1] - r["prefill_ns"][0] for r in log}) == 1


@pytest.mark.parametrize("n,itl", [(3, 5 + 1.0 * 4), (5, (5 + 1.0 * 5) * 3)])
def test_captured_sizes_pad_the_batch_and_eager_costs_more(tmp_path, n, itl):
    log, cfg = _wave_log(tmp_path, {"ttft_ms": 5, "itl_ms": 5, "itl_per_running_ms": 1.0,
                                    "captured_batch_sizes": (1, 2, 4), "eager_itl_factor": 3}, n)
    want = X.closed_loop(cfg, n, X.Shape(PROMPT, OUT))
    assert want.tpot_mean_ms == itl and want.eager is (n > 4)
    for rec in log:
        assert statistics.median(_steps(rec)) == itl * 1e6


async def _users(url: str, users: int, rounds: int) -> None:
    """A closed loop: each user sends again as soon as its answer ends (X-Session-ID names the user)."""
    async def user(s, u):
        for _ in range(rounds):
            await post(s, f"{url}/v1/completions", stream_body(list(range(3, 3 + PROMPT)), OUT),
                       {"X-Session-ID": f"u{u}"})

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        await asyncio.gather(*[user(s, u) for u in range(users)])


@pytest.mark.parametrize("per_token,bound", [(0.05, False), (0.3, True)])
def test_a_closed_loop_settles_on_its_closed_form(tmp_path, per_token, bound):
    """Past the first round, the server's own schedule is the steady state of expect.closed_loop: with
    a free prefill queue every first token is ttft after admission plus one prefill; with the queue
    binding, it never idles and each user comes back every C prefills. Medians: one stalled client
    turn on a busy host moves one request, not the figure; without a binding queue, the queue's law holds
    for every request and the closed form for each that found it free."""
    users, rounds = 3, 6
    cfg = config(ttft_ms=5, itl_ms=2, prefill_ms_per_token=per_token, send_log=str(tmp_path / "l"))
    want = X.closed_loop(cfg, users, X.Shape(PROMPT, OUT))
    w_ns = int(per_token * PROMPT * 1e6)
    assert (want.e2el_mean_ms == users * w_ns / 1e6) is bound

    async def main():
        async with served(cfg) as (ref, _):
            await _users(ref.url, users, rounds)

    run(main())
    whole = sorted(read_log(tmp_path / "l"), key=lambda r: r["prefill_ns"][0])
    first, log = whole[0], whole[users:]    # the first request meets a free queue; past the first round
    idle = [b["prefill_ns"][0] - a["prefill_ns"][1] for a, b in zip(log, log[1:], strict=False)]
    if bound:
        assert statistics.median(idle) == 0
        for u in range(users):
            starts = [r["prefill_ns"][0] for r in log if r["session_id"] == f"u{u}"]
            assert statistics.median(b - a for a, b in zip(starts, starts[1:], strict=False)) == users * w_ns
    else:    # the queue's law on every request; where it was free (as in the steady state), the closed form
        assert all(r["prefill_ns"][0] >= r["admitted_ns"] and r["prefill_ns"][1] - r["prefill_ns"][0] == w_ns
                   and r["due_ns"][0] == r["prefill_ns"][1] + cfg.ttft_ms * 1e6 for r in log)
        free = [r for r in log if r["prefill_ns"][0] == r["admitted_ns"]] or [first]
        assert all(r["due_ns"][0] - r["admitted_ns"] == want.ttft_mean_ms * 1e6 for r in free)
    assert all(r["due_ns"][-1] - r["due_ns"][0] == (OUT - 1) * want.tpot_mean_ms * 1e6 for r in log)


def test_whole_answers_follow_the_load_model_too(tmp_path):
    cfg = config(ttft_ms=5, itl_ms=2, itl_per_running_ms=1.0, prefill_ms_per_token=0.05,
                 send_log=str(tmp_path / "l"))

    async def main():
        async with served(cfg) as (ref, s):
            body = {**stream_body([7] * 40, 6), "stream": False}
            return await post(s, f"{ref.url}/v1/completions", body)

    assert run(main()).json()["usage"]["completion_tokens"] == 6
    (rec,) = read_log(tmp_path / "l")
    start, end = rec["prefill_ns"]
    assert end - start == 2_000_000 and rec["due_ns"] == [end + 5_000_000 + 5 * 3_000_000]
    assert rec["write_ns"][0] >= rec["due_ns"][0]


def test_without_the_load_model_nothing_changes(tmp_path):
    log, _ = _wave_log(tmp_path, {"ttft_ms": 5, "itl_ms": 1}, 3)
    for rec in log:
        assert rec["due_ns"] is None and rec["prefill_ns"] is None and rec["cached_tokens"] is None
        assert rec["write_ns"][0] >= rec["admitted_ns"] + 5_000_000
