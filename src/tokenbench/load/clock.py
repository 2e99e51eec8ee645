"""The clock the load generator schedules on; injectable so schedules are tested without waiting."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def now_ns(self) -> int: ...
    async def sleep_until(self, t_ns: int) -> None: ...


class MonotonicClock:
    """perf_counter_ns (CLOCK_MONOTONIC): the clock every request and sample is stamped with."""

    def now_ns(self) -> int:
        return time.perf_counter_ns()

    async def sleep_until(self, t_ns: int) -> None:
        delay = (t_ns - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
