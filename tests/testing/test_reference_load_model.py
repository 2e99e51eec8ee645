"""The load model: ITL by running batch (captured sizes, eager), the shared prefill, and the closed forms
(tokenbench.testing.expect). Over HTTP, the server's own send log (its deadlines, its prefill span) is
compared with the closed form: a busy host can make writes late, never change the schedule."""

from __future__ import annotations

import asyncio
import random
import statistics

import pytest

from tokenbench.errors import UsageError
from tokenbench.testing import expect as X
from tokenbench.testing.load_model import SharedPrefill, itl_ms, padded, step_ns

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


def _ps_by_time_steps(jobs: list[tuple[float, float]], dt: float) -> list[float]:
    """An independent oracle: processor sharing advanced in small time steps (ends within ~n*dt)."""
    left, ends, t = [w for _, w in jobs], [0.0] * len(jobs), 0.0
    while any(ends[i] == 0.0 for i in range(len(jobs))):
        active = [i for i, (a, _) in enumerate(jobs) if a <= t and ends[i] == 0.0]
        for i in active:
            left[i] -= dt / len(active)
            if left[i] <= 1e-9:
                ends[i] = t + dt
        t += dt
    return ends


def test_shared_prefill_is_processor_sharing():
    rng = random.Random(3)
    jobs = sorted(((rng.uniform(0, 40e3), rng.uniform(1e3, 15e3)) for _ in range(6)), key=lambda j: j[0])
    ps, ends = SharedPrefill(), {}
    for i, (at, work) in enumerate(jobs):
        ends.update(ps.add(i, int(at), work))
    ends.update(ps.advance(10**9))
    oracle = _ps_by_time_steps(jobs, dt=10.0)
    assert all(abs(ends[i] - oracle[i]) <= 6 * 10.0 + 1 for i in range(len(jobs)))
    together = SharedPrefill()
    for k in range(4):
        together.add(k, 1000, 5e6)
    assert together.advance(10**12) == [(k, 1000 + 20_000_000) for k in range(4)]   # 4 x 5 ms, all at once


def test_poisson_prefill_mean_is_m_g_1_processor_sharing():
    """The closed form's TTFT under Poisson arrivals, checked on the stage itself (seeded, no clock)."""
    rng, work_ms, rate = random.Random(7), 10.0, 60.0            # rho = 0.6
    ps, t, starts, ends = SharedPrefill(), 0.0, {}, {}
    for i in range(20000):
        t += rng.expovariate(rate / 1000.0)
        starts[i] = int(t * 1e6)
        ends.update(ps.add(i, starts[i], work_ms * 1e6))
    ends.update(ps.advance(10**15))
    mean_ms = statistics.fmean((ends[i] - starts[i]) / 1e6 for i in starts)
    shape = X.Shape(prompt_tokens=100, output_tokens=2)
    expected = X.poisson_rate(config(ttft_ms=0, itl_ms=1, prefill_ms_per_token=0.1), rate, shape).ttft_mean_ms
    assert expected == pytest.approx(work_ms / 0.4)
    assert mean_ms == pytest.approx(expected, rel=0.05)


def test_closed_loop_closed_forms_by_hand():
    cfg = config(ttft_ms=50, itl_ms=10, itl_per_running_ms=0.5, prefill_ms_per_token=0.05, max_running=16)
    shape = X.Shape(prompt_tokens=200, output_tokens=50)
    four = X.closed_loop(cfg, 4, shape)
    assert (four.ttft_mean_ms, four.tpot_mean_ms) == (50 + 0.05 * 4 * 200, 10 + 0.5 * 4)
    assert four.e2el_mean_ms == four.ttft_p99_ms + 49 * 12 and four.running == 4
    wave = 50 + 0.05 * 16 * 200 + 49 * 18
    over = X.closed_loop(cfg, 20, shape)       # 16 run, 4 wait: a quarter of requests wait one wave
    assert over.ttft_mean_ms == pytest.approx(210 + 4 / 16 * wave) and over.ttft_p99_ms == 210 + wave
    assert over.request_rate == pytest.approx(16 / wave * 1000) and over.tpot_mean_ms == 18
    cached = X.closed_loop(cfg, 4, X.Shape(200, 50, cached_tokens=160))
    assert cached.ttft_mean_ms == 50 + 0.05 * 4 * 40
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
    assert poisson.ttft_mean_ms == pytest.approx(50 + 10 / (1 - 0.05)) and poisson.ttft_p99_ms is None
    assert poisson.tpot_mean_ms == pytest.approx(10 + 0.5 * (1 + poisson.running))
    assert not X.constant_rate(cfg, 100.0, shape).stable               # prefill alone is 10 ms > 1/100 s
    assert not X.constant_rate(config(ttft_ms=1, itl_ms=1, max_running=2), 100.0, shape).stable


