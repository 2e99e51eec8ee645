"""Client workers as Ray actors on the nodes of an existing Ray cluster (optional extra `ray`).

Clocks: perf_counter_ns is not comparable across machines. Before a cell the driver estimates each
actor's clock offset with Cristian's method (several round trips; the one with the smallest round
trip wins; offset = actor_clock - (t_send + t_recv) / 2, error <= half that round trip). The driver
picks the measured phase's t0 on its own clock, each actor's phase starts at that t0 converted to its
clock (t0 + its offset: the same instant), so the actors send the slots of ONE schedule, and every
timestamp an actor returns is converted back to the driver's clock (intended send times included: they
are then the one schedule's, t0 + schedule[i]). Latencies
(TTFT, TPOT, ITL, E2EL) are differences on one node's clock and need no conversion at all.

Placement: the n actors live in a placement group of n tiny bundles (BUNDLE_CPU each) with the SPREAD
strategy, so Ray deals them over the cluster's nodes as evenly as it can instead of where it likes (a
resource-less actor lands on a random node, and the plain SPREAD actor strategy does not balance them);
each actor reports its node id (`ray_nodes` in the client health). Records come back in batches of at
most BATCH per call while the cell runs, so no single Ray object holds a whole large cell.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any

from tokenbench.client.records import RequestRecord
from tokenbench.client.transport import new_session, send
from tokenbench.errors import UsageError
from tokenbench.load.clock import new_loop
from tokenbench.load.runner import CellRun, Outlets, run_phase
from tokenbench.load.workers import WorkerJob, merge_health, reindex
from tokenbench.metrics.summary_groups import ClientHealth
from tokenbench.metrics.tally import SlotWaits

PROBES = 7
START_MARGIN_NS = 500_000_000   # Ray call latency margin before the shared start instant
BATCH = 2_000                   # records per call when the driver collects an actor's results
POLL_S = 0.2                    # the driver asks each running actor for its next batch this often
BUNDLE_CPU = 0.01               # what each actor reserves: enough for Ray to place it, nothing to speak of
PLACE_S = 120                   # the placement group must be ready within this
ACTOR_CALLS = 2                 # calls an actor takes at once: a phase (warmup blocks its call) and `stop`


class ClientActor:
    """Runs one worker's share on a persistent event loop (so warmup connections stay open). The driver
    calls `stop` (Ctrl-C) while a phase runs: the actor takes two calls at once (ACTOR_CALLS)."""

    def __init__(self, timeout_s: float, connect_in_ttft: bool = False) -> None:
        self.loop = new_loop()                    # the loop a single process measures on
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.session = asyncio.run_coroutine_threadsafe(self._session(timeout_s, connect_in_ttft), self.loop).result()
        self.finished: deque[RequestRecord] = deque()
        self.job: WorkerJob | None = None
        self.running: Future | None = None
        self.phase: asyncio.Task | None = None    # the phase running on the loop
        self.stopped = False

    async def _session(self, timeout_s: float, connect_in_ttft: bool):
        return new_session(timeout_s, connect_in_ttft)

    def clock(self) -> int:
        return time.perf_counter_ns()

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _send(self, req, intended):
        return await send(self.session, req, intended)

    async def _watched(self, phase: Coroutine[Any, Any, CellRun]) -> CellRun | None:
        """The phase, cancellable by `stop`; None when the actor was stopped before it began."""
        if self.stopped:
            phase.close()
            return None
        self.phase = asyncio.current_task()
        try:
            return await phase
        finally:
            self.phase = None

    def _cancel(self) -> None:
        if self.phase is not None:
            self.phase.cancel()

    def stop(self) -> None:
        """Ctrl-C at the driver: the running phase stops with what finished, no other starts."""
        self.stopped = True
        self.loop.call_soon_threadsafe(self._cancel)

    def warmup(self, job: WorkerJob) -> list[RequestRecord]:
        plan = job.warmup_plan()
        if plan is None:
            return []
        run = self._run(self._watched(run_phase(self._send, job.warmup, plan)))
        return reindex(run.records, job) if run is not None else []

    def node(self) -> str:
        import ray
        return ray.get_runtime_context().get_node_id()

    def start(self, job: WorkerJob, start_local_ns: int) -> None:
        """Begin the measured phase on the actor's loop; the driver collects it with `take`."""
        self.job, self.finished = job, deque()
        self.running = asyncio.run_coroutine_threadsafe(self._watched(
            run_phase(self._send, job.measure, job.measure_plan(start_local_ns), Outlets(record=self.finished.append))),
            self.loop)

    def take(self, limit: int) -> tuple[list[RequestRecord], tuple[ClientHealth, SlotWaits] | None]:
        """Up to `limit` records finished so far (the loop thread appends, this thread pops: a deque is
        safe for that), and the client health and slot waits once the phase ended and every record was
        taken (a stopped phase's health has `stopped_after_s`)."""
        assert self.running is not None and self.job is not None
        ended = self.running.done()
        batch = [self.finished.popleft() for _ in range(min(limit, len(self.finished)))]
        end = _end(self.running.result()) if ended and not self.finished else None
        return reindex(batch, self.job), end


