"""Client workers as Ray actors on the nodes of an existing Ray cluster (optional extra `ray`).

Clocks: perf_counter_ns is not comparable across machines. Before a cell the driver estimates each
actor's clock offset with Cristian's method (several round trips; the one with the smallest round
trip wins; offset = actor_clock - (t_send + t_recv) / 2, error <= half that round trip). The driver
picks the measured phase's start instant on its own clock, each actor starts at that instant converted
to its clock, and every timestamp an actor returns is converted back to the driver's clock. Latencies
(TTFT, TPOT, ITL, E2EL) are differences on one node's clock and need no conversion at all.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

from tokenbench.client.records import RequestRecord
from tokenbench.client.transport import new_session, send
from tokenbench.errors import UsageError
from tokenbench.load.runner import CellRun, run_phase
from tokenbench.load.workers import WorkerJob, make_jobs, merge_health, reindex
from tokenbench.spec.bench import Load

PROBES = 7
START_MARGIN_NS = 500_000_000   # Ray call latency margin before the shared start instant


class ClientActor:
    """Runs one worker's share on a persistent event loop (so warmup connections stay open)."""

    def __init__(self, timeout_s: float) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.session = asyncio.run_coroutine_threadsafe(self._session(timeout_s), self.loop).result()

    async def _session(self, timeout_s: float):
        return new_session(timeout_s)

    def clock(self) -> int:
        return time.perf_counter_ns()

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _send(self, req, intended):
        return await send(self.session, req, intended)

    def warmup(self, job: WorkerJob) -> list[RequestRecord]:
        if not job.warmup or job.warmup_load is None:
            return []
        return reindex(self._run(run_phase(self._send, job.warmup, job.warmup_load, "warmup")).records, job)

    def measure(self, job: WorkerJob, start_local_ns: int) -> tuple[list[RequestRecord], dict]:
        run = self._run(run_phase(self._send, job.measure, job.load, "measure", seed=job.seed + job.worker,
                                  start_ns=start_local_ns))
        return reindex(run.records, job), run.client_health


def clock_offset(ray, actor) -> int:
    best: tuple[int, int] | None = None
    for _ in range(PROBES):
        t0 = time.perf_counter_ns()
        remote = ray.get(actor.clock.remote())
        t1 = time.perf_counter_ns()
        if best is None or t1 - t0 < best[0]:
            best = (t1 - t0, remote - (t0 + t1) // 2)
    assert best is not None                       # PROBES >= 1
    return best[1]


def to_driver_clock(records: list[RequestRecord], offset: int) -> list[RequestRecord]:
    for r in records:
        r.intended_ns -= offset
        r.sent_ns -= offset
        r.end_ns -= offset
        r.token_times_ns = [t - offset for t in r.token_times_ns]
    return records


def _ray():
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs the Ray package", "pip install 'tokenbench[ray]'") from None
    return ray


def run_ray(address: str, n: int, warmup: Sequence, warmup_load: Load | None, measure: Sequence, load: Load,
            seed: int, timeout_s: float) -> tuple[list, CellRun]:
    """Blocking: the whole cell on n Ray actors; returns records on the driver's clock."""
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    actor_cls = ray.remote(num_cpus=0)(ClientActor)
    actors = [actor_cls.remote(timeout_s) for _ in range(n)]
    jobs = make_jobs(n, warmup, warmup_load, measure, load, seed, timeout_s)
    try:
        warm = [r for part in ray.get([a.warmup.remote(j) for a, j in zip(actors, jobs, strict=False)]) for r in part]
        offsets = [clock_offset(ray, a) for a in actors]
        start = time.perf_counter_ns() + START_MARGIN_NS
        parts = ray.get([a.measure.remote(j, start + off) for a, j, off in zip(actors, jobs, offsets, strict=False)])
    finally:
        for a in actors:
            ray.kill(a)
    recs = [r for (records, _), off in zip(parts, offsets, strict=False) for r in to_driver_clock(records, off)]
    warm = to_driver_clock(warm, 0)
    health = merge_health([h for _, h in parts])
    health["clock_offsets_ns"] = offsets
    return sorted(warm, key=lambda r: r.index), CellRun(sorted(recs, key=lambda r: r.index), health)
