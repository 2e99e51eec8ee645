"""MANY requests over time. Closed loop: C workers, each sends its next request when the previous
ends. Open loop: arrival i is due at t0 + offset_i, launched on that absolute schedule; with a
max-concurrency cap it waits for a slot and the wait is recorded as client queue time. Sessions (a
sessions workload): U users each take a conversation and send its turns one after the other, turn k+1
made from turn k's answer and due the user's think time after that answer ended (its intended time: a
late send is queue time), then take the next conversation (closed loop); or conversations start on an
open-loop schedule of session arrivals. Every request of every mode goes the same way: sent, handed
to the reducer, parsed into a record.

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
import itertools
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from tokenbench.client.parse import parse_steps
from tokenbench.client.records import Phase, RawExchange, RequestRecord
from tokenbench.client.request import PreparedRequest
from tokenbench.load.arrivals import arrivals_of, offsets_ns
from tokenbench.load.clock import Clock, MonotonicClock
from tokenbench.load.lag import LoopLagProbe
from tokenbench.metrics.summary_groups import ClientHealth
from tokenbench.metrics.tally import UNREACHABLE_AFTER, SlotWaits
from tokenbench.spec.bench import Load, SessionWindow

if TYPE_CHECKING:                    # a sessions cell's turns (workload/sessions.py): only a sessions cell runs them
    from tokenbench.workload.sessions import NextTurn

T = TypeVar("T")
Send = Callable[[PreparedRequest, int], Awaitable[RawExchange]]
OnRecord = Callable[[RequestRecord], None]
OnRaw = Callable[[int, Phase, RawExchange], None]     # --keep-raw: each exchange before it is parsed
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
    slot_waits: SlotWaits = field(default_factory=SlotWaits)   # open loop: sends that waited for a free slot


def stopped_before(warmup: CellRun) -> CellRun:
    """The cell's run when the user stopped it during its warmup: nothing measured (the warmup's
    records went to their outlet)."""
    return CellRun([], warmup.client_health, stopped=True)


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class PhasePlan:
    """One phase of a cell (warmup or measure): its load and how it starts."""

    name: Phase
    load: Load
    seed: int = 0                             # of the open loop's generated arrivals
    offsets: Sequence[int] | None = None      # open loop, ns: request i due at t0 + offsets[i] (a trace's arrivals)
    start_ns: int | None = None               # t0 of the phase, chosen by the coordinator (same clock): several
                                              # workers share it, so they send the slots of ONE schedule
    stoppable: bool = False                   # a cancellation (Ctrl-C) ends the phase with what finished


@dataclass(frozen=True)
class Outlets:
    """Where a phase's results go as they come (all optional)."""

    record: OnRecord | None = None            # each record as soon as it is parsed (the CellRun then holds none)
    raw: OnRaw | None = None                  # each exchange (index, phase, raw bytes) before it is parsed
    done: Callable[[], None] = _nothing       # after each request


class Session(Protocol):
    """One conversation the runner drives (workload/sessions.Conversation): its first turn, then each next
    turn made from the previous answer (None: the session is over); `cut` when the cell ends first."""

    def first(self) -> PreparedRequest: ...
    async def after(self, raw: RawExchange) -> NextTurn | None: ...
    def cut(self) -> None: ...


@dataclass
class Cutoff:
    """Where a sessions cell's measured window ends (spec/bench.Load.window): once every session has started,
    the end of the first one that finishes (MLCommons' performance window: `end_ns`, found in every mode).
    Under `first-user` a turn sent after it is stored but not measured; under `first-user-stop` none is sent
    after it either (the sessions cut are counted); under `all` every turn is measured."""

    mode: SessionWindow = "all"
    end_ns: int | None = None
    all_started: bool = False

    def close(self, now_ns: int) -> None:
        if self.end_ns is None:
            self.end_ns = now_ns

    def ended(self, now_ns: int) -> None:
        """A session ended at `now_ns`: once every one has started, the window ends at the first such end."""
        if self.all_started:
            self.close(now_ns)

    def stops(self, now_ns: int) -> bool:
        """No turn is to be sent at `now_ns` (first-user-stop, past the window's end)."""
        return self.mode == "first-user-stop" and self.end_ns is not None and now_ns > self.end_ns

    def measured(self, r: RequestRecord) -> bool:
        return self.mode == "all" or self.end_ns is None or r.sent_ns <= self.end_ns


@dataclass
class Sessions:
    """A sessions cell's measured work: its conversations, taken by users (closed loop) or started on a
    schedule of session arrivals (open loop), and where its measured window ends."""

    items: Iterable[Session]
    count: int | None                 # sessions; None: as many as the duration takes
    cutoff: Cutoff = field(default_factory=Cutoff)


Work = Iterable[PreparedRequest] | Sessions


