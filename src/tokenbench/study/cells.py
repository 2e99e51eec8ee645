"""One cell on a launched server: its `CellJob` built from the study's spec, once, for every command; its run
(`Cells.run`, the one caller of `load.cell.run_cell` for bench, sweep, demo, calibrate and agree); its row
stored (store/journal: the database and the JSON result); or its skip. After the cell, what the verdict says
of the server (it died, or stopped answering) is raised for the launch to act on (study/launch.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokenbench.client import api
from tokenbench.client.records import RequestRecord
from tokenbench.client.request import RequestOptions
from tokenbench.client.transport import Session
from tokenbench.deploy.engines import reset_cache_path
from tokenbench.load.cell import CellJob, CellResult, Watch, run_cell
from tokenbench.load.executors import Executor, executor_for
from tokenbench.load.target import Endpoint
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import CacheState
from tokenbench.metrics.verdict import Verdict, VerdictPolicy
from tokenbench.spec.server_kinds import Capabilities
from tokenbench.spec.study import StudySpec
from tokenbench.store.rows import CellRow, KvUse
from tokenbench.study import prompt_cache
from tokenbench.study.monitoring import Watched, cell_monitor
from tokenbench.study.plan import PlannedCell, kv_demand, over_capacity
from tokenbench.study.server_process import ServerProcess, launch_facts
from tokenbench.study.servers import Server
from tokenbench.study.settings import RunContext

if TYPE_CHECKING:
    from tokenbench.metrics.capacity import SearchRecord


class ServerDied(Exception):
    """The server under test died during a cell; the cell is stored as failed with the cause. What the launch
    keeps of the death: the cell (`cell`, its key; `role`, its part in a capacity search, set there), what was
    seen of the server (`seen`: its exit code and log tail) and its engine's log (`log`, where tokenbench
    started it)."""

    def __init__(self, text: str, cell: str = "", seen: str = "", log: str | None = None) -> None:
        super().__init__(text)
        self.cell, self.seen, self.log = cell, seen, log
        self.role: str | None = None
        self.record: SearchRecord | None = None     # a capacity search cut short by the death, as far as it got


class ServerUnreachable(ServerDied):
    """The server stopped accepting connections during a cell (its process, if ours, still runs)."""


class CellInterrupted(Exception):
    """The user stopped a cell (Ctrl-C); it is stored as interrupted, and the run stops here."""

    def __init__(self, config: str, row: CellRow) -> None:
        super().__init__(f"{config} {row.key}: {row.message}")
        self.config, self.row = config, row


@dataclass(kw_only=True)
class Launch:
    """One launch of a server config: what every cell run on it shares."""

    server: Server
    endpoint: Endpoint
    config_id: int
    kv_cap: int | None
    session: Session
    traced: bool = False       # its requests carry a traceparent; each cell is joined to the server's spans
    process: ServerProcess = ServerProcess("not_found")     # the server's process, found once (study/server_process.py)
    number: int | None = None  # this config's launch in this run (None: the server is not tokenbench's to launch)


UNSALTED_KINDS = ("sharegpt", "jsonl")   # a dataset's prompts are its own: the run's salt leaves them as they are


def _not_stopped() -> None:
    """A Ctrl-C that came between cells (the task's cancellation is pending): no cell starts after it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def reset_prefix_cache(server: Server) -> bool:
    """Empty the engine's prefix cache (its adapter's reset endpoint); whether the server said it did (2xx)."""
    path = reset_cache_path(server.facts.engine)
    if not path:
        return False
    status, _ = api.call(server.base_url, path, {}, quiet=True)
    return 200 <= status < 300


def _kv(cell: PlannedCell, kv_cap: int | None) -> KvUse:
    return KvUse(kv_demand(cell), kv_cap, over_capacity(cell, kv_cap))


def _gone(verdict: Verdict, ours: bool) -> type[ServerDied] | None:
    """After a cell: did our engine die (relaunch), or did the server stop answering (stop, or relaunch
    when it is ours)? The cell's verdict says which, naming the server (metrics/verdict.server_gone)."""
    if verdict.died and ours:
        return ServerDied
    return ServerUnreachable if verdict.unreachable or verdict.died else None


def _saturated(prev: CellSummary | None, cur: CellSummary) -> bool:
    """Throughput rose less than 3 % while median TTFT rose more than 50 %."""
    if prev is None or not prev.output_throughput or not cur.output_throughput:
        return False
    gain = cur.output_throughput / prev.output_throughput - 1
    ttft_prev, ttft_cur = prev.median_ttft_ms or 0, cur.median_ttft_ms or 0
    return gain < 0.03 and ttft_prev > 0 and ttft_cur > 1.5 * ttft_prev


def request_options(spec: StudySpec, trace: bool = False, caps: Capabilities | None = None) -> RequestOptions:
    """The request shape the study asks for: its target's options and its sampling fields, less the fields the
    server refuses (`caps`, load/probe.py); `trace`: each request carries a W3C traceparent (the server's spans
    are received)."""
    t, c = spec.target, caps or Capabilities()
    return RequestOptions(final_usage_only=t.final_usage_only or "continuous_usage_stats" in c.dropped,
                          sampling=spec.sampling.body(), min_tokens=not t.no_min_tokens and c.min_tokens is not False,
                          extra_body=dict(t.extra_body), new_connection=t.new_connection_per_request, trace=trace,
                          ignore_eos=not t.no_ignore_eos and c.ignore_eos is not False,
                          stream_options=c.stream_options is not False)


def verdict_policy(spec: StudySpec, endpoint: Endpoint) -> VerdictPolicy:
    """What a cell's verdict tolerates (the study's options) and names (the server's address)."""
    return VerdictPolicy(spec.allow_length_mismatch, spec.max_error_rate, endpoint.api_key is not None,
                         endpoint.base_url, spec.target.no_probe)


class Cells:
    """Runs cells on a launch, one at a time, and stores each; `attempted` collects the cells this process ran
    (a cut-short one too: the runner's pending cells leave them out)."""

    def __init__(self, ctx: RunContext, attempted: set[tuple[str, str, int]]) -> None:
        self.ctx, self.attempted = ctx, attempted
        self.executor: Executor = executor_for(ctx.plan.spec.client)       # chosen once for every cell

    def job(self, launch: Launch, cell: PlannedCell, watch: Watch) -> CellJob:
        """The cell as it is handed down: built here, once, for every command, with what the cell needs of
        the study's options; its progress goes to the listeners, the server is watched by `watch`."""
        spec, endpoint, ev = self.ctx.plan.spec, launch.endpoint, self.ctx.events
        request = request_options(spec, launch.traced, endpoint.caps)
        return CellJob(endpoint=endpoint, workload=cell.workload, load=cell.load, request=request,
                       policy=verdict_policy(spec, endpoint), slo=spec.slo, timeslice_s=spec.timeslice_s,
                       executor=self.executor, keep_records=self.ctx.settings.keep_records,
                       on_progress=lambda p: ev.cell_progress(cell, p), watch=watch)

    async def run(self, launch: Launch, cell: PlannedCell) -> tuple[CellRow, CellResult]:
        """Run one cell on the launched server, store it, tell the listeners; the stored row, and the cell's
        result (its records on the spool: a capacity search reads them). A cell the user stopped (Ctrl-C) is
        stored as interrupted, then the run stops (CellInterrupted)."""
        server, ctx, ev = launch.server, self.ctx, self.ctx.events
        _not_stopped()
        cache = self._cache_state(launch, cell, reset_prefix_cache(server))
        ev.cell_started(cell)
        kv = _kv(cell, launch.kv_cap)
        facts = launch_facts(launch.process, launch.number, launch.number is not None)
        watched = Watched(server, cell.workload, kv.over, ctx.traces if launch.traced else None, launch.process,
                          (cache, facts))
        with cell_monitor(watched, ctx.plan.spec.monitor_interval_s, ev.log) as mon:
            result = await run_cell(launch.session, self.job(launch, cell, mon))
        if result.stopped:
            ev.log(f"interrupted: storing {cell.config.name} {cell.key} as interrupted "
                   f"(Ctrl-C again stops at once, without storing it)")
        gone = None if result.stopped else _gone(result.verdict, server.deployment is not None)
        row = CellRow.from_result(cell, result, kv)
        records: Iterable[RequestRecord] = result.all_records()
        if mon.joined is not None:                       # each record with the server's timings of it
            records = mon.joined.records(records)
            for _ in mon.joined.records([*result.warmup, *result.records]):    # the ones kept in memory too
                pass
        ctx.journal.add(launch.config_id, row, records, mon.rows(), cell.config.name)
        self.attempted.add((cell.config.name, cell.key, cell.repeat))
        ev.cell_stored(cell, row, result)
        ev.cell_done(cell, row)
        if result.stopped:
            raise CellInterrupted(cell.config.name, row)
        if gone:
            log = str(server.deployment.log_path) if server.deployment is not None else None
            raise gone(f"cell {cell.key}: {result.message}", cell.key, result.verdict.died or result.message, log)
        return row, result

    def _cache_state(self, launch: Launch, cell: PlannedCell, reset: bool) -> CacheState:
        """Could the server's prefix cache hold the cell's prompts (study/prompt_cache.py)?"""
        ctx = self.ctx
        spec = ctx.plan.spec
        ours = launch.number is not None
        sent_by = None if reset or ours else prompt_cache.sent_before(
            ctx.store, ctx.store.run(ctx.run_id).target, spec, cell.key, cell.repeat, launch.process.started)
        salted = spec.prompt_salt is not None and cell.workload.kind not in UNSALTED_KINDS
        return prompt_cache.decide(reset, ours, salted, sent_by)

    def skip(self, launch: Launch, cell: PlannedCell, reason: str) -> None:
        row = CellRow.skipped(cell, (cell.workload.input_len or 0, cell.workload.output_len or 0), reason,
                              _kv(cell, launch.kv_cap))
        self.ctx.journal.add(launch.config_id, row, [], config=cell.config.name)
        self.ctx.events.cell_done(cell, row)

    async def run_planned(self, launch: Launch, todo: list[PlannedCell]) -> None:
        """The launch's planned cells in order; with stop_on_saturation, the rest of a length pair's loads are
        skipped once its throughput saturates."""
        spec = self.ctx.plan.spec
        prev: dict[tuple, CellSummary] = {}
        stopped: dict[tuple, str] = {}
        for cell in todo:
            pair = (cell.workload.input_len, cell.workload.output_len, cell.repeat, cell.load.request_rate is None)
            if pair in stopped:
                self.skip(launch, cell, stopped[pair])
                continue
            row, _ = await self.run(launch, cell)
            if spec.stop_on_saturation and cell.load.concurrency and _saturated(prev.get(pair), row.summary):
                stopped[pair] = f"skipped: throughput saturated at concurrency {cell.load.concurrency}"
            prev[pair] = row.summary
