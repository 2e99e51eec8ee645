
"""Timing is the ground truth: every chunk is written at its absolute deadline, queueing delays admission.

A chunk is never early on any machine; how late it may be is the server's precision on a quiet one plus
what the server waited for a CPU meanwhile (tests/contention.py), since other work on the machine can
delay any process."""

from __future__ import annotations

import asyncio
import os
import time

import aiohttp
import pytest

from tests.contention import Waited
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import config, post, read_log, run, served, stream_body

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test

TTFT_MS, ITL_MS, TOKENS = 20.0, 5.0, 16


def lateness_ms(records: list[dict]) -> list[float]:
    """Write time minus due time (admission + TTFT + index of the chunk's last token * ITL)."""
    out = []
    for rec in records:
        last = -1
        for write_ns, n in zip(rec["write_ns"], rec["tokens"], strict=False):
            last += n
            out.append((write_ns - rec["admitted_ns"] - (TTFT_MS + last * ITL_MS) * 1e6) / 1e6)
    return sorted(out)


async def wave(url: str, concurrency: int, **extra) -> list:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        return await asyncio.gather(*[post(s, f"{url}/v1/completions", stream_body([9] * 8, TOKENS, **extra))
                                      for _ in range(concurrency)])


def quantiles(late: list[float]) -> dict[float, float]:
    return {p: late[int(len(late) * p)] for p in (0.5, 0.75, 0.95)} | {1.0: late[-1]}


def precise(late: list[float], waited_ms: float) -> bool:
    q = quantiles(late)
    return q[0.5] < 0.5 + waited_ms and q[0.75] < 2.0 + waited_ms and q[1.0] < 50.0 + waited_ms


def measured(ref: ReferenceProcess, concurrency: int, rounds: int) -> list[dict]:
    """Run `rounds` waves and return their send-log records (waiting for the log to catch up)."""
    before = len(ref.send_log())
    for _ in range(rounds):
        run(wave(ref.url, concurrency))
    for _ in range(200):
        log = ref.send_log()
        if len(log) >= before + concurrency * rounds:
            return log[before:]
        time.sleep(0.01)
    raise AssertionError("the send log did not catch up")


