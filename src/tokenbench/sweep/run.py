"""Run a planned sweep: per server config deploy, read facts, run each missing cell, tear down.

Every finished cell is committed in one transaction; `--resume` runs exactly the cells not committed.
A server that dies mid-cell fails that cell with the cause and the next config relaunches it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from tokenbench.client import api
from tokenbench.client.transport import new_session
from tokenbench.deploy.engines import reset_cache_path
from tokenbench.deploy.facts import ServerFacts
from tokenbench.deploy.secret_refs import api_key_var
from tokenbench.errors import DeployError, TargetError
from tokenbench.load.cell import CellProgress, CellResult, run_cell
from tokenbench.load.clock import run as run_loop
from tokenbench.load.target import ResolvedTarget, resolve
from tokenbench.spec.bench import Target
from tokenbench.store import commands
from tokenbench.store.db import Store
from tokenbench.store.journal import Journal
from tokenbench.sweep import capacity
from tokenbench.sweep.monitoring import cell_monitor
from tokenbench.sweep.plan import (
    Plan,
    PlannedCell,
    ServerConfig,
    capacity_load,
    check_context,
    kv_demand,
    over_capacity,
    visits,
)
from tokenbench.sweep.servers import Server, server_for

MAX_LAUNCHES = 3      # per server config: the first launch and up to two relaunches after a death


class ServerDied(Exception):
    """The server under test died during a cell; the cell is stored as failed with the cause."""


class ServerUnreachable(ServerDied):
    """The server stopped accepting connections during a cell (its process, if ours, still runs)."""


@dataclass
class SweepEvents:
    """Callbacks for progress display; all optional."""

    log: Callable[[str], None] = print
    cell_started: Callable[[PlannedCell], None] = lambda c: None
    cell_progress: Callable[[PlannedCell, CellProgress], None] = lambda c, p: None
    cell_done: Callable[[PlannedCell, dict], None] = lambda c, row: None
    target_ready: Callable[[ResolvedTarget, dict], None] = lambda target, facts: None   # per server launch
    cell_stored: Callable[[PlannedCell, dict, CellResult], None] = lambda c, row, result: None   # with records


def reset_prefix_cache(server: Server) -> None:
    path = reset_cache_path(server.facts.engine)
    if path:
        api.call(server.base_url, path, {}, quiet=True)


def _kv_capacity(plan: Plan, facts: ServerFacts) -> int | None:
    return plan.spec.kv_capacity or facts.kv_capacity_tokens


def _cell_row(cell: PlannedCell, result: CellResult, kv_cap: int | None, extra: dict) -> dict:
    return {"key": cell.key, "repeat": cell.repeat, "input_len": result.input_len,
            "output_len": result.output_len, "concurrency": cell.load.concurrency,
            "request_rate": cell.load.request_rate, "status": result.status, "message": result.message,
            "kv_demand": kv_demand(cell), "kv_capacity": kv_cap, "over_capacity": over_capacity(cell, kv_cap),
            "summary": {**result.summary, **extra}, "started_ns": result.started_ns}


def _gone(server: Server, result: CellResult) -> type[ServerDied] | None:
    """After a failed cell: did our engine die (relaunch), or did the server stop answering (stop, or
    relaunch when it is ours)? The cell's message says which, naming the server."""
    death = server.death() if result.status != "ok" else None
    if death and server.deployment is not None:
        result.status, result.message = "failed", f"server died during the cell: {death}; {result.message}"
        return ServerDied
    if result.unreachable:
        return ServerUnreachable
    if death:
        result.status, result.message = "failed", f"server unreachable: {death}; {result.message}"
        return ServerUnreachable
    return None


def _saturated(prev: dict | None, cur: dict) -> bool:
    """Throughput rose less than 3 % while median TTFT rose more than 50 %."""
    if not prev or not prev.get("output_throughput") or not cur.get("output_throughput"):
        return False
    gain = cur["output_throughput"] / prev["output_throughput"] - 1
    ttft_prev, ttft_cur = prev.get("median_ttft_ms") or 0, cur.get("median_ttft_ms") or 0
    return gain < 0.03 and ttft_prev > 0 and ttft_cur > 1.5 * ttft_prev


def client_target(spec, base_url: str, profile=None) -> ResolvedTarget:
    """The benchmark's view of the server. The API key: the spec's, else the deployed profile's own
    secret `--api-key` variable (the server requires it, so the client must send it)."""
    key_env = spec.target.api_key_env or (api_key_var(profile) if profile else None)
    shape = spec.target.model_dump(include={"final_usage_only", "no_min_tokens", "extra_body",
                                            "new_connection_per_request"})
    return resolve(Target(base_url=base_url, model=spec.target.model, api_key_env=key_env,
                          api_key_file=spec.target.api_key_file, timeout_s=spec.target.timeout_s, **shape),
                   spec.workload.tokenizer_path, spec.workload.vocab_size)


