"""Where a cell's requests are sent from: this process (the default), N client processes (`--workers`),
or Ray actors on a cluster (`--ray`). The study picks one executor from its client options, once
(`executor_for`); each runs a cell's two phases (load/runner.Phases) and hands every record to the
cell's intake, which sees the same records whichever executor sent them."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from tokenbench.client.raw_log import RawLog
from tokenbench.client.records import Phase, RequestRecord
from tokenbench.client.transport import Session, send
from tokenbench.errors import UsageError
from tokenbench.load.runner import CellRun, Outlets, Phases, Sessions, run_phase, stopped_before
from tokenbench.spec.study import Client

if TYPE_CHECKING:
    from tokenbench.load.workers import WorkerJob

T = TypeVar("T")


class Intake(Protocol):
    """Where a cell's records go as they come, and its progress (load/cell.py)."""

    def __call__(self, record: RequestRecord, /) -> None: ...
    def done(self, phase: Phase, n: int, total: int | None) -> None: ...


class Executor(Protocol):
    async def run(self, session: Session, phases: Phases, intake: Intake) -> CellRun: ...


@dataclass(frozen=True)
class InProcess:
    """Both phases on this process's event loop, on the study's HTTP session (connections stay open
    from cell to cell); records reach the intake as they are parsed."""

    keep_raw: str | None = None         # a JSONL file each request's raw response is appended to

    async def run(self, session: Session, phases: Phases, intake: Intake) -> CellRun:
        raw = _raw_log(self.keep_raw, phases.key) if self.keep_raw else None
        try:
            return await _phases_here(session, phases, intake, Outlets(record=intake, raw=raw))
        finally:
            if raw is not None:
                raw.close()


async def _phases_here(session: Session, phases: Phases, intake: Intake, out: Outlets) -> CellRun:
    async def do_send(req, intended):
        return await send(session, req, intended)

    if (warm := phases.warmup_plan()) is not None:
        done = iter(range(1, len(phases.warmup) + 1))
        warmed = await run_phase(do_send, phases.warmup, warm, Outlets(out.record, out.raw,
                                 lambda: intake.done("warmup", next(done), len(phases.warmup))))
        if warmed.stopped:
            return stopped_before(warmed)
    done_m = iter(range(1, 1 << 62))
    return await run_phase(do_send, phases.measure, phases.measure_plan(),
                           Outlets(out.record, out.raw, lambda: intake.done("measure", next(done_m), phases.count)))


@dataclass(frozen=True)
class Processes:
    """`workers` client processes, each with its own event loop (load/workers.py); the requests are dealt
    out before the cell (within load/cell.PREPARED_BYTES) and the records come back when it ends."""

    workers: int

    async def run(self, session: Session, phases: Phases, intake: Intake) -> CellRun:
        from tokenbench.load.workers import run_workers  # only a cell sent from worker processes needs them
        jobs, n = _jobs(self.workers, session, phases), phases.count
        warm, run = await run_workers(jobs, on_done=lambda d: intake.done("measure", d, n))
        return _hand_over(warm, run, intake)


@dataclass(frozen=True)
class RayActors:
    """`workers` Ray actors on the cluster at `address`, spread over its nodes (load/ray_workers.py)."""

    address: str
    workers: int

    async def run(self, session: Session, phases: Phases, intake: Intake) -> CellRun:
        from tokenbench.load.ray_workers import run_ray  # only a cell sent from Ray actors needs them
        jobs, stop = _jobs(self.workers, session, phases), threading.Event()
        warm, run = await _in_thread(lambda: run_ray(self.address, jobs, stop), stop)
        return _hand_over(warm, run, intake)


async def _in_thread(work: Callable[[], T], stop: threading.Event) -> T:
    """`work()` in a thread of its own, awaited. The first cancellation (Ctrl-C) sets `stop` and still
    waits for what `work` returns (it ends soon, with what finished); the thread is a daemon, so a second
    Ctrl-C does not wait for it."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        try:
            result = work()
        except BaseException as exc:         # handed to the awaiting task, which raises it
            _settle(loop, done, exc)
            return
        _settle(loop, done, result)

    threading.Thread(target=run, daemon=True).start()
    while True:
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if stop.is_set() or task is None:
                raise
            task.uncancel()
            stop.set()


def _settle(loop: asyncio.AbstractEventLoop, done: asyncio.Future, outcome: object) -> None:
    """Set `done` from another thread (nothing to do once the loop has closed: the caller is gone)."""
    def put() -> None:
        if done.done():
            return
        if isinstance(outcome, BaseException):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(put)


def _raw_log(path: str, key: str) -> RawLog:
    """--keep-raw's file (client/raw_log.py), imported only when it is asked for."""
    return RawLog(path, key)


def _jobs(workers: int, session: Session, phases: Phases) -> list[WorkerJob]:
    if phases.load.arrival == "trace":
        raise UsageError("a trace replay runs in one client process (its arrivals are one schedule)",
                         "drop --workers / --ray for trace workloads")
    if isinstance(phases.measure, Sessions):
        raise UsageError("sessions run in one client process (each turn waits for the previous answer)",
                         "drop --workers / --ray for sessions workloads")
    phases.count = phases.count if phases.count is not None else phases.limit
    phases.measure = list(itertools.islice(phases.measure, phases.count))
    from tokenbench.load.workers import make_jobs
    return make_jobs(workers, phases, session.timeout_s, session.connect_in_ttft)


def _hand_over(warm: list[RequestRecord], run: CellRun, intake: Intake) -> CellRun:
    """Records that came back from other processes go to the intake as if they had been parsed here."""
    for r in [*warm, *run.records]:
        intake(r)
    run.records = []
    return run


def executor_for(client: Client) -> Executor:
    """The executor the study's client options ask for (the study spec allows --keep-raw with one process
    only)."""
    if client.ray_address:
        return RayActors(client.ray_address, client.workers)
    if client.workers > 1:
        return Processes(client.workers)
    return InProcess(client.keep_raw)
