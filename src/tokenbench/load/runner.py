"""MANY requests over time. Closed loop: C workers, each sends its next request when the previous
ends. Open loop: arrival i is due at t0 + offset_i, launched on that absolute schedule; with a
max-concurrency cap it waits for a slot and the wait is recorded as client queue time.

A finished exchange is reduced to its record and its raw bytes dropped while the cell runs, so memory
follows the requests in flight, not those finished: once PENDING_MAX finished exchanges wait, a
background task parses them in order, in slices of READS_PER_SLICE body reads, for at most
SLICE_BUDGET_NS per event-loop iteration, so a read that arrives meanwhile is stamped after at most that
budget (0.5 ms) plus one slice, never after a whole batch; once PENDING_HARD (or the requests in
flight, if more) wait, the load itself waits for the parser (back-pressure: later sends, recorded as
such, instead of memory); the rest are parsed when the phase ends (a small cell parses nothing while
it runs, so its client competes with nothing for the CPU while the server takes a request in). Garbage collection: objects alive at the start are frozen and full
(oldest-generation) collections are held off until the phase ends, while the cheap young collections
keep running, so cycles made mid-cell are still freed and no collection walks the heap.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from tokenbench.client.parse import parse_steps
from tokenbench.client.records import Phase, RawExchange, RequestRecord
from tokenbench.client.request import PreparedRequest
from tokenbench.load.arrivals import offsets_ns
from tokenbench.load.clock import Clock, MonotonicClock
from tokenbench.load.lag import LoopLagProbe
from tokenbench.metrics.summary_groups import ClientHealth
from tokenbench.metrics.verify import UNREACHABLE_AFTER
from tokenbench.spec.bench import Load

Send = Callable[[PreparedRequest, int], Awaitable[RawExchange]]
Sink = Callable[[RequestRecord], None]
RawSink = Callable[[int, Phase, RawExchange], None]     # --keep-raw: each exchange before it is parsed
NO_FULL_GC = 1 << 30          # oldest-generation threshold while a phase runs (never reached)
READS_PER_SLICE = 8           # body reads parsed per event-loop iteration (a few tens of microseconds)
PENDING_MAX = 256             # finished exchanges left unparsed before the reducer starts on them
PENDING_HARD = 512            # ... and before the load waits for the reducer (a client short of CPU): about
                              # 10 MB; never fewer than the requests in flight (their exchanges end together)
SLICE_BUDGET_NS = 500_000     # parse time per event-loop iteration while finished exchanges wait


@dataclass
class CellRun:
    records: list[RequestRecord]
    client_health: ClientHealth
    stopped: bool = False         # the user stopped the phase (Ctrl-C); what finished before is kept




class _Pool:
    """Requests handed out in order, taken from `requests` only when due (an iterator may produce them
    lazily: a cell of any length holds only the requests in flight). After UNREACHABLE_AFTER consecutive
    connection failures it hands out nothing more: the server is gone, and sending the rest would only
    record the same failure (the cell then ends "server unreachable")."""

    def __init__(self, requests: Iterable[PreparedRequest], clock: Clock | None = None) -> None:
        self.count = len(requests) if isinstance(requests, Sequence) else None
        self.requests, self.next, self.clock = iter(requests), 0, clock or MonotonicClock()
        self.connect_failures = 0
        self.exhausted_ns: int | None = None      # when a taker first found every request sent

    def note(self, raw: RawExchange) -> None:
        self.connect_failures = self.connect_failures + 1 if raw.error_kind == "connect" else 0

    def take(self) -> tuple[int, PreparedRequest] | None:
        if self.connect_failures >= UNREACHABLE_AFTER or self.exhausted_ns is not None:
            return None
        req = next(self.requests, None)
        if req is None:
            self.exhausted_ns = self.clock.now_ns()
            return None
        i, self.next = self.next, self.next + 1
        return i, req


async def _closed_loop(send: Send, pool: _Pool, concurrency: int, deadline_ns: int | None,
                       clock: Clock, out: _Reducer, on_done: Callable[[], None]) -> None:
    async def worker() -> None:
        while (deadline_ns is None or clock.now_ns() < deadline_ns) and await out.room() and (item := pool.take()):
            i, req = item
            raw = await send(req, clock.now_ns())
            pool.note(raw)
            out.append((i, req, raw))
            if raw.error_kind == "cancelled":
                raise asyncio.CancelledError
            on_done()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _open_loop(send: Send, pool: _Pool, load: Load, rng: random.Random, clock: Clock,
                     out: _Reducer, on_done: Callable[[], None], t0: int, offsets: Sequence[int] | None = None) -> None:
    slots = asyncio.Semaphore(load.max_concurrency) if load.max_concurrency else None

    async def one(i: int, req: PreparedRequest, intended: int) -> None:
        if slots is None:
            raw = await send(req, intended)
        else:
            async with slots:
                raw = await send(req, intended)
        pool.note(raw)
        out.append((i, req, raw))
        on_done()

    schedule: Iterable[int] = offsets if offsets is not None else offsets_ns(
        load.request_rate or 0.0, load.arrival, rng, pool.count, load.duration_s, load.burstiness)
    tasks: set[asyncio.Future] = set()
    try:
        for off in schedule:
            await clock.sleep_until(t0 + off)
            await out.room()
            item = pool.take()
            if item is None:
                break
            sending = asyncio.ensure_future(one(item[0], item[1], t0 + off))
            tasks.add(sending)
            sending.add_done_callback(tasks.discard)       # a soak keeps only the requests in flight
        await asyncio.gather(*tasks)
    except asyncio.CancelledError:
        for left in tasks:
            left.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class _Reducer:
    """Finished exchanges -> records, one per loop iteration, handed to `sink` (default: kept)."""

    def __init__(self, phase: Phase, sink: Sink | None, hard: int = PENDING_HARD, raw_sink: RawSink | None = None) -> None:
        self.phase, self.queue, self.wake = phase, deque[tuple[int, PreparedRequest, RawExchange]](), asyncio.Event()
        self.records: list[RequestRecord] = []
        self.sink: Sink = sink or self.records.append
        self.closed = False
        self.current: Iterator[RequestRecord | None] | None = None
        self.hard, self.roomy = hard, asyncio.Event()
        self.raw_sink = raw_sink

    @property
    def pending(self) -> bool:
        return bool(self.queue) or self.current is not None

    def append(self, item: tuple[int, PreparedRequest, RawExchange]) -> None:
        self.queue.append(item)
        if len(self.queue) >= PENDING_MAX:
            self.wake.set()

    async def room(self) -> bool:
        """Wait while `hard` finished exchanges wait to be parsed: a client that cannot parse as fast as
        requests finish sends later (recorded: lower sustained concurrency, or send lateness) instead
        of holding every unparsed exchange in memory. One wake per episode (the reducer sets `roomy`
        once the queue is down to half). Always True (for use in a condition)."""
        while len(self.queue) >= self.hard and not self.closed:
            self.wake.set()
            self.roomy.clear()
            await self.roomy.wait()
        return True

    async def run(self) -> None:
        while True:
            while self.pending:
                await self._drain()
            if self.closed:
                return
            self.wake.clear()
            await self.wake.wait()

    async def _drain(self) -> None:
        """Slices for up to SLICE_BUDGET_NS per loop iteration (so the reduction keeps up with the
        requests finishing even when each iteration has many reads to stamp), then yield."""
        end = time.perf_counter_ns() + SLICE_BUDGET_NS
        while self.pending:                      # at least one step per iteration, whatever the budget
            if self.current is None:
                i, req, raw = self.queue.popleft()
                if len(self.queue) <= self.hard // 2:
                    self.roomy.set()
                if self.raw_sink is not None:
                    self.raw_sink(i, self.phase, raw)
                self.current = parse_steps(raw, req, i, self.phase, READS_PER_SLICE)
            rec = next(self.current)
            if rec is not None:
                self.sink(rec)
                self.current = None
            if time.perf_counter_ns() >= end:
                break
        await asyncio.sleep(0)

    async def close(self, task: asyncio.Task) -> list[RequestRecord]:
        self.closed = True
        self.wake.set()
        self.roomy.set()
        await task
        return sorted(self.records, key=lambda r: r.index)


@contextmanager
def _young_gc_only() -> Iterator[None]:
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], NO_FULL_GC)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


async def run_phase(send: Send, requests: Iterable[PreparedRequest], load: Load, phase: Phase, *,
                    seed: int = 0, clock: Clock | None = None, start_ns: int | None = None,
                    offsets: Sequence[int] | None = None,
                    on_done: Callable[[], None] = lambda: None, sink: Sink | None = None,
                    stoppable: bool = False, raw_sink: RawSink | None = None) -> CellRun:
    """Run one phase (warmup or measure) of a cell and return parsed records and client health.
    `start_ns` (same clock) lets several worker processes begin the phase at one shared instant.
    `offsets` (open loop, ns): request i is due at t0 + offsets[i] (a trace's arrivals) instead of the
    load's generated arrivals; required for `arrival: trace`. `sink`: each record as soon as it is
    parsed (then the returned CellRun holds none). `requests` may be a lazy iterator (a duration cell
    takes as many as its duration needs). `stoppable`: a cancellation (Ctrl-C) ends the phase early and
    returns what finished (requests cut off are recorded as `cancelled`), with `stopped` set.
    `raw_sink`: each exchange (index, phase, raw bytes) just before it is parsed (--keep-raw)."""
    if load.arrival == "trace" and offsets is None:
        raise ValueError("a trace load needs explicit arrival offsets")
    clock = clock or MonotonicClock()
    if start_ns is not None:
        await clock.sleep_until(start_ns)
    pool, probe = _Pool(requests, clock), LoopLagProbe()
    out = _Reducer(phase, sink, max(PENDING_HARD, load.concurrency or load.max_concurrency or 0), raw_sink)
    stopped = False
    with _young_gc_only():
        reducing = asyncio.ensure_future(out.run())
        probe.start()
        t0 = clock.now_ns()
        try:
            if load.concurrency is not None:
                deadline = t0 + int(load.duration_s * 1e9) if load.duration_s else None
                await _closed_loop(send, pool, load.concurrency, deadline, clock, out, on_done)
            else:
                await _open_loop(send, pool, load, random.Random(seed), clock, out, on_done, t0, offsets)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not stoppable or task is None:
                raise
            task.uncancel()
            stopped = True
        finally:
            health = probe.stop()
            records = await out.close(reducing)
    health = health.model_copy(update=_exhausted(pool, load, t0))
    if stopped:
        health = health.model_copy(update={"stopped_after_s": (clock.now_ns() - t0) / 1e9})
    return CellRun(records=records, client_health=health, stopped=stopped)


def _exhausted(pool: _Pool, load: Load, t0: int) -> dict:
    """A duration cell whose prepared requests ran out before its end: when (seconds after t0)."""
    if not load.duration_s or pool.exhausted_ns is None:
        return {}
    at = (pool.exhausted_ns - t0) / 1e9
    return {"prepared_exhausted_s": at} if at < load.duration_s else {}