def test_chunks_leave_at_their_deadlines_at_concurrency_1_and_32():
    cpus = sorted(os.sched_getaffinity(0))
    cfg = ReferenceConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS)
    with ReferenceProcess(cfg, cpu=cpus[-1] if len(cpus) > 1 else None) as ref:
        for concurrency, rounds in ((1, 3), (32, 1)):
            # Other load on the machine can only make writes later, by no more than the server waited
            # for a CPU; the best of three attempts shows its own precision. Never early and no drift
            # must hold in every attempt.
            attempts = []
            for _ in range(3):
                with Waited(ref.proc.pid) as waited:
                    records = measured(ref, concurrency, rounds)
                assert all(r["completion_tokens"] == TOKENS for r in records)
                late = lateness_ms(records)
                assert late[0] >= 0.0, "a chunk left before its deadline"
                firsts = sorted(lateness_ms([{**r, "write_ns": r["write_ns"][:1]} for r in records]))
                lasts = sorted(lateness_ms([{**r, "write_ns": r["write_ns"][-1:], "tokens": [TOKENS]}
                                            for r in records]))
                assert lasts[len(lasts) // 2] < firsts[len(firsts) // 2] + 5.0 + waited.ms, "deadlines drift"
                attempts.append((late, waited.ms))
                if precise(late, waited.ms):
                    break
            best, waited_ms = min(attempts, key=lambda a: quantiles(a[0])[0.75] - a[1])
            shown = ", ".join(f"p{int(p * 100)} {v:.3f}" for p, v in quantiles(best).items())
            print(f"concurrency {concurrency}, lateness ms: {shown}; the server waited {waited_ms:.1f} ms for a "
                  f"CPU ({len(attempts)} attempts)")
            assert precise(best, waited_ms), shown


def test_chunks_of_k_tokens_leave_when_their_last_token_is_due(tmp_path):
    cfg = config(ttft_ms=TTFT_MS, itl_ms=ITL_MS, tokens_per_chunk=4, send_log=str(tmp_path / "l"))

    async def main():
        async with served(cfg) as (ref, s):
            await post(s, f"{ref.url}/v1/completions", stream_body([3, 4], 10))

    with Waited() as waited:                             # the server runs in this process
        run(main())
    (rec,) = read_log(tmp_path / "l")
    assert rec["tokens"] == [4, 4, 2]
    offsets = [(w - rec["admitted_ns"]) / 1e6 for w in rec["write_ns"]]
    for got, due in zip(offsets, [TTFT_MS + 3 * ITL_MS, TTFT_MS + 7 * ITL_MS, TTFT_MS + 9 * ITL_MS], strict=False):
        assert due <= got < due + 5.0 + waited.ms


def test_chunks_written_together_leave_in_one_write_when_the_last_is_due(tmp_path):
    """chunks_per_write 3: chunks 0-2 leave together when chunk 2 is due, each its own SSE event (and token
    chunk) with the write's stamp in the send log; the last write holds what is left."""
    cfg = config(ttft_ms=TTFT_MS, itl_ms=ITL_MS, chunks_per_write=3, send_log=str(tmp_path / "l"))

    async def main():
        async with served(cfg) as (ref, s):
            return await post(s, f"{ref.url}/v1/completions", stream_body([3, 4], 7))

    with Waited() as waited:
        reply = run(main())
    (rec,) = read_log(tmp_path / "l")
    assert rec["tokens"] == [1] * 7 and len(reply.chunks) >= 7
    writes = rec["write_ns"]
    assert writes[0] == writes[1] == writes[2] < writes[3] == writes[4] == writes[5] < writes[6]
    for got, due in zip([writes[0], writes[3], writes[6]], [2, 5, 6], strict=True):
        assert TTFT_MS + due * ITL_MS <= (got - rec["admitted_ns"]) / 1e6 < TTFT_MS + due * ITL_MS + 5.0 + waited.ms
    assert ReferenceConfig(ttft_ms=1, itl_ms=1, chunks_per_write=3).chunks_per_write == 3


def test_an_itl_ramp_moves_the_step_from_itl_ms_to_itl_end_ms(tmp_path):
    """itl_end_ms: the decode step is itl_ms at the first arrival and itl_end_ms once ramp_s has passed."""
    cfg = config(ttft_ms=1, itl_ms=4, itl_end_ms=12, ramp_s=0.3, send_log=str(tmp_path / "l"))

    async def main():
        async with served(cfg) as (ref, s):
            await post(s, f"{ref.url}/v1/completions", stream_body([3], 4))
            await asyncio.sleep(0.4)
            await post(s, f"{ref.url}/v1/completions", stream_body([3], 4))

    with Waited() as waited:
        run(main())
    first, second = read_log(tmp_path / "l")
    steps = [[(b - a) / 1e6 for a, b in zip(r["due_ns"], r["due_ns"][1:], strict=False)] for r in (first, second)]
    assert 4 <= min(steps[0]) and max(steps[0]) < 4 + 8 * (0.05 + waited.ms / 1e3) / 0.3 + 1
    assert steps[1] == [pytest.approx(12, abs=1e-3)] * 3


def test_max_running_queues_in_fifo_and_the_ttft_clock_starts_at_admission(tmp_path):
    cfg = config(ttft_ms=20.0, itl_ms=2.0, max_running=2, send_log=str(tmp_path / "l"))

    async def main():
        async with served(cfg) as (ref, s):
            tasks = [asyncio.create_task(post(s, f"{ref.url}/v1/completions", stream_body([5] * 4, 5)))
                     for _ in range(5)]
            await asyncio.sleep(0.01)
            metrics = await (await s.get(f"{ref.url}/metrics")).text()
            await asyncio.gather(*tasks)
            return metrics

    metrics = run(main())
    assert "reference:num_requests_running{model_name=\"reference-model\"} 2" in metrics
    assert "reference:num_requests_waiting{model_name=\"reference-model\"} 3" in metrics
    log = sorted(read_log(tmp_path / "l"), key=lambda r: r["admitted_ns"])
    assert [r["id"] for r in log] == sorted((r["id"] for r in log), key=lambda i: int(i.split("-")[1]))
    for rec in log:
        running = sum(1 for o in log if o["admitted_ns"] <= rec["admitted_ns"] < o["end_ns"])
        assert running <= 2
        assert rec["write_ns"][0] - rec["admitted_ns"] >= 20e6
    assert log[4]["admitted_ns"] - log[4]["recv_ns"] >= 2 * 28e6 * 0.9  # waited for two waves


def test_kv_capacity_admits_only_what_fits(tmp_path):
    cfg = config(ttft_ms=10.0, itl_ms=1.0, kv_capacity_tokens=100, send_log=str(tmp_path / "l"))

    async def main():
        async with served(cfg) as (ref, s):
            too_big = await post(s, f"{ref.url}/v1/completions", stream_body([5] * 60, 50))
            replies = await asyncio.gather(*[post(s, f"{ref.url}/v1/completions", stream_body([5] * 10, 40))
                                             for _ in range(3)])
            return too_big, replies

    too_big, replies = run(main())
    assert too_big.status == 400 and "KV" in too_big.json()["error"]["message"]
    assert all(r.status == 200 for r in replies)
    log = sorted(read_log(tmp_path / "l"), key=lambda r: r["admitted_ns"])
    assert log[2]["admitted_ns"] >= min(log[0]["end_ns"], log[1]["end_ns"])  # 3 x 50 > 100


def test_without_timerfd_asyncio_timers_still_keep_deadlines(tmp_path, monkeypatch):
    from tokenbench.testing import reference_server

    def unavailable():
        raise OSError("no timerfd here")

    monkeypatch.setattr(reference_server, "_TimerFd", unavailable)
    cfg = config(ttft_ms=TTFT_MS, itl_ms=ITL_MS, send_log=str(tmp_path / "l"))

    async def main():
        async with served(cfg) as (ref, s):
            body = stream_body([3], 6)
            await asyncio.gather(*[post(s, f"{ref.url}/v1/completions", body) for _ in range(4)])

    with Waited() as waited:                             # the server runs in this process
        run(main())
    late = lateness_ms(read_log(tmp_path / "l"))
    assert len(late) == 24 and late[0] >= 0.0 and late[len(late) // 2] < 3.0 + waited.ms  # asyncio: ~1 ms late


def test_a_client_that_leaves_frees_its_slot(tmp_path):
    cfg = config(ttft_ms=5.0, itl_ms=5.0, max_running=1, send_log=str(tmp_path / "l"))

    async def main():
        async with served(cfg) as (ref, s):
            async with s.post(f"{ref.url}/v1/completions", json=stream_body([3], 200)) as resp:
                await resp.content.readline()  # first chunk arrived; now hang up
            await asyncio.sleep(0.05)
            return await post(s, f"{ref.url}/v1/completions", stream_body([3], 3))

    after = run(main())
    assert after.status == 200 and after.lines[-1] == "data: [DONE]"
    gone, ok = read_log(tmp_path / "l")
    assert gone["outcome"] == "client_disconnected" and 0 < gone["completion_tokens"] < 200
    assert ok["outcome"] == "ok" and ok["admitted_ns"] >= gone["end_ns"]
