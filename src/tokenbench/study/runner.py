"""Run a planned study: per server config deploy, read facts, run each missing cell, tear down.

Every finished cell is committed in one transaction; `--resume` runs exactly the cells not committed.
A server that dies mid-cell fails that cell with the cause and the next config relaunches it. Every
cell of every command (bench, sweep, demo, calibrate, agree) is run here, by `StudyRunner._run_cell`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tokenbench.client import api
from tokenbench.client.records import OUT_OF_FILES, RequestRecord
from tokenbench.client.request import RequestOptions
from tokenbench.client.transport import Session, new_session
from tokenbench.deploy.engines import reset_cache_path, with_graphs
from tokenbench.errors import DeployError, SpecError, TargetError
from tokenbench.host.isolation import Isolation
from tokenbench.load.cell import CellJob, CellProgress, CellResult, Watch, run_cell
from tokenbench.load.clock import ctrl_c_to_loop
from tokenbench.load.clock import run as run_loop
from tokenbench.load.executors import Executor, executor_for
from tokenbench.load.probe import method_line, probe_lines, probed
from tokenbench.load.target import Endpoint, resolve
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.verdict import Verdict, VerdictPolicy
from tokenbench.spec.bench import Workload
from tokenbench.spec.server_kinds import Capabilities
from tokenbench.spec.study import StudySpec
from tokenbench.store import commands
from tokenbench.store.db import Store
from tokenbench.store.journal import Journal
from tokenbench.store.rows import CellRow, KvUse
from tokenbench.study.monitoring import Watched, cell_monitor
from tokenbench.study.plan import (
    Plan,
    PlannedCell,
    ServerConfig,
    capacity_load,
    check_context,
    kv_demand,
    over_capacity,
    repeat_workload,
    visits,
)
from tokenbench.study.servers import Server, expected_ctx, launch_failure, load_profile, server_for
from tokenbench.study.traces import Traces

if TYPE_CHECKING:
    from tokenbench.judge.cost import Price
    from tokenbench.logs.launch import LaunchFailure
    from tokenbench.metrics.capacity import CellSamples, Reason, SearchRecord
    from tokenbench.study import capacity

    Seen = Sequence[tuple[capacity.Probe, CellSamples]]

MAX_LAUNCHES = 3      # per server config: the first launch and up to two relaunches after a death
LAUNCH_CAUSES = {"out_of_memory": "out of memory", "port_in_use": "port in use", "unsupported_flag": "a flag the "
                 "engine does not know", "rejected_value": "a value the engine refuses", "accelerator_error":
                 "accelerator error", "model_missing": "model missing", "context_too_small": "a context too small "
                 "for the workload", "not_ready": "not ready in time", "exited": "exited"}


class ServerDied(Exception):
    """The server under test died during a cell; the cell is stored as failed with the cause."""


class ServerUnreachable(ServerDied):
    """The server stopped accepting connections during a cell (its process, if ours, still runs)."""


class CellInterrupted(Exception):
    """The user stopped a cell (Ctrl-C); it is stored as interrupted, and the run stops here."""

    def __init__(self, config: str, row: CellRow) -> None:
        super().__init__(f"{config} {row.key}: {row.message}")
        self.config, self.row = config, row


def _not_stopped() -> None:
    """A Ctrl-C that came between cells (the task's cancellation is pending): no cell starts after it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


@dataclass
class StudyEvents:
    """Callbacks for progress display and result files; all optional."""

    log: Callable[[str], None] = print
    cell_started: Callable[[PlannedCell], None] = lambda c: None
    cell_progress: Callable[[PlannedCell, CellProgress], None] = lambda c, p: None
    cell_done: Callable[[PlannedCell, CellRow], None] = lambda c, row: None
    target_ready: Callable[[Endpoint, dict], None] = lambda endpoint, facts: None   # per server launch
    cell_stored: Callable[[PlannedCell, CellRow, CellResult], None] = lambda c, row, result: None   # with records


class Searching(Protocol):
    """How a capacity study runs its searches: the server configs to visit, in order (consulted after each
    visit, so a later choice can follow what was found; a config may come back for more cells), each
    search's settings, and when to stop one from outside (before its next probe; `fresh`: that probe is not
    stored yet). `tokenbench tune` is one (study/tune.py); `Plain` the default."""

    def visits(self, configs: Sequence[ServerConfig]) -> Iterator[ServerConfig]: ...
    def settings(self, config: ServerConfig, base: capacity.Settings) -> capacity.Settings: ...
    def halt(self, config: ServerConfig, s: capacity.Settings, seen: Seen, fresh: bool) -> Reason | None: ...
    def launch_is_result(self, failure: LaunchFailure) -> bool: ...
    def doc(self) -> dict[str, Any]: ...


class Plain:
    """Every config once, in order, each search as the spec asks, never stopped from outside."""

    def visits(self, configs: Sequence[ServerConfig]) -> Iterator[ServerConfig]:
        return iter(configs)

    def settings(self, config: ServerConfig, base: capacity.Settings) -> capacity.Settings:
        return base

    def halt(self, config: ServerConfig, s: capacity.Settings, seen: Seen, fresh: bool) -> Reason | None:
        return None

    def launch_is_result(self, failure: LaunchFailure) -> bool:
        """Whether a config that did not start is a result the study goes on from (not a problem to fix)."""
        return False

    def doc(self) -> dict[str, Any]:
        """What the JSON result holds beside the searches."""
        return {}


class ContextTooSmall(SpecError):
    """A config whose context cannot hold the workload, in a study that records it and goes on (a tune)."""


class _NeedsServer(Exception):
    """A search replayed from the store asks for a cell that is not stored: the config must be launched."""


@dataclass(frozen=True)
class RunSettings:
    """How a study's runner runs, fixed when it is made (not what it measures)."""

    kind: str = "sweep"                  # the stored run's kind (bench or sweep), for the resume advice
    server: Server | None = None         # an already running server (e.g. deployed by `demo`), not the target's
    output: str | None = None            # tokenbench's JSON result, rewritten after every cell
    keep_records: bool = False           # every record in memory too (a result file that lists them asks it)
    header: dict = field(default_factory=dict)    # the JSON result's facts: tool, command, environment
    isolation: Isolation = Isolation()   # the client's and a local engine's CPUs and priorities (host/isolation.py)
    searching: Searching = Plain()       # a capacity study's searches (tune: study/tune.TuneSearches)


@dataclass
class _Launch:
    """One launch of a server config: what every cell run on it shares."""

    server: Server
    endpoint: Endpoint
    config_id: int
    kv_cap: int | None
    session: Session
    traced: bool = False       # its requests carry a traceparent; each cell is joined to the server's spans


def reset_prefix_cache(server: Server) -> None:
    path = reset_cache_path(server.facts.engine)
    if path:
        api.call(server.base_url, path, {}, quiet=True)


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
    return RequestOptions(t.final_usage_only or "continuous_usage_stats" in c.dropped, spec.sampling.body(),
                          not t.no_min_tokens and c.min_tokens is not False, dict(t.extra_body),
                          t.new_connection_per_request, trace,
                          ignore_eos=not t.no_ignore_eos and c.ignore_eos is not False,
                          stream_options=c.stream_options is not False)


def verdict_policy(spec: StudySpec, endpoint: Endpoint) -> VerdictPolicy:
    """What a cell's verdict tolerates (the study's options) and names (the server's address)."""
    return VerdictPolicy(spec.allow_length_mismatch, spec.max_error_rate, endpoint.api_key is not None,
                         endpoint.base_url, spec.target.no_probe)


def endpoint_for(spec: StudySpec, base_url: str, profile=None) -> Endpoint:
    """The benchmark's view of the server. The API key: the spec's, else the deployed profile's own
    secret `--api-key` variable (the server requires it, so the client must send it)."""
    key_var = None
    if profile is not None:
        from tokenbench.deploy.secret_refs import api_key_var  # a deployed profile's secret references
        key_var = api_key_var(profile)
    return resolve(base_url, spec.target, spec.workload, key_var)


def pending(plan: Plan, done: set[tuple[str, str, int]], config: ServerConfig, round_: int | None = None
            ) -> list[PlannedCell]:
    """The config's cells not in `done` ((config, key, repeat) triples), of one repeat or of all (None)."""
    return [c for c in plan.cells_for(config) if (config.name, c.key, c.repeat) not in done
            and round_ in (None, c.repeat)]


class StudyRunner:
    """Runs a stored study's missing cells, config by config; configured once, when it is made."""

    def __init__(self, plan: Plan, store: Store, run_id: str, settings: RunSettings = RunSettings(),
                 events: StudyEvents | None = None) -> None:
        self.plan, self.store, self.run_id, self.settings = plan, store, run_id, settings
        kind = settings.kind
        hint = f"; then {commands.resume_advice(store, kind, run_id)}"
        doc = {"run_id": run_id, "kind": kind, "spec": plan.spec.model_dump(mode="json"), **settings.header}
        self.journal = Journal(store, run_id, doc, settings.output, hint)
        self.journal.seed_from_store()
        self.kind = kind
        self.ev = events or StudyEvents()
        self.server = settings.server
        self.executor: Executor = executor_for(plan.spec.client)       # chosen once for every cell
        self.capacity: dict[str, list[str]] = {}      # config name -> capacity result lines
        self.capacity_done: set[str] = set()
        self.attempted: set[tuple[str, str, int]] = set()   # cells run by this process (a cut-short one too)
        self.round: int | None = None                       # the repeat being run (interleaved repeats)
        self.traces = Traces(plan.spec.target, self.ev.log)  # the server's spans: receiver and joins

    def pending(self, config: ServerConfig) -> Sequence[PlannedCell | None]:
        if self.plan.spec.find_capacity:
            return [] if config.name in self.capacity_done else [None]   # cells are decided as it goes
        return pending(self.plan, self.store.done_keys(self.run_id) | self.attempted, config, self.round)

    def run(self) -> list[str]:
        """Run every config's missing cells, repeats of several configs interleaved (plan.visits); returns
        one line per config visit that could not finish."""
        problems = []
        try:
            for config, repeat in self._visits():
                self.round = repeat
                self.capacity_done.discard(config.name)          # a capacity config visited again searches on
                if self.pending(config):
                    problem = self._run_config(config)
                    if problem:
                        problems.append(f"{config.name}: {problem}")
                    self.journal.doc.update(self.settings.searching.doc())
        finally:
            self.traces.close()
        self.round = None
        return problems

    def _visits(self) -> Iterable[tuple[ServerConfig, int | None]]:
        if self.plan.spec.find_capacity:
            return ((c, None) for c in self.settings.searching.visits(self.plan.configs))
        return visits(self.plan)

    def _run_config(self, config: ServerConfig) -> str | None:
        """Deploy and run the config's pending cells; relaunch after a server death (bounded). A capacity
        search the store completes is replayed without a launch. A launch that fails for a cause a relaunch
        cannot change (out of memory, an unknown flag, a refused value: logs/launch.py) is not repeated."""
        if self.plan.spec.find_capacity and self._replayed(config):
            return None
        config_id = self.store.upsert_config(self.run_id, config.name, config.as_dict(), status="deploying")
        events: list[str] = []
        failed: LaunchFailure | None = None
        for launch in range(1, MAX_LAUNCHES + 1):
            failed = None
            try:
                self._launch_and_run(config, config_id)
                self._config_status(config, "done", "; ".join(events + self.capacity.get(config.name, [])))
                return None
            except ServerUnreachable as gone:
                events.append(f"server unreachable during {gone} (launch {launch})")
                if not self._relaunchable():
                    self._config_status(config, "failed", "; ".join(events))
                    first = "raise the limit" if OUT_OF_FILES in str(gone) else "check that the server is running"
                    raise TargetError(f"{self.kind} stopped: {gone}", f"{first}, then "
                                      f"{commands.resume_advice(self.store, self.kind, self.run_id)}; "
                                      "finished cells were kept") from None
            except ServerDied as died:
                events.append(f"server died during {died} (launch {launch})")
            except (DeployError, ContextTooSmall) as exc:
                failed = self._failed_launch(config, exc)
                events.append(f"launch {launch} failed ({LAUNCH_CAUSES[failed.cause]}): {exc.one_line()}")
            self.ev.log(f"{config.name}: {events[-1]}")
            if failed is not None and not failed.retried:
                break                                   # a relaunch starts it no better
            if not self.pending(config):
                self._config_status(config, "done", "; ".join(events))
                return None
            if not self._relaunchable():
                break                                   # not ours to relaunch
        return self._unfinished(config, events, failed)

    def _unfinished(self, config: ServerConfig, events: list[str], failed: LaunchFailure | None) -> str | None:
        """The config's status after its last launch; a problem line, unless it did not start and the study
        takes that as a result (a tune)."""
        if failed is not None and self.settings.searching.launch_is_result(failed):
            self._config_status(config, "failed", events[-1])
            return None
        message = "; ".join(events) + f"; {len(self.pending(config))} cell(s) left for --resume"
        self._config_status(config, "failed", message)
        return message

    def _failed_launch(self, config: ServerConfig, exc: DeployError | ContextTooSmall) -> LaunchFailure:
        from tokenbench.logs.launch import too_small  # why a config did not start: only when one did not
        failure = too_small(exc.message) if isinstance(exc, ContextTooSmall) else launch_failure(exc)
        self.store.set_config_launch(self.run_id, config.name, failure)
        return failure

    def _replayed(self, config: ServerConfig) -> bool:
        """Whether the config's searches are complete in the store: then they are replayed (and stored
        again) without launching its server."""
        stored = next((c for c in self.store.configs(self.run_id) if c.name == config.name), None)
        if stored is None or stored.launch is not None:
            return False
        try:
            run_loop(self._searches(None, config, stored.id))
        except _NeedsServer:
            return False
        self._config_status(config, "done", "; ".join(self.capacity.get(config.name, [])))
        return True

    def _relaunchable(self) -> bool:
        return self.server is None and bool(self.plan.spec.target.profile)

    def _config_status(self, config: ServerConfig, status: str, message: str) -> None:
        self.store.set_config_status(self.run_id, config.name, status, message)

    def _launch_and_run(self, config: ServerConfig, config_id: int) -> None:
        given = contextlib.nullcontext(self.server) if self.server else None
        where = f"server config {config.name}"
        if not given and self.plan.spec.target.profile:
            self._fits(expected_ctx(load_profile(self.plan.spec.target, config)), where)
        with given or server_for(self.plan.spec.target, config, self.ev.log, self.settings.isolation,
                                 self.traces.traced_profile) as server:
            self._fits(server.facts.ctx_per_seq, where)
            with_graphs(server.facts, server.profile)
            endpoint = self._endpoint(server)
            self.store.upsert_config(self.run_id, config.name, config.as_dict(), server.profile, server.facts,
                                     status="running")
            self.store.set_config_launch(self.run_id, config.name, None)
            self.journal.doc.setdefault("config_facts", {})[config.name] = server.facts.to_dict()
            with ctrl_c_to_loop():
                if self.plan.spec.find_capacity:
                    run_loop(self._capacity(server, endpoint, config, config_id))
                else:
                    run_loop(self._cells(server, endpoint, config_id,
                                         [c for c in self.pending(config) if c is not None]))

    def _endpoint(self, server: Server) -> Endpoint:
        """The launch's endpoint with what the server accepts (probed once per launch, or assumed), stored with
        the server's facts; its notices and the method chosen go to the log."""
        spec = self.plan.spec
        endpoint = probed(endpoint_for(spec, server.base_url, server.profile), spec.target, spec.api,
                          server.facts.engine)
        endpoint.caps.method = method_line(endpoint, spec.target)
        server.facts.with_capabilities(endpoint.caps)
        for line in probe_lines(endpoint, spec.target):
            self.ev.log(line)
        return endpoint

    def _fits(self, ctx_per_seq: int | None, where: str) -> None:
        """The workload's sequences fit the config's context; else ContextTooSmall (a tune goes on from it)."""
        try:
            check_context(self.plan, ctx_per_seq, where)
        except SpecError as exc:
            from tokenbench.logs.launch import too_small
            if not self.settings.searching.launch_is_result(too_small(exc.message)):
                raise
            raise ContextTooSmall(exc.message, exc.hint) from None

    @contextlib.asynccontextmanager
    async def _launched(self, server: Server, endpoint: Endpoint, config_id: int):
        """The facts, one HTTP session for the launch's cells; the JSON result and the listeners learn the
        target and the method its lengths are kept by."""
        spec = self.plan.spec
        facts = server.facts.to_dict()
        v = endpoint.vocab
        self.journal.doc.update(server_facts=facts, target={
            "base_url": endpoint.base_url, "model": endpoint.model, "max_model_len": endpoint.max_model_len,
            "vocab": {"size": v.size, "low": v.low, "high": v.high, "source": v.source},
            "method": method_line(endpoint, spec.target)})
        self.ev.target_ready(endpoint, facts)
        kv_cap = spec.kv_capacity or server.facts.kv_capacity_tokens
        traced = self.traces.on_for(server)
        async with new_session(spec.target.timeout_s, spec.target.connect_in_ttft) as session:
            yield _Launch(server, endpoint, config_id, kv_cap, session, traced)

    async def _cells(self, server: Server, endpoint: Endpoint, config_id: int, todo: list[PlannedCell]) -> None:
        spec = self.plan.spec
        prev: dict[tuple, CellSummary] = {}
        stopped: dict[tuple, str] = {}
        async with self._launched(server, endpoint, config_id) as launch:
            for cell in todo:
                pair = (cell.workload.input_len, cell.workload.output_len, cell.repeat, cell.load.request_rate is None)
                if pair in stopped:
                    self._skip(launch, cell, stopped[pair])
                    continue
                row, _ = await self._run_cell(launch, cell)
                if spec.stop_on_saturation and cell.load.concurrency and _saturated(prev.get(pair), row.summary):
                    stopped[pair] = f"skipped: throughput saturated at concurrency {cell.load.concurrency}"
                prev[pair] = row.summary

    async def _capacity(self, server: Server, endpoint: Endpoint, config: ServerConfig, config_id: int) -> None:
        async with self._launched(server, endpoint, config_id) as launch:
            await self._searches(launch, config, config_id)

    async def _searches(self, launch: _Launch | None, config: ServerConfig, config_id: int) -> None:
        """One capacity search per workload (study/capacity.py); cells already stored (resume) are replayed
        through it, not rerun (without a launch, a cell not stored raises _NeedsServer). Each search is
        stored with its record (store.save_search)."""
        from tokenbench.study import capacity  # a capacity search's modules: only a study that searches
        stored = {(c.config, c.key, c.repeat): c for c in self.store.cells(self.run_id)
                  if not c.summary.server_unreachable and c.status != "interrupted"}
        records = [await self._search(launch, config, wl, stored) for wl in self.plan.spec.workloads()]
        lines = []
        for record in records:
            self.store.save_search(self.run_id, config_id, record)
            kept = [e for e in self.journal.doc.get("capacity", [])
                    if (e["config"], e["workload"]) != (config.name, record.workload)]     # a search visited again
            self.journal.doc["capacity"] = [*kept, {"config": config.name, **record.model_dump(mode="json")}]
            for line in capacity.describe(record, *self._units(launch)):
                lines.append(line)
                self.ev.log(f"{config.name}: {line}")
        self.capacity[config.name] = lines
        self.capacity_done.add(config.name)

    def _units(self, launch: _Launch | None) -> tuple[int | None, Price | None]:
        """The devices serving the launched config (judge/hardware.py) and the study's price, for the answer per
        device and per $ an hour; no devices without a launch (a search replayed from the store)."""
        from tokenbench.judge.cost import Price  # a capacity search's: only a study that searches
        from tokenbench.judge.hardware import device_count
        spec = self.plan.spec
        price = Price(spec.price_per_hour, spec.price_basis) if spec.price_per_hour else None
        if launch is None:
            return None, price
        return device_count(launch.server.profile, launch.server.facts), price

    async def _search(self, launch: _Launch | None, config: ServerConfig, wl: Workload,
                      stored: dict[tuple[str, str, int], CellRow]) -> SearchRecord:
        from tokenbench.study import capacity
        spec, searching = self.plan.spec, self.settings.searching
        s = searching.settings(config, capacity.settings(spec, wl.label))
        gen = capacity.search(s)
        seen: list[tuple[capacity.Probe, CellSamples]] = []
        probe = next(gen)
        while True:
            cell = PlannedCell(config, repeat_workload(wl, probe.repeat),
                               capacity_load(spec, probe.load, probe.duration_s, probe.requests), probe.repeat)
            row = stored.get((config.name, cell.key, cell.repeat))
            halt = searching.halt(config, s, seen, row is None)
            if halt is not None:
                gen.close()
                return capacity.halted(s, seen, halt)
            got = await self._search_cell(launch, cell, row)
            seen.append((probe, got))
            try:
                probe = gen.send(got)
            except StopIteration as end:
                return end.value

    async def _search_cell(self, launch: _Launch | None, cell: PlannedCell, row: CellRow | None) -> CellSamples:
        """The cell's samples for the search: measured now, or read back from the store (a resume)."""
        from tokenbench.metrics.capacity import CellSamples, metrics_of, samples_of
        if row is not None and row.id:
            records: Iterable[RequestRecord] = self.store.requests(row.id)
        elif launch is None:
            raise _NeedsServer
        else:
            row, result = await self._run_cell(launch, cell)
            records = result.all_records()
        spec, s = self.plan.spec, row.summary
        values = samples_of(records, metrics_of(spec.capacity_tiers()), spec.slo, s.jobs)
        bounds = {k: b.bound for k, b in ((s.figures.client_bounds if s.figures else None) or {}).items()}
        marks = {k: m.cause for k, m in ((s.figures.client_marks if s.figures else None) or {}).items()}
        got = CellSamples(key=row.key, repeat=row.repeat, status=row.status, values=values,
                          request_rate=s.request_throughput, slices=s.slices, bounds=bounds, marked=list(marks),
                          causes=marks, schedule_off=s.send.send_schedule_off if s.send and s.send.reshaped else None,
                          late_ms=(s.send.send_late_max_ms or 0.0) if s.send else 0.0)
        return got.with_doubt(spec.capacity_tiers(), spec.find_capacity != "rate")

    def job(self, launch: _Launch, cell: PlannedCell, watch: Watch) -> CellJob:
        """The cell as it is handed down: built here, once, for every command, with what the cell needs of
        the study's options; its progress goes to the listeners, the server is watched by `watch`."""
        spec, endpoint = self.plan.spec, launch.endpoint
        request = request_options(spec, launch.traced, endpoint.caps)
        return CellJob(endpoint, cell.workload, cell.load, request, verdict_policy(spec, endpoint),
                       spec.slo, spec.timeslice_s, self.executor, self.settings.keep_records,
                       lambda p: self.ev.cell_progress(cell, p), watch)

    async def _run_cell(self, launch: _Launch, cell: PlannedCell) -> tuple[CellRow, CellResult]:
        """Run one cell on the launched server, store it, tell the listeners; the stored row, and the cell's
        result (its records on the spool: a capacity search reads them). A cell the user stopped (Ctrl-C) is
        stored as interrupted, then the run stops (CellInterrupted)."""
        server = launch.server
        _not_stopped()
        reset_prefix_cache(server)
        self.ev.cell_started(cell)
        kv = _kv(cell, launch.kv_cap)
        watched = Watched(server, cell.workload, kv.over, self.traces if launch.traced else None)
        with cell_monitor(watched, self.plan.spec.monitor_interval_s, self.ev.log) as mon:
            result = await run_cell(launch.session, self.job(launch, cell, mon))
        if result.stopped:
            self.ev.log(f"interrupted: storing {cell.config.name} {cell.key} as interrupted "
                        f"(Ctrl-C again stops at once, without storing it)")
        gone = None if result.stopped else _gone(result.verdict, server.deployment is not None)
        row = CellRow.from_result(cell, result, kv)
        records: Iterable[RequestRecord] = result.all_records()
        if mon.joined is not None:                       # each record with the server's timings of it
            records = mon.joined.records(records)
            for _ in mon.joined.records([*result.warmup, *result.records]):    # the ones kept in memory too
                pass
        self.journal.add(launch.config_id, row, records, mon.rows(), cell.config.name)
        self.attempted.add((cell.config.name, cell.key, cell.repeat))
        self.ev.cell_stored(cell, row, result)
        self.ev.cell_done(cell, row)
        if result.stopped:
            raise CellInterrupted(cell.config.name, row)
        if gone:
            raise gone(f"cell {cell.key}: {result.message}")
        return row, result

    def _skip(self, launch: _Launch, cell: PlannedCell, reason: str) -> None:
        row = CellRow.skipped(cell, (cell.workload.input_len or 0, cell.workload.output_len or 0), reason,
                              _kv(cell, launch.kv_cap))
        self.journal.add(launch.config_id, row, [], config=cell.config.name)
        self.ev.cell_done(cell, row)
