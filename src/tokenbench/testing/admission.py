"""Admission for the reference server: one FIFO queue in front of max_running and KV capacity, then
(under the load model) the FIFO prefill stage.

Strict arrival order: a request that does not fit blocks the ones behind it, as an engine out of
KV does. The admission time is when the TTFT clock starts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from time import perf_counter_ns

from tokenbench.testing.clock import Deadlines
from tokenbench.testing.load_model import PrefillQueue


class Gate:
    def __init__(self, max_running: int | None, kv_capacity: int | None) -> None:
        self.max_running, self.kv_capacity = max_running, kv_capacity
        self.running = self.kv_used = 0
        self.waiting: deque[tuple[int, asyncio.Future]] = deque()

    def _fits(self, need: int) -> bool:
        return ((self.max_running is None or self.running < self.max_running)
                and (self.kv_capacity is None or self.kv_used + need <= self.kv_capacity))

    async def acquire(self, need: int, arrival_ns: int | None = None) -> int:
        """Wait for a slot in arrival order; returns the admission time (perf_counter_ns): the
        arrival time when given and no wait was needed, else the moment the slot was granted."""
        if not self.waiting and self._fits(need):
            self.running, self.kv_used = self.running + 1, self.kv_used + need
            return arrival_ns if arrival_ns is not None else perf_counter_ns()
        fut = asyncio.get_running_loop().create_future()
        self.waiting.append((need, fut))
        try:
            return await fut
        except asyncio.CancelledError:
            self._cancelled(need, fut)
            raise

    def _cancelled(self, need: int, fut: asyncio.Future) -> None:
        if fut.done() and not fut.cancelled():
            self.release(need)  # admitted, then cancelled before it could run
        else:
            with contextlib.suppress(ValueError):
                self.waiting.remove((need, fut))
            self._admit()  # it may have been the head that blocked the others

    def release(self, need: int) -> None:
        self.running, self.kv_used = self.running - 1, self.kv_used - need
        self._admit()

    def _admit(self) -> None:
        while self.waiting and self._fits(self.waiting[0][0]):
            need, fut = self.waiting.popleft()
            if not fut.done():
                self.running, self.kv_used = self.running + 1, self.kv_used + need
                fut.set_result(perf_counter_ns())


class PrefillStage:
    """The load model's prefill queue on the server's deadlines: `await run(t_adm, work_ns)` returns
    (start, end) of that request's prefill (ns, from the queue, not the wake-up time). Requests take
    their turn in the order they reach the stage; one that leaves while waiting keeps its turn."""

    def __init__(self, clock: Deadlines) -> None:
        self.clock, self.queue = clock, PrefillQueue()

    async def run(self, at_ns: int, work_ns: float) -> tuple[int, int]:
        start, end = self.queue.add(at_ns, work_ns)
        await self.clock.until(end)
        return start, end
