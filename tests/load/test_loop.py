"""Measurements run on uvloop, and a scheduled instant is never reached early (uvloop's timers can fire
up to a millisecond before their time)."""

import asyncio
import random
import time

import uvloop

from tokenbench.load import clock


def test_measurements_run_on_uvloop():
    async def which():
        return asyncio.get_running_loop()
    assert isinstance(clock.run(which()), uvloop.Loop)


def test_sleep_until_never_returns_before_its_instant():
    async def go():
        early = []
        for _ in range(60):
            t = time.perf_counter_ns() + random.randint(100_000, 3_000_000)
            await clock.sleep_until(t)
            early.append(time.perf_counter_ns() < t)
        return early
    assert not any(clock.run(go()))
