"""MANY requests over time. Closed loop: C workers, each sends its next request when the previous
ends. Open loop: arrival i is due at t0 + offset_i, launched on that absolute schedule; with a
max-concurrency cap it waits for a slot and the wait is recorded as client queue time.

Only raw exchanges are collected while the cell runs; parsing happens after the last request ended,
so interpretation never steals event-loop time from timestamping.
"""

from __future__ import annotations

import asyncio
import gc
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from tokenbench.client.parse import parse_exchange
from tokenbench.client.records import Phase, RawExchange, RequestRecord
from tokenbench.client.request import PreparedRequest
from tokenbench.load.arrivals import offsets_ns
from tokenbench.load.clock import Clock, MonotonicClock
from tokenbench.load.lag import LoopLagProbe
from tokenbench.metrics.verify import UNREACHABLE_AFTER
from tokenbench.spec.bench import Load

Send = Callable[[PreparedRequest, int], Awaitable[RawExchange]]


@dataclass
class CellRun:
    records: list[RequestRecord]
    client_health: dict




class _Pool:
    """Prepared requests handed out in order; `requests` must hold enough for the cell. After
    UNREACHABLE_AFTER consecutive connection failures it hands out nothing more: the server is gone,
    and sending the rest would only record the same failure (the cell then ends "server unreachable")."""

    def __init__(self, requests: Sequence[PreparedRequest], clock: Clock | None = None) -> None:
        self.requests, self.next, self.clock = requests, 0, clock or MonotonicClock()
        self.connect_failures = 0
        self.exhausted_ns: int | None = None      # when a taker first found every request sent

    def note(self, raw: RawExchange) -> None:
        self.connect_failures = self.connect_failures + 1 if raw.error_kind == "connect" else 0

    def take(self) -> tuple[int, PreparedRequest] | None:
        if self.next >= len(self.requests) and self.exhausted_ns is None:
            self.exhausted_ns = self.clock.now_ns()
        if self.next >= len(self.requests) or self.connect_failures >= UNREACHABLE_AFTER:
            return None
        i, self.next = self.next, self.next + 1
        return i, self.requests[i]


async def _closed_loop(send: Send, pool: _Pool, concurrency: int, deadline_ns: int | None,
                       clock: Clock, out: list, on_done: Callable[[], None]) -> None:
    async def worker() -> None:
        while (deadline_ns is None or clock.now_ns() < deadline_ns) and (item := pool.take()):
            i, req = item
            raw = await send(req, clock.now_ns())
            pool.note(raw)
            out.append((i, req, raw))
            if raw.error_kind == "cancelled":
                raise asyncio.CancelledError
            on_done()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _open_loop(send: Send, pool: _Pool, load: Load, rng: random.Random, clock: Clock,
                     out: list, on_done: Callable[[], None], t0: int, offsets: Sequence[int] | None = None) -> None:
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
        load.request_rate or 0.0, load.arrival, rng, len(pool.requests), load.duration_s, load.burstiness)
    tasks = []
    for off in schedule:
        await clock.sleep_until(t0 + off)
        item = pool.take()
        if item is None:
            break
        tasks.append(asyncio.ensure_future(one(item[0], item[1], t0 + off)))
    await asyncio.gather(*tasks)


def _parse_all(out: list, phase: Phase) -> list[RequestRecord]:
    records = [parse_exchange(raw, req, i, phase) for i, req, raw in out]
    return sorted(records, key=lambda r: r.index)


async def run_phase(send: Send, requests: Sequence[PreparedRequest], load: Load, phase: Phase, *,
                    seed: int = 0, clock: Clock | None = None, start_ns: int | None = None,
                    offsets: Sequence[int] | None = None,
                    on_done: Callable[[], None] = lambda: None) -> CellRun:
    """Run one phase (warmup or measure) of a cell and return parsed records and client health.
    `start_ns` (same clock) lets several worker processes begin the phase at one shared instant.
    `offsets` (open loop, ns): request i is due at t0 + offsets[i] (a trace's arrivals) instead of the
    load's generated arrivals; required for `arrival: trace`."""
    if load.arrival == "trace" and offsets is None:
        raise ValueError("a trace load needs explicit arrival offsets")
    clock = clock or MonotonicClock()
    if start_ns is not None:
        await clock.sleep_until(start_ns)
    pool, probe = _Pool(requests, clock), LoopLagProbe()
    out: list[tuple[int, PreparedRequest, RawExchange]] = []
    gc.collect()
    gc.disable()   # a full collection mid-cell stalls the loop for tens of ms; collect after instead
    probe.start()
    try:
        t0 = clock.now_ns()
        if load.concurrency is not None:
            deadline = t0 + int(load.duration_s * 1e9) if load.duration_s else None
            await _closed_loop(send, pool, load.concurrency, deadline, clock, out, on_done)
        else:
            await _open_loop(send, pool, load, random.Random(seed), clock, out, on_done, t0, offsets)
    finally:
        health = probe.stop()
        gc.enable()
    health.update(_exhausted(pool, load, t0))
    return CellRun(records=_parse_all(out, phase), client_health=health)


def _exhausted(pool: _Pool, load: Load, t0: int) -> dict:
    """A duration cell whose prepared requests ran out before its end: when (seconds after t0)."""
    if not load.duration_s or pool.exhausted_ns is None:
        return {}
    at = (pool.exhausted_ns - t0) / 1e9
    return {"prepared_exhausted_s": at} if at < load.duration_s else {}