def _target(spec, server: Server) -> ResolvedTarget:
    return client_target(spec, server.base_url, server.profile)


class SweepRunner:
    def __init__(self, plan: Plan, store: Store, run_id: str, events: SweepEvents | None = None,
                 server: Server | None = None, output: str | None = None, kind: str = "sweep") -> None:
        """`server`: an already running server (e.g. deployed by `demo`) used instead of the target.
        `output`: a JSON result file rewritten after every cell (with the cells already stored).
        `kind`: the stored run's kind (bench or sweep), for the resume advice."""
        self.plan, self.store, self.run_id = plan, store, run_id
        hint = f"; then {commands.resume_advice(store, kind, run_id)}"
        self.journal = Journal(store, run_id, {"run_id": run_id, "kind": kind,
                                               "spec": plan.spec.model_dump(mode="json")}, output, hint)
        self.journal.seed_from_store()
        self.kind = kind
        self.ev = events or SweepEvents()
        self.server = server
        self.capacity: dict[str, list[str]] = {}      # config name -> capacity result lines
        self.capacity_done: set[str] = set()
        self.attempted: set[tuple[str, str, int]] = set()   # cells run by this process (a cut-short one too)
        self.round: int | None = None                       # the repeat being run (interleaved repeats)
        self.keep_records = False     # a result file that needs every record in memory (--save-result) sets it

    def pending(self, config: ServerConfig) -> list[PlannedCell]:
        if self.plan.spec.find_capacity:
            return [] if config.name in self.capacity_done else [None]   # cells are decided as it goes
        done = self.store.done_keys(self.run_id) | self.attempted
        return [c for c in self.plan.cells_for(config) if (config.name, c.key, c.repeat) not in done
                and self.round in (None, c.repeat)]

    def run(self) -> list[str]:
        """Run every config's missing cells, repeats of several configs interleaved (plan.visits); returns
        one line per config visit that could not finish."""
        problems = []
        for config, repeat in visits(self.plan):
            self.round = repeat
            if self.pending(config):
                problem = self._run_config(config)
                if problem:
                    problems.append(f"{config.name}: {problem}")
        self.round = None
        return problems

    def _run_config(self, config: ServerConfig) -> str | None:
        """Deploy and run the config's pending cells; relaunch after a server death (bounded)."""
        config_id = self.store.upsert_config(self.run_id, config.name, config.as_dict(), status="deploying")
        events = []
        for launch in range(1, MAX_LAUNCHES + 1):
            try:
                self._launch_and_run(config, config_id)
                self._config_status(config, "done", "; ".join(events + self.capacity.get(config.name, [])))
                return None
            except ServerUnreachable as gone:
                events.append(f"server unreachable during {gone} (launch {launch})")
                if not self._relaunchable():
                    self._config_status(config, "failed", "; ".join(events))
                    raise TargetError(f"{self.kind} stopped: {gone}", "check that the server is running, then "
                                      f"{commands.resume_advice(self.store, self.kind, self.run_id)}; "
                                      "finished cells were kept") from None
            except ServerDied as died:
                events.append(f"server died during {died} (launch {launch})")
            except DeployError as exc:
                events.append(f"launch {launch} failed: {exc.one_line()}")
            self.ev.log(f"{config.name}: {events[-1]}")
            if not self.pending(config):
                self._config_status(config, "done", "; ".join(events))
                return None
            if not self._relaunchable():
                break                                   # not ours to relaunch
        message = "; ".join(events) + f"; {len(self.pending(config))} cell(s) left for --resume"
        self._config_status(config, "failed", message)
        return message

    def _relaunchable(self) -> bool:
        return self.server is None and bool(self.plan.spec.target.profile)

    def _config_status(self, config: ServerConfig, status: str, message: str) -> None:
        self.store.set_config_status(self.run_id, config.name, status, message)

    def _launch_and_run(self, config: ServerConfig, config_id: int) -> None:
        given = contextlib.nullcontext(self.server) if self.server else None
        with given or server_for(self.plan.spec.target, config, self.ev.log) as server:
            check_context(self.plan, server.facts.ctx_per_seq, f"server config {config.name}")
            profile = server.profile.model_dump(mode="json") if server.profile else {}
            self.store.upsert_config(self.run_id, config.name, config.as_dict(), profile, server.facts.to_dict(),
                                     status="running")
            if self.plan.spec.find_capacity:
                run_loop(self._capacity(server, config, config_id))
            else:
                run_loop(self._cells(server, config_id, self.pending(config)))

    async def _cells(self, server: Server, config_id: int, todo: list[PlannedCell]) -> None:
        spec = self.plan.spec
        target = _target(spec, server)
        self.ev.target_ready(target, server.facts.to_dict())
        kv_cap = _kv_capacity(self.plan, server.facts)
        prev: dict[tuple, dict] = {}
        stopped: dict[tuple, str] = {}
        async with new_session(spec.target.timeout_s, spec.target.connect_in_ttft) as session:
            for cell in todo:
                pair = (cell.workload.input_len, cell.workload.output_len, cell.repeat, cell.load.request_rate is None)
                if pair in stopped:
                    self._skip(config_id, cell, kv_cap, stopped[pair])
                    continue
                row = await self._one(session, server, target, config_id, cell, kv_cap)
                if spec.stop_on_saturation and cell.load.concurrency and _saturated(prev.get(pair), row["summary"]):
                    stopped[pair] = f"skipped: throughput saturated at concurrency {cell.load.concurrency}"
                prev[pair] = row["summary"]

    async def _capacity(self, server: Server, config: ServerConfig, config_id: int) -> None:
        """Doubling then bisection per workload; cells already stored (resume) are reused, not rerun."""
        spec = self.plan.spec
        target = _target(spec, server)
        self.ev.target_ready(target, server.facts.to_dict())
        kv_cap = _kv_capacity(self.plan, server.facts)
        stored = {(c["config_name"], c["key"]): c for c in self.store.cells(self.run_id)}
        lines = []
        async with new_session(spec.target.timeout_s, spec.target.connect_in_ttft) as session:
            for wl in spec.workloads():
                gen = capacity.search(spec.capacity_max)
                c = next(gen)
                while True:
                    cell = PlannedCell(config, wl, capacity_load(spec, c), 0)
                    row = stored.get((config.name, cell.key)) or await self._one(session, server, target, config_id,
                                                                                 cell, kv_cap)
                    try:
                        c = gen.send(capacity.meets(row, spec.slo, spec.slo_attainment))
                    except StopIteration as end:
                        lines.append(capacity.describe(wl.label, *end.value, spec.capacity_max))
                        self.ev.log(f"{config.name}: {lines[-1]}")
                        break
        self.capacity[config.name] = lines
        self.capacity_done.add(config.name)

    async def _one(self, session, server: Server, target, config_id: int, cell: PlannedCell, kv_cap) -> dict:
        spec = self.plan.spec
        reset_prefix_cache(server)
        self.ev.cell_started(cell)
        with cell_monitor(server, spec.monitor_interval_s, self.ev.log) as mon:
            result = await run_cell(session, target, cell.workload, cell.load, spec.slo,
                                    allow_mismatch=spec.allow_length_mismatch, max_error_rate=spec.max_error_rate,
                                    allow_client_lag=spec.allow_client_lag,
                                    workers=spec.client.workers, ray_address=spec.client.ray_address,
                                    keep_raw=spec.client.keep_raw,
                                    keep_records=self.keep_records, on_progress=lambda p: self.ev.cell_progress(cell, p))
        star = over_capacity(cell, kv_cap)
        gone = _gone(server, result)
        row = _cell_row(cell, result, kv_cap, mon.summary(result.summary.get("total_output_tokens"), star))
        self.journal.add(config_id, row, result.all_records(), mon.rows(), cell.config.name)
        self.attempted.add((cell.config.name, cell.key, cell.repeat))
        self.ev.cell_stored(cell, row, result)
        self.ev.cell_done(cell, row)
        if result.stopped:
            raise KeyboardInterrupt          # stored: the run stops here, `--resume` runs the cells left
        if gone:
            raise gone(f"cell {cell.key}: {result.message}")
        return row

    def _skip(self, config_id: int, cell: PlannedCell, kv_cap, reason: str) -> None:
        row = {"key": cell.key, "repeat": cell.repeat, "input_len": cell.workload.input_len or 0,
               "output_len": cell.workload.output_len or 0, "concurrency": cell.load.concurrency,
               "request_rate": cell.load.request_rate, "status": "skipped", "message": reason,
               "kv_demand": kv_demand(cell), "kv_capacity": kv_cap, "over_capacity": over_capacity(cell, kv_cap),
               "summary": {}}
        self.journal.add(config_id, row, [], config=cell.config.name)
        self.ev.cell_done(cell, row)
