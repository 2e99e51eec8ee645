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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tokenbench.client.records import RequestRecord
from tokenbench.client.request import PreparedRequest
from tokenbench.client.transport import new_session, send
from tokenbench.errors import UsageError
from tokenbench.load import clock
from tokenbench.load.arrivals import schedule
from tokenbench.load.runner import CellRun, Outlets, PhasePlan, Phases, run_phase
from tokenbench.metrics.send_rates import SlotWaits
from tokenbench.metrics.summary_groups import ClientHealth
from tokenbench.spec.bench import Load

START_DELAY_NS = 500_000_000  # t0 of the measured phase: 500 ms after the barrier opens (time to wake every worker)


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


@dataclass
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
        return PhasePlan("warmup", self.warmup_load) if self.warmup and self.warmup_load is not None else None

    def measure_plan(self, start_ns: int) -> PhasePlan:
        return PhasePlan("measure", self.load, self.seed + self.worker, self.offsets, start_ns)


async def _worker_async(job: WorkerJob, sync, progress) -> tuple[list, list, ClientHealth, SlotWaits]:
    async with new_session(job.timeout_s, job.connect_in_ttft) as session:
        async def do_send(req, intended):
            return await send(session, req, intended)
        warm = []
        if (warm_plan := job.warmup_plan()) is not None:
            warm = (await run_phase(do_send, job.warmup, warm_plan)).records
        start_ns = await asyncio.get_running_loop().run_in_executor(None, sync.arrive_and_wait)
        run = await run_phase(do_send, job.measure, job.measure_plan(start_ns), Outlets(done=lambda: _bump(progress)))
    return reindex(warm, job), reindex(run.records, job), run.client_health, run.slot_waits


def _bump(progress) -> None:
    with progress.get_lock():
        progress.value += 1


def reindex(records: list[RequestRecord], job: WorkerJob) -> list[RequestRecord]:
    for r in records:
        r.index, r.worker = r.index * job.workers + job.worker, job.worker
    return records


class StartLine:
    """Workers arrive after warmup; the parent then sets one start instant and releases them all."""

    def __init__(self, ctx) -> None:
        self.ready, self.start, self.go = ctx.Value("i", 0), ctx.Value("q", 0), ctx.Event()

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


def _worker_main(job: WorkerJob, sync: StartLine, progress, results) -> None:
    results.put((job.worker, clock.run(_worker_async(job, sync, progress))))


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
    warmup, measure, load, seed = phases.warmup, list(phases.measure), phases.load, phases.seed
    warm_loads = split_load(phases.warmup_load, n) if phases.warmup_load and len(warmup) >= n else [None] * n
    whole = schedule(load, seed, len(measure)) if load.concurrency is None else None
    return [WorkerJob(i, n, _deal(warmup, n, i) if warm_loads[i] else [], warm_loads[i], _deal(measure, n, i),
                      part, seed, timeout_s, whole[i::n] if whole is not None else None, connect_in_ttft)
            for i, part in enumerate(split_load(load, n))]


async def run_workers(jobs: list[WorkerJob], on_done: Callable[[int], None] = lambda done: None
                      ) -> tuple[list, CellRun]:
    """The jobs (make_jobs) in one spawned process each; their records once every process has finished."""
    ctx = mp.get_context("spawn")
    sync = StartLine(ctx)
    progress, results = ctx.Value("i", 0), ctx.Queue()
    procs = [ctx.Process(target=_worker_main, args=(j, sync, progress, results), daemon=True) for j in jobs]
    for p in procs:
        p.start()
    try:
        parts = await _collect(procs, sync, results, progress, on_done)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join(timeout=5)
    warm = sorted((r for w, *_ in parts for r in w), key=lambda r: r.index)
    recs = sorted((r for _, m, *_ in parts for r in m), key=lambda r: r.index)
    return warm, CellRun(records=recs, client_health=merge_health([p[2] for p in parts]),
                         slot_waits=SlotWaits().merged([p[3] for p in parts]))


async def _collect(procs, sync: StartLine, results, progress, on_done) -> list:
    got: dict[int, tuple] = {}
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
        await asyncio.sleep(0.1)
    return [got[i] for i in sorted(got)]
