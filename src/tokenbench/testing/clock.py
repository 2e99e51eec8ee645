"""Absolute perf_counter_ns deadlines for the reference server, kept on the nanosecond.

asyncio's own timers wait in epoll with whole-millisecond timeouts (up to ~1 ms late); a Linux timerfd
in the same epoll set wakes the loop at the exact nanosecond, with no busy waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import heapq
import os
import time
from collections.abc import Callable
from time import perf_counter_ns


class TimerFd:
    """A Linux timerfd on CLOCK_MONOTONIC (perf_counter_ns's clock), set to absolute nanoseconds."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.timerfd_create(time.CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._spec = (ctypes.c_long * 4)()  # struct itimerspec: interval (0, 0), value (sec, nsec)

    def set(self, due_ns: int) -> None:
        self._spec[2], self._spec[3] = divmod(max(due_ns, 1), 1_000_000_000)
        if self.libc.timerfd_settime(self.fd, 1, self._spec, None) < 0:  # 1 = TFD_TIMER_ABSTIME
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def clear(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self.fd, 8)

    def close(self) -> None:
        os.close(self.fd)


class Deadlines:
    """Runs callbacks at absolute perf_counter_ns deadlines, in deadline order.

    One timer (a timerfd from `make_timer`; asyncio's ms-resolution timer where that fails) is set
    to the earliest deadline. Callbacks are plain functions, so a stream's chunk write costs no task
    switch; a tick runs at most BATCH of them, then lets the loop do I/O before the next batch.
    """

    BATCH = 256

    def __init__(self, make_timer: Callable[[], TimerFd] = TimerFd) -> None:
        self._heap: list[tuple[int, int, Callable[[], object]]] = []
        self._seq = 0
        self._armed: int | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        try:
            self._tfd: TimerFd | None = make_timer()
            self._loop.add_reader(self._tfd.fd, self._tick)
        except (OSError, AttributeError, NotImplementedError):
            self._tfd = None

    def call_at(self, due_ns: int, fn) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due_ns, self._seq, fn))
        if self._armed is None or due_ns < self._armed:
            self._arm(due_ns)

    async def until(self, due_ns: int) -> None:
        if due_ns > perf_counter_ns():
            fut = self._loop.create_future()
            def wake() -> None:
                if not fut.done():
                    fut.set_result(None)
            self.call_at(due_ns, wake)
            await fut

    def _arm(self, due_ns: int) -> None:
        self._armed = due_ns
        if self._tfd is not None:
            self._tfd.set(due_ns)
            return
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self._loop.call_later(max(due_ns - perf_counter_ns(), 0) / 1e9, self._tick)

    def _tick(self) -> None:
        if self._tfd is not None:
            self._tfd.clear()
        self._armed = self._handle = None
        heap, now = self._heap, perf_counter_ns()
        for _ in range(self.BATCH):
            if not heap or heap[0][0] > now:
                break
            heapq.heappop(heap)[2]()
        if heap and heap[0][0] <= perf_counter_ns():
            self._armed = heap[0][0]
            self._loop.call_soon(self._tick)  # more is due: next batch after a turn of I/O
        elif heap:
            self._arm(heap[0][0])

    def close(self) -> None:
        if self._tfd is not None:
            self._loop.remove_reader(self._tfd.fd)
            self._tfd.close()