@dataclass(kw_only=True)
class Phases:
    """A cell's requests as an executor takes them (load/executors.py): the warmup, with its own closed-loop
    load (None: no warmup phase), then the measured phase under the cell's load."""

    key: str                                  # the cell's key (names it in a --keep-raw file)
    warmup: list[PreparedRequest]
    warmup_load: Load | None
    measure: Work                             # lazily made for random and trace prompts; sessions: conversations
    load: Load
    seed: int
    count: int | None                         # measured requests prepared; None: as many as the duration takes
    limit: int                                # ... at most, when they are dealt out before the cell (workers)
    offsets: list[int] | None = None          # a trace's arrivals, ns after the phase's start

    def warmup_plan(self) -> PhasePlan | None:
        if not self.warmup or self.warmup_load is None:
            return None
        return PhasePlan("warmup", self.warmup_load, stoppable=True)

    def measure_plan(self) -> PhasePlan:
        return PhasePlan("measure", self.load, self.seed, self.offsets, stoppable=True)


class _Pool(Generic[T]):
    """Requests (or sessions) handed out in order, taken from `requests` only when due (an iterator may
    produce them lazily: a cell of any length holds only the requests in flight). After UNREACHABLE_AFTER
    consecutive connection failures it hands out nothing more: the server is gone, and sending the rest
    would only record the same failure (the cell then ends "server unreachable")."""

    def __init__(self, requests: Iterable[T], clock: Clock | None = None, count: int | None = None) -> None:
        self.count = len(requests) if isinstance(requests, Sequence) else count
        self.requests, self.next, self.clock = iter(requests), 0, clock or MonotonicClock()
        self.connect_failures = 0
        self.exhausted_ns: int | None = None      # when a taker first found every request sent

    def note(self, raw: RawExchange) -> None:
        self.connect_failures = self.connect_failures + 1 if raw.error_kind == "connect" else 0

    @property
    def gone(self) -> bool:
        return self.connect_failures >= UNREACHABLE_AFTER

    def take(self) -> tuple[int, T] | None:
        if self.gone or self.exhausted_ns is not None:
            return None
        req = next(self.requests, None)
        if req is None:
            self.exhausted_ns = self.clock.now_ns()
            return None
        i, self.next = self.next, self.next + 1
        return i, req