@pytest.mark.parametrize("arrival", ["constant", "poisson"])
def test_highest_load_meeting_slos_sits_on_the_boundary(arrival):
    cfg = config(ttft_ms=50, itl_ms=10, itl_per_running_ms=0.5, prefill_ms_per_token=0.05,
                 captured_batch_sizes=(1, 2, 4, 8, 16), eager_itl_factor=1.5)
    shape = X.Shape(prompt_tokens=200, output_tokens=50)
    for slos in ([X.Slo("ttft", "p99", 200)], [X.Slo("tpot", "mean", 16)],
                 [X.Slo("ttft", "mean", 300), X.Slo("e2el", "mean", 1500)]):
        c = X.max_concurrency(cfg, slos, shape)
        assert X.closed_loop(cfg, c, shape).meets(slos) and not X.closed_loop(cfg, c + 1, shape).meets(slos)
        at = X.constant_rate if arrival == "constant" else X.poisson_rate
        if arrival == "poisson" and slos[0].stat == "p99":
            with pytest.raises(UsageError):                   # Poisson: means only
                X.max_rate(cfg, slos, shape, arrival)
            continue
        rate = X.max_rate(cfg, slos, shape, arrival)
        assert at(cfg, rate, shape).meets(slos) and not at(cfg, rate * 1.001, shape).meets(slos)
    assert X.max_concurrency(cfg, [X.Slo("ttft", "p99", 200)], shape) == 15     # 50 + 0.05*200*C <= 200
    assert X.max_concurrency(cfg, [X.Slo("tpot", "mean", 16)], shape) == 8      # 9 is padded to 16: 18 ms


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
def test_a_wave_prefills_together_then_decodes_at_the_batch_itl(tmp_path, n):
    log, cfg = _wave_log(tmp_path, {"ttft_ms": 20, "itl_ms": 5, "itl_per_running_ms": 1.0,
                                    "prefill_ms_per_token": 0.1}, n)
    starts = [r["prefill_ns"][0] for r in log]
    # a burst's arrivals are not one instant: a head start of d lets a request end up to (n-1)d earlier
    slack = n * (max(starts) - min(starts)) + 1
    want = X.closed_loop(cfg, n, X.Shape(PROMPT, OUT))
    for rec in log:
        start, end = rec["prefill_ns"]
        assert start >= rec["admitted_ns"] and abs(end - start - (want.ttft_mean_ms - 20) * 1e6) <= slack
        assert rec["due_ns"][0] == end + 20_000_000                       # ttft_ms after the prefill
        assert all(w >= d for w, d in zip(rec["write_ns"], rec["due_ns"], strict=True))   # never early
        allowed = {step_ns(cfg, r) for r in range(1, n + 1)}
        assert set(_steps(rec)) <= allowed
        assert statistics.median(_steps(rec)) == want.tpot_mean_ms * 1e6   # the whole batch running


@pytest.mark.parametrize("n,itl", [(3, 5 + 1.0 * 4), (5, (5 + 1.0 * 5) * 3)])
def test_captured_sizes_pad_the_batch_and_eager_costs_more(tmp_path, n, itl):
    log, cfg = _wave_log(tmp_path, {"ttft_ms": 5, "itl_ms": 5, "itl_per_running_ms": 1.0,
                                    "captured_batch_sizes": (1, 2, 4), "eager_itl_factor": 3}, n)
    want = X.closed_loop(cfg, n, X.Shape(PROMPT, OUT))
    assert want.tpot_mean_ms == itl and want.eager is (n > 4)
    for rec in log:
        assert statistics.median(_steps(rec)) == itl * 1e6


def test_the_slo_boundary_of_the_closed_form_holds_in_the_server_schedule(tmp_path):
    """max_concurrency for a TTFT limit: at C* every scheduled first token is within it, at C*+1 none is."""
    extra = {"ttft_ms": 10, "itl_ms": 2, "prefill_ms_per_token": 0.2}
    limit = 10 + 0.2 * PROMPT * 3.5
    c = X.max_concurrency(config(**extra), [X.Slo("ttft", "p99", limit)], X.Shape(PROMPT, OUT))
    assert c == 3
    for n, meets in ((c, True), (c + 1, False)):
        log, _ = _wave_log(tmp_path, extra, n)
        slack = n * (max(r["prefill_ns"][0] for r in log) - min(r["prefill_ns"][0] for r in log)) / 1e6
        ttfts = [(r["due_ns"][0] - r["prefill_ns"][0]) / 1e6 for r in log]
        assert all((t <= limit + slack if meets else t > limit - slack) for t in ttfts), (n, ttfts)


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