def _end(run: CellRun | None) -> tuple[ClientHealth, SlotWaits]:
    """A phase's health and slot waits; one stopped before it began has only its stop."""
    if run is None:
        return ClientHealth(stopped_after_s=0.0), SlotWaits()
    return run.client_health, run.slot_waits


class _Halt:
    """The driver's side of a Ctrl-C: once `event` is set, every actor is told to stop, once."""

    def __init__(self, event: threading.Event | None, actors: list) -> None:
        self.event, self.actors, self.told = event, actors, False

    def check(self) -> bool:
        if self.event is not None and self.event.is_set() and not self.told:
            for a in self.actors:
                a.stop.remote()
            self.told = True
        return self.told

    def get(self, ray, refs: list) -> list:
        """ray.get(refs), telling the actors to stop as soon as the event is set meanwhile."""
        while len(ray.wait(refs, num_returns=len(refs), timeout=POLL_S)[0]) < len(refs):
            self.check()
        return ray.get(refs)


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


def _spread_group(ray, n: int):
    from ray.util.placement_group import placement_group
    group = placement_group([{"CPU": BUNDLE_CPU}] * n, strategy="SPREAD")
    try:
        ray.get(group.ready(), timeout=PLACE_S)
    except ray.exceptions.GetTimeoutError:
        ray.util.remove_placement_group(group)
        raise UsageError(f"the Ray cluster could not place {n} client workers within {PLACE_S} s",
                         f"free {n * BUNDLE_CPU:g} CPU on the cluster, or use fewer --workers") from None
    return group


def _actors(ray, group, jobs: list[WorkerJob]) -> list:
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    actor_cls = ray.remote(ClientActor)
    return [actor_cls.options(num_cpus=BUNDLE_CPU, max_concurrency=ACTOR_CALLS,
                              scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i)
                              ).remote(job.timeout_s, job.connect_in_ttft)
            for i, job in enumerate(jobs)]


def _collect(ray, actors: list, offsets: list[int], halt: _Halt
             ) -> tuple[list[RequestRecord], list[tuple[ClientHealth, SlotWaits]]]:
    """Batches from every actor until each has sent its last one with its health and slot waits."""
    records: list[RequestRecord] = []
    health: dict[int, tuple[ClientHealth, SlotWaits]] = {}
    while len(health) < len(actors):
        halt.check()
        pending = [i for i in range(len(actors)) if i not in health]
        got = 0
        for i, (batch, h) in zip(pending, ray.get([actors[i].take.remote(BATCH) for i in pending]), strict=True):
            records.extend(to_driver_clock(batch, offsets[i]))
            got += len(batch)
            if h is not None:
                part, waits = h
                health[i] = (part.shifted(offsets[i]), waits)          # on the driver's clock
        if not got and len(health) < len(actors):
            time.sleep(POLL_S)
    return records, [health[i] for i in range(len(actors))]


def run_ray(address: str, jobs: list[WorkerJob], stop: threading.Event | None = None) -> tuple[list, CellRun]:
    """Blocking: the whole cell on one Ray actor per job (load/workers.make_jobs), spread over the nodes;
    records on the driver's clock. Once `stop` is set (Ctrl-C) the actors stop with what finished."""
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    group = _spread_group(ray, len(jobs))
    actors = _actors(ray, group, jobs)
    halt = _Halt(stop, actors)
    try:
        nodes = ray.get([a.node.remote() for a in actors])
        warm = [r for part in halt.get(ray, [a.warmup.remote(j) for a, j in zip(actors, jobs, strict=False)])
                for r in part]
        offsets = [clock_offset(ray, a) for a in actors]
        recs: list[RequestRecord] = []
        if halt.check():
            parts = [(ClientHealth(stopped_after_s=0.0), SlotWaits())]
        else:
            start = time.perf_counter_ns() + START_MARGIN_NS
            ray.get([a.start.remote(j, start + off) for a, j, off in zip(actors, jobs, offsets, strict=False)])
            recs, parts = _collect(ray, actors, offsets, halt)
    finally:
        for a in actors:
            ray.kill(a)
        ray.util.remove_placement_group(group)
    warm = to_driver_clock(warm, 0)
    health = merge_health([h for h, _ in parts]).on_ray(offsets, nodes)
    waits = SlotWaits().merged([w for _, w in parts])
    stopped = any(h.stopped_after_s is not None for h, _ in parts)
    return sorted(warm, key=lambda r: r.index), CellRun(sorted(recs, key=lambda r: r.index), health, stopped, waits)