@dataclass(kw_only=True)
class _Sender:
    """What both loops share: the send, the requests, the clock, where exchanges go, the progress call."""

    send: Send
    pool: _Pool
    clock: Clock
    out: _Reducer
    on_done: Callable[[], None]
    waits: SlotWaits = field(default_factory=SlotWaits)
    numbers: Iterator[int] = field(default_factory=itertools.count)   # request indices (sessions)
    cutoff: Cutoff = field(default_factory=Cutoff)                      # sessions: the measured window

    async def closed_loop(self, concurrency: int, deadline_ns: int | None) -> None:
        async def worker() -> None:
            clock, pool, out = self.clock, self.pool, self.out
            while (deadline_ns is None or clock.now_ns() < deadline_ns) and await out.room() and (item := pool.take()):
                i, req = item
                raw = await self.send(req, clock.now_ns())
                pool.note(raw)
                out.append((i, req, raw))
                if raw.error_kind == "cancelled":
                    raise asyncio.CancelledError
                self.on_done()

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    async def _send_due(self, slots: asyncio.Semaphore | None, i: int, req: PreparedRequest, intended: int) -> None:
        if slots is None:
            raw = await self.send(req, intended)
        else:
            asked = self.clock.now_ns() if slots.locked() else None
            async with slots:
                if asked is not None:
                    self.waits.add(self.clock.now_ns() - asked)
                raw = await self.send(req, intended)
        self.pool.note(raw)
        self.out.append((i, req, raw))
        self.on_done()

    async def _acquire(self, gate: asyncio.Semaphore) -> int:
        """Take a slot for the schedule (rate_cap gate); a wait for one is counted as a slot wait. When."""
        asked = self.clock.now_ns() if gate.locked() else None
        await gate.acquire()
        now = self.clock.now_ns()
        if asked is not None:
            self.waits.add(now - asked)
        return now

    async def _gated(self, slots: asyncio.Semaphore, i: int, req: PreparedRequest, intended: int) -> None:
        """A request whose slot the schedule already took (rate_cap gate): send it, then free the slot."""
        try:
            raw = await self.send(req, intended)
        finally:
            slots.release()
        self.pool.note(raw)
        self.out.append((i, req, raw))
        self.on_done()

    async def open_loop(self, load: Load, schedule: Iterable[int], t0: int) -> None:
        """Arrival i is due at t0 + offset_i. With a cap, `queue` (vLLM, SGLang) lets it wait for a slot
        while later arrivals keep their times; `gate` (AIPerf) makes the schedule itself wait for a slot and
        shifts every later arrival by that wait (no catch-up). Either way the wait is the request's queue time."""
        slots = asyncio.Semaphore(load.max_concurrency) if load.max_concurrency else None
        gate = slots if load.rate_cap == "gate" else None
        if gate is not None:
            await self._arrivals(schedule, t0, lambda item, due: self._gated(gate, item[0], item[1], due), gate)
        else:
            await self._arrivals(schedule, t0, lambda item, due: self._send_due(slots, item[0], item[1], due))

    async def users(self, load: Load, deadline_ns: int | None, t0: int) -> None:
        """Closed loop of sessions: each user takes a conversation, sends its turns one after the other, then
        takes the next; user u starts at t0 + u x ramp / users."""
        n, ramp = load.users or 1, int((load.ramp_up_s or 0) * 1e9)

        async def user(u: int) -> None:
            due = t0 + ramp * u // n                   # the user's start; then each time a session ends
            await self.clock.sleep_until(due)
            ran = False
            while self._before(deadline_ns, due) and await self.out.room() and (item := self.pool.take()):
                await self._converse(item[1], due, deadline_ns)
                due, ran = self.clock.now_ns(), True
            if self.pool.exhausted_ns is not None:     # every session has started
                self.cutoff.all_started = True
                if ran:                                # ... and this user's last one ended: the first ends the window
                    self.cutoff.close(due)

        await asyncio.gather(*(user(u) for u in range(n)))

    async def session_starts(self, schedule: Iterable[int], t0: int, deadline_ns: int | None) -> None:
        """Open loop of sessions: conversation i starts at t0 + schedule[i], whatever the others do."""

        def all_started() -> None:
            self.cutoff.all_started = True

        await self._arrivals(schedule, t0, lambda item, due: self._converse(item[1], due, deadline_ns), then=all_started)

    @staticmethod
    def _before(deadline_ns: int | None, t: int) -> bool:
        return deadline_ns is None or t < deadline_ns

    async def _converse(self, session: Session, intended: int, deadline_ns: int | None) -> None:
        """One conversation: each turn sent when due (the previous answer's end + the think time), its
        exchange handed on like any request's, the next turn made from it."""
        req = session.first()
        while True:
            i = next(self.numbers)
            raw = await self.send(req, intended)
            self.pool.note(raw)
            self.out.append((i, req, raw))
            if raw.error_kind == "cancelled":
                raise asyncio.CancelledError
            self.on_done()
            turn = await session.after(raw)
            if turn is None:
                self.cutoff.ended(raw.end_ns)
                return
            intended = raw.end_ns + turn.think_ns
            if self.pool.gone or not self._before(deadline_ns, intended) or self.cutoff.stops(intended):
                session.cut()
                return
            await self.clock.sleep_until(intended)
            await self.out.room()
            if self.cutoff.stops(self.clock.now_ns()):
                session.cut()
                return
            req = turn.request

    async def _arrivals(self, schedule: Iterable[int], t0: int, start: Callable[[tuple[int, Any], int], Awaitable[None]],
                        gate: asyncio.Semaphore | None = None, then: Callable[[], None] = _nothing) -> None:
        """Take the next item at each arrival t0 + offset and start it there (a task per item); with a
        `gate`, the schedule waits for a slot and every later arrival shifts by that wait; `then` once every
        item has started."""
        tasks: set[asyncio.Future] = set()
        shift = 0
        try:
            for off in schedule:
                due = t0 + off + shift
                await self.clock.sleep_until(due)
                await self.out.room()
                item = self.pool.take()
                if item is None:
                    break
                if gate is not None:
                    shift = max(shift, await self._acquire(gate) - t0 - off)
                sending = asyncio.ensure_future(start(item, due))
                tasks.add(sending)
                sending.add_done_callback(tasks.discard)       # a soak keeps only the requests in flight
            then()
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            for left in tasks:
                left.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise


class _Reducer:
    """Finished exchanges -> records, one per loop iteration, handed to the record outlet (default: kept)."""

    def __init__(self, phase: Phase, outlets: Outlets, hard: int = PENDING_HARD) -> None:
        self.phase, self.queue, self.wake = phase, deque[tuple[int, PreparedRequest, RawExchange]](), asyncio.Event()
        self.records: list[RequestRecord] = []
        self.sink: OnRecord = outlets.record or self.records.append
        self.closed = False
        self.current: Iterator[RequestRecord | None] | None = None
        self.hard, self.roomy = hard, asyncio.Event()
        self.raw_sink = outlets.raw

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
    gc.collect(1)             # the young garbage; a full collection here walked the whole heap (70 ms)
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], NO_FULL_GC)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _pool(work: Work, load: Load, clock: Clock) -> _Pool:
    """The phase's pool: its requests, or (a sessions load) its conversations."""
    if isinstance(work, Sessions) != load.sessions:
        raise ValueError("a sessions load runs conversations (Sessions), and only a sessions load does")
    if isinstance(work, Sessions):
        return _Pool(work.items, clock, work.count)
    return _Pool(work, clock)


