"""Split one cell's load over N client processes, each with its own event loop, and merge exactly.

Closed loop: concurrency C becomes C//N (+1 for the first C%N workers); open loop: each worker's share
is r/N, as the slots k, k + N, ... of the cell's ONE schedule that it sends, and the in-flight cap is
split like C. Requests are dealt round-robin (request i goes to worker i % N and keeps its index i), with
their slots. All workers finish warmup, meet at a barrier, and the coordinator (this process)
chooses one t0 on CLOCK_MONOTONIC (perf_counter_ns is system-wide on Linux: the same clock in every
process, so records need no conversion): each worker's phase starts at that t0 exactly, whenever the
worker woke, so request i is due at t0 + schedule[i] in whichever process sends it.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import signal
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenbench.client.records import RequestRecord
from tokenbench.client.request import PreparedRequest
from tokenbench.client.transport import new_session, send
from tokenbench.errors import UsageError
from tokenbench.load import clock
from tokenbench.load.arrivals import schedule
from tokenbench.load.runner import CellRun, Outlets, PhasePlan, Phases, Sessions, run_phase
from tokenbench.metrics.summary_groups import ClientHealth
from tokenbench.metrics.tally import SlotWaits
from tokenbench.spec.bench import Load

START_DELAY_NS = 500_000_000  # t0 of the measured phase: 500 ms after the barrier opens (time to wake every worker)
POLL_S = 0.1                  # the parent collects results and progress this often
STOP_POLL_S = 0.05            # a worker checks this often whether the parent called it off (Ctrl-C)


def split_width(total: int | None, n: int, i: int) -> int | None:
    return None if total is None else total // n + (1 if i < total % n else 0)


def split_load(load: Load, n: int) -> list[Load]:
    if load.concurrency is not None and load.concurrency < n:
        raise UsageError(f"--workers {n} is more than concurrency {load.concurrency}",
                         "use at most as many workers as concurrent requests")
    out = []
    for i in range(n):
        update: dict[str, object] = {"num_prompts": split_width(load.num_prompts, n, i)}
        if load.concurrency is not None:
            update["concurrency"] = split_width(load.concurrency, n, i)
        else:
            update["request_rate"] = (load.request_rate or 0.0) / n
            update["max_concurrency"] = split_width(load.max_concurrency, n, i)
        out.append(load.model_copy(update=update))
    return out


@dataclass(kw_only=True)
class WorkerJob:
    worker: int
    workers: int
    warmup: list[PreparedRequest]
    warmup_load: Load | None
    measure: list[PreparedRequest]
    load: Load
    seed: int
    timeout_s: float
    offsets: list[int] | None = None      # open loop: this worker's share of the cell's schedule
    connect_in_ttft: bool = False

    def warmup_plan(self) -> PhasePlan | None:
        if not self.warmup or self.warmup_load is None:
            return None
        return PhasePlan("warmup", self.warmup_load, stoppable=True)

    def measure_plan(self, start_ns: int) -> PhasePlan:
        return PhasePlan("measure", self.load, self.seed + self.worker, self.offsets, start_ns, stoppable=True)


@dataclass
class WorkerPart:
    """What one worker sends back when the cell ends: its records (indexed as in the cell), its health,
    and whether it was called off (Ctrl-C) before its share was done."""

    warmup: list[RequestRecord]
    measured: list[RequestRecord]
    health: ClientHealth
    stopped: bool = False
    slot_waits: SlotWaits = field(default_factory=SlotWaits)   # open loop: sends that waited for a free slot


class _Watched:
    """A worker's phases, each run as a task of its own so that the parent's call-off (Ctrl-C: the
    workers ignore SIGINT, the parent tells them) stops the phase that runs, and no phase starts after."""

    def __init__(self, stop) -> None:
        self.stop = stop
        self.task: asyncio.Future | None = None

    async def run(self, phase: Coroutine[Any, Any, CellRun]) -> CellRun | None:
        """The phase's run; None when the worker was called off before it began."""
        if self.stop.is_set():
            phase.close()
            return None
        self.task = asyncio.ensure_future(phase)
        try:
            return await self.task
        finally:
            self.task = None

    async def watch(self) -> None:
        while not self.stop.is_set():
            await asyncio.sleep(STOP_POLL_S)
        if self.task is not None:
            self.task.cancel()


async def _worker_async(job: WorkerJob, sync: StartLine, progress) -> WorkerPart:
    watched = _Watched(sync.stop)
    watching = asyncio.ensure_future(watched.watch())
    try:
        async with new_session(job.timeout_s, job.connect_in_ttft) as session:
            return await _phases(job, sync, progress, watched, session)
    finally:
        watching.cancel()


async def _phases(job: WorkerJob, sync: StartLine, progress, watched: _Watched, session) -> WorkerPart:
    async def do_send(req, intended):
        return await send(session, req, intended)
    warm: CellRun | None = CellRun([], ClientHealth())
    if (warm_plan := job.warmup_plan()) is not None:
        warm = await watched.run(run_phase(do_send, job.warmup, warm_plan))
    if warm is None or warm.stopped:
        return WorkerPart(reindex(warm.records if warm else [], job), [], warm.client_health if warm else ClientHealth(),
                          stopped=True)
    start_ns = await asyncio.get_running_loop().run_in_executor(None, sync.arrive_and_wait)
    run = await watched.run(run_phase(do_send, job.measure, job.measure_plan(start_ns),
                                      Outlets(done=lambda: _bump(progress))))
    if run is None:
        return WorkerPart(reindex(warm.records, job), [], warm.client_health, stopped=True)
    return WorkerPart(reindex(warm.records, job), reindex(run.records, job), run.client_health, run.stopped,
                      run.slot_waits)


