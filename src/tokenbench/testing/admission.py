"""Admission for the reference server: one FIFO queue in front of max_running and KV capacity, then
(under the load model) the shared prefill stage.

Strict arrival order: a request that does not fit blocks the ones behind it, as an engine out of
KV does. The admission time is when the TTFT clock starts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from time import perf_counter_ns

from tokenbench.testing.clock import Deadlines
from tokenbench.testing.load_model import SharedPrefill


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
    """The load model's shared prefill on the server's deadlines: `await run(t_adm, work_ns)` returns
    when that request's prefill started and ended (ns; the exact processor-sharing times, not the
    wake-up time). It starts at t_adm, or later if the stage already moved past t_adm (a request
    processed after the stage's last event, though stamped before it)."""

    def __init__(self, clock: Deadlines) -> None:
        self.clock, self.shared = clock, SharedPrefill()
        self.waiters: dict[object, asyncio.Future] = {}
        self.armed: int | None = None

    async def run(self, at_ns: int, work_ns: float) -> tuple[int, int]:
        key, fut = object(), asyncio.get_running_loop().create_future()
        self._finish(self.shared.add(key, at_ns, work_ns))
        start = self.shared.t
        self.waiters[key] = fut
        self._arm()
        try:
            return start, await fut
        except asyncio.CancelledError:
            self.waiters.pop(key, None)
            self._finish(self.shared.remove(key, perf_counter_ns()))
            self._arm()
            raise

    def _arm(self) -> None:
        end = self.shared.next_end()
        if end is not None and end != self.armed:
            self.armed = end
            self.clock.call_at(end, lambda: self._tick(end))

    def _tick(self, end: int) -> None:
        if self.armed != end:
            return  # superseded: later work moved the next end
        self.armed = None
        self._finish(self.shared.advance(end))
        self._arm()

    def _finish(self, done: list[tuple[object, int]]) -> None:
        for key, t_ns in done:
            fut = self.waiters.pop(key, None)
            if fut is not None and not fut.done():
                fut.set_result(t_ns)