async def run_phase(send: Send, requests: Work, plan: PhasePlan, out: Outlets = Outlets(),
                    clock: Clock | None = None) -> CellRun:
    """Run one phase (warmup or measure) of a cell and return parsed records and client health.
    `requests` may be a lazy iterator (a duration cell takes as many as its duration needs), or a sessions
    load's conversations. A trace's load needs `plan.offsets`. A stoppable phase ends early on a
    cancellation (Ctrl-C) and returns what finished (requests cut off are recorded as `cancelled`), with
    `stopped` set. With `plan.start_ns` the phase's t0 is that instant exactly (every worker's schedule
    starts at the coordinator's t0, however late this process woke), else the moment it starts."""
    load = plan.load
    if load.arrival == "trace" and plan.offsets is None:
        raise ValueError("a trace load needs explicit arrival offsets")
    clock = clock or MonotonicClock()
    pool, probe = _pool(requests, load, clock), LoopLagProbe()
    reducer = _Reducer(plan.name, out, max(PENDING_HARD, load.in_flight_cap or 0))
    sender = _Sender(send=send, pool=pool, clock=clock, out=reducer, on_done=out.done)
    if isinstance(requests, Sessions):
        sender.cutoff = requests.cutoff
    schedule = _schedule(plan, pool.count)           # drawn (and scaled) before t0
    stopped = False
    with _young_gc_only():
        reducing = asyncio.ensure_future(reducer.run())
        t0 = plan.start_ns if plan.start_ns is not None else clock.now_ns()
        try:
            t0 = await _begin(clock, plan, probe)
            await _loop(sender, plan, schedule, t0)
        except asyncio.CancelledError:
            stopped = _stoppable(plan)
        finally:
            health = probe.stop()
            records = await reducer.close(reducing)
    health = health.ran_out(_exhausted(pool, load, t0))
    if stopped:
        health = health.stopped((clock.now_ns() - t0) / 1e9)
    return CellRun(records=records, client_health=health, stopped=stopped, slot_waits=sender.waits)


async def _begin(clock: Clock, plan: PhasePlan, probe: LoopLagProbe) -> int:
    """Wait for the phase's start instant, start the lag probe; t0. With `plan.start_ns` t0 is that instant
    exactly (every worker's schedule starts at the coordinator's t0, however late this process woke)."""
    if plan.start_ns is not None:
        await clock.sleep_until(plan.start_ns)
    probe.start()
    return plan.start_ns if plan.start_ns is not None else clock.now_ns()


def _stoppable(plan: PhasePlan) -> bool:
    """A cancellation of a stoppable phase (Ctrl-C) is taken as "stop here, keep what finished": the
    task's cancellation is withdrawn and the phase returns. Any other cancellation goes on up."""
    task = asyncio.current_task()
    if not plan.stoppable or task is None:
        raise asyncio.CancelledError
    task.uncancel()
    return True


def _schedule(plan: PhasePlan, prepared: int | None) -> Iterable[int] | None:
    """The open loop's offsets (of requests, or of session starts): the trace's, the workers' share of the
    one schedule, or the cell's own (N = arrivals_of: --num-prompts or num_sessions, or rate x duration, or
    the requests prepared when fewer; seeded by the cell); None for a closed loop (concurrency or users)."""
    load = plan.load
    if load.concurrency is not None or load.users is not None:
        return None
    if plan.offsets is not None:
        return plan.offsets
    return offsets_ns(load.request_rate or load.session_rate or 0.0, load.arrival, random.Random(plan.seed),
                      arrivals_of(load, prepared), load.duration_s, load.burstiness)


async def _loop(sender: _Sender, plan: PhasePlan, schedule: Iterable[int] | None, t0: int) -> None:
    """Closed loop until the requests (or the duration) run out; open loop on the arrival schedule;
    sessions: users, or session starts on their schedule (no turn is sent after the duration)."""
    load = plan.load
    deadline = t0 + int(load.duration_s * 1e9) if load.duration_s else None
    if load.users is not None:
        await sender.users(load, deadline, t0)
        return
    if schedule is None:
        await sender.closed_loop(load.concurrency or 1, deadline)
        return
    if load.session_rate is not None:
        await sender.session_starts(schedule, t0, deadline)
        return
    await sender.open_loop(load, schedule, t0)


def _exhausted(pool: _Pool, load: Load, t0: int) -> float | None:
    """A duration cell whose prepared requests ran out before its end: when (seconds after t0); None if not."""
    if not load.duration_s or pool.exhausted_ns is None:
        return None
    at = (pool.exhausted_ns - t0) / 1e9
    return at if at < load.duration_s else None