def _bump(progress) -> None:
    with progress.get_lock():
        progress.value += 1


def reindex(records: list[RequestRecord], job: WorkerJob) -> list[RequestRecord]:
    for r in records:
        r.index, r.worker = r.index * job.workers + job.worker, job.worker
    return records


class StartLine:
    """Workers arrive after warmup; the parent then sets one start instant and releases them all. A
    call-off (Ctrl-C) stops every worker's running phase and releases those still waiting."""

    def __init__(self, ctx) -> None:
        self.ready, self.start, self.go = ctx.Value("i", 0), ctx.Value("q", 0), ctx.Event()
        self.stop = ctx.Event()

    def arrive_and_wait(self) -> int:
        with self.ready.get_lock():
            self.ready.value += 1
        self.go.wait()
        return self.start.value

    def release_when_all(self, n: int) -> bool:
        if not self.go.is_set() and self.ready.value >= n:
            self.start.value = time.perf_counter_ns() + START_DELAY_NS
            self.go.set()
        return self.go.is_set()

    def call_off(self) -> None:
        self.stop.set()
        self.go.set()


def _worker_main(job: WorkerJob, sync: StartLine, progress, results) -> None:
    """A worker process. Ctrl-C at a terminal reaches the whole process group: a worker ignores it and
    stops when the parent calls it off (so it returns what finished, and prints no traceback). SIGINT
    arrives blocked (see `_start`), so none can land before it is ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    results.put((job.worker, clock.run(_worker_async(job, sync, progress))))


def _start(procs: list) -> None:
    """Start the worker processes with SIGINT blocked, so they inherit it blocked (a Ctrl-C during their
    start-up stays pending in this process and is handled here once the starts are done)."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        for p in procs:
            p.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def merge_health(parts: Sequence[ClientHealth]) -> ClientHealth:
    """Worst loop lag of any worker; client CPU summed over workers (percent of one core) and the
    busiest worker's; the earliest a worker ran out of prepared requests."""
    return parts[0].merged(list(parts[1:]))


def _deal(requests: Sequence[PreparedRequest], n: int, i: int) -> list[PreparedRequest]:
    return list(requests[i::n])


def make_jobs(n: int, phases: Phases, timeout_s: float, connect_in_ttft: bool = False) -> list[WorkerJob]:
    """Each worker's share: its slice of the load and the requests dealt to it (warmup only when every
    worker gets at least one warmup request); open loop: its requests' instants of the one schedule.
    `phases.measure` is a sequence here (dealt out before the cell)."""
    warmup, load, seed = phases.warmup, phases.load, phases.seed
    measure = [] if isinstance(phases.measure, Sessions) else list(phases.measure)   # executors refuse sessions
    warm_loads = split_load(phases.warmup_load, n) if phases.warmup_load and len(warmup) >= n else [None] * n
    whole = schedule(load, seed, len(measure)) if load.concurrency is None else None
    return [WorkerJob(worker=i, workers=n, warmup=_deal(warmup, n, i) if warm_loads[i] else [],
                      warmup_load=warm_loads[i], measure=_deal(measure, n, i), load=part, seed=seed,
                      timeout_s=timeout_s, offsets=whole[i::n] if whole is not None else None,
                      connect_in_ttft=connect_in_ttft)
            for i, part in enumerate(split_load(load, n))]


async def run_workers(jobs: list[WorkerJob], on_done: Callable[[int], None] = lambda done: None
                      ) -> tuple[list, CellRun]:
    """The jobs (make_jobs) in one spawned process each; their records once every process has finished.
    A cancellation (Ctrl-C) calls the workers off: the run then holds what finished, `stopped` set."""
    ctx = mp.get_context("spawn")
    sync = StartLine(ctx)
    progress, results = ctx.Value("i", 0), ctx.Queue()
    procs = [ctx.Process(target=_worker_main, args=(j, sync, progress, results), daemon=True) for j in jobs]
    _start(procs)
    try:
        parts = await _collect(procs, sync, results, progress, on_done)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join(timeout=5)
    warm = sorted((r for p in parts for r in p.warmup), key=lambda r: r.index)
    recs = sorted((r for p in parts for r in p.measured), key=lambda r: r.index)
    return warm, CellRun(records=recs, client_health=merge_health([p.health for p in parts]),
                         stopped=any(p.stopped for p in parts),
                         slot_waits=SlotWaits().merged([p.slot_waits for p in parts]))


async def _collect(procs, sync: StartLine, results, progress, on_done) -> list[WorkerPart]:
    got: dict[int, WorkerPart] = {}
    last = -1
    while len(got) < len(procs):
        sync.release_when_all(len(procs))
        while not results.empty():
            i, part = results.get()
            got[i] = part
        if progress.value != last:
            last = progress.value
            on_done(last)
        dead = [p for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
        if dead and len(got) < len(procs) and results.empty():
            raise UsageError(f"a client worker process died (exit code {dead[0].exitcode})",
                             "rerun with --debug, or with fewer --workers")
        await _pause(sync)
    return [got[i] for i in sorted(got)]


async def _pause(sync: StartLine) -> None:
    """The collection's poll interval. The first cancellation (Ctrl-C) calls the workers off and the
    collection goes on: each sends back what finished."""
    try:
        await asyncio.sleep(POLL_S)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if sync.stop.is_set() or task is None:
            raise
        task.uncancel()
        sync.call_off()
