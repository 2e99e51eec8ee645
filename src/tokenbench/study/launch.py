"""One server config's life in a study: deployed (or the server given), its facts read and stored, its
endpoint probed, then its planned cells run in order or its capacity searches run (study/cells.py,
study/searches.py). A server that dies mid-cell fails that cell with the cause, and the config is launched
again (at most MAX_LAUNCHES times, when tokenbench owns the server); one that stops answering stops the run.
A launch that fails is kept with its cause read from the engine's log (logs/launch.py): one a relaunch cannot
change (out of memory, an unknown flag, a refused value) is not repeated, and a study that takes it as a
result (a tune) goes on from it. An engine that started and then died is kept with the config too (a `Death`:
the launch, the cell, the cause read from the end of its log); a study that picks a config (a tune) takes the
death as its result and does not launch it again. Launches are numbered per config over the whole run (every
visit of a config, and what a resume finds stored), so a number names one launch."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tokenbench.client.records import OUT_OF_FILES
from tokenbench.client.transport import new_session
from tokenbench.deploy.engines import with_graphs
from tokenbench.errors import DeployError, SpecError, TargetError
from tokenbench.load.clock import ctrl_c_to_loop
from tokenbench.load.clock import run as run_loop
from tokenbench.load.probe import method_line, probe_lines, probed
from tokenbench.load.target import Endpoint, resolve
from tokenbench.spec.study import StudySpec
from tokenbench.store import commands
from tokenbench.store.journal import Target
from tokenbench.study.cells import Cells, Launch, ServerDied, ServerUnreachable
from tokenbench.study.plan import Plan, PlannedCell, ServerConfig, check_context
from tokenbench.study.searches import Searches
from tokenbench.study.server_process import identify
from tokenbench.study.servers import Server, death_cause, expected_ctx, launch_failure, load_profile, server_for
from tokenbench.study.settings import RunContext, Searching

if TYPE_CHECKING:
    from tokenbench.logs.launch import LaunchFailure

MAX_LAUNCHES = 3      # per server config: the first launch and up to two relaunches after a death
LAUNCH_CAUSES = {"command_missing": "the engine's command not found", "out_of_memory": "out of memory", "port_in_use": "port in use", "unsupported_flag": "a flag the "
                 "engine does not know", "rejected_value": "a value the engine refuses", "accelerator_error":
                 "accelerator error", "model_missing": "model missing", "context_too_small": "a context too small "
                 "for the workload", "not_ready": "not ready in time", "exited": "exited"}

Pending = Callable[[ServerConfig], Sequence["PlannedCell | None"]]


class ContextTooSmall(SpecError):
    """A config whose context cannot hold the workload, in a study that records it and goes on (a tune)."""


def endpoint_for(spec: StudySpec, base_url: str, profile=None) -> Endpoint:
    """The benchmark's view of the server. The API key: the spec's, else the deployed profile's own
    secret `--api-key` variable (the server requires it, so the client must send it)."""
    key_var = None
    if profile is not None:
        from tokenbench.deploy.secret_refs import api_key_var  # a deployed profile's secret references
        key_var = api_key_var(profile)
    return resolve(base_url, spec.target, spec.workload, key_var)


def probed_endpoint(spec: StudySpec, server: Server, log: Callable[[str], None]) -> Endpoint:
    """The launch's endpoint with what the server accepts (probed once per launch, or assumed), stored with
    the server's facts; its notices and the method chosen go to the log."""
    endpoint = probed(endpoint_for(spec, server.base_url, server.profile), spec.target, spec.api,
                      server.facts.engine)
    endpoint.caps.method = method_line(endpoint, spec.target)
    server.facts.with_capabilities(endpoint.caps)
    for line in probe_lines(endpoint, spec.target):
        log(line)
    return endpoint


def fits(plan: Plan, searching: Searching, ctx_per_seq: int | None, where: str) -> None:
    """The workload's sequences fit the config's context; else ContextTooSmall (a tune goes on from it)."""
    try:
        check_context(plan, ctx_per_seq, where)
    except SpecError as exc:
        from tokenbench.logs.launch import too_small
        if not searching.launch_is_result(too_small(exc.message)):
            raise
        raise ContextTooSmall(exc.message, exc.hint) from None


def failed_launch(ctx: RunContext, config: ServerConfig, exc: DeployError | ContextTooSmall) -> LaunchFailure:
    """Why the config did not start, stored with it."""
    from tokenbench.logs.launch import too_small  # why a config did not start: only when one did not
    failure = too_small(exc.message) if isinstance(exc, ContextTooSmall) else launch_failure(exc)
    ctx.store.set_config_launch(ctx.run_id, config.name, failure)
    return failure


def launched(ctx: RunContext) -> dict[str, int]:
    """Per config, the highest launch number the store holds for the run (its cells' launch facts, its deaths):
    what a resume counts on from."""
    out: dict[str, int] = {}
    seen = [(c.config, c.summary.launch.number) for c in ctx.store.cells(ctx.run_id) if c.summary.launch is not None]
    seen += [(c.name, d.launch) for c in ctx.store.configs(ctx.run_id) for d in c.deaths]
    for name, number in seen:
        if number is not None:
            out[name] = max(out.get(name, 0), int(number))
    return out


def relaunchable(ctx: RunContext) -> bool:
    """tokenbench deploys the config's server itself (a profile, no server given), so it can launch it again."""
    return ctx.settings.server is None and bool(ctx.plan.spec.target.profile)


class Launcher:
    """Takes a server config through its launches; `pending` says which of its cells are still to run."""

    def __init__(self, ctx: RunContext, searches: Searches, cells: Cells, pending: Pending) -> None:
        self.ctx, self.searches, self.cells, self.pending = ctx, searches, cells, pending
        self.launches: dict[str, int] | None = None      # config name -> its launches so far in the run

    def run_config(self, config: ServerConfig) -> str | None:
        """Deploy and run the config's pending cells; relaunch after a server death (bounded). A capacity
        search the store completes is replayed without a launch. A launch that fails for a cause a relaunch
        cannot change (out of memory, an unknown flag, a refused value: logs/launch.py) is not repeated."""
        ctx = self.ctx
        if ctx.plan.spec.find_capacity and self.searches.replayed(config):
            self._status(config, "done", "; ".join(self.searches.lines.get(config.name, [])))
            return None
        config_id = ctx.store.upsert_config(ctx.run_id, config.name, config.as_dict(), status="deploying")
        events: list[str] = []
        failed: LaunchFailure | None = None
        for _ in range(MAX_LAUNCHES):
            failed = None
            number = self._number(config)
            try:
                self._launch_and_run(config, config_id, number)
                self._status(config, "done", "; ".join(events + self.searches.lines.get(config.name, [])))
                return None
            except ServerUnreachable as gone:
                self._unreachable(config, gone, number, events)
            except ServerDied as died:
                if self._died(config, died, number, events):
                    return None
            except (DeployError, ContextTooSmall) as exc:
                failed = failed_launch(ctx, config, exc)
                events.append(f"launch {number} failed ({LAUNCH_CAUSES[failed.cause]}): {exc.one_line()}")
            ctx.events.log(f"{config.name}: {events[-1]}")
            if failed is not None and not failed.retried:
                break                                   # a relaunch starts it no better
            if not self.pending(config):
                self._status(config, "done", "; ".join(events))
                return None
            if not relaunchable(ctx):
                break                                   # not ours to relaunch
        return self._unfinished(config, events, failed)

    def _number(self, config: ServerConfig) -> int:
        """The next launch's number among the config's launches in this run (those a resume finds stored, in
        its cells and its deaths, counted: read once, when the runner first launches)."""
        if self.launches is None:
            self.launches = launched(self.ctx)
        self.launches[config.name] = self.launches.get(config.name, 0) + 1
        return self.launches[config.name]

    def _died(self, config: ServerConfig, died: ServerDied, number: int, events: list[str]) -> bool:
        """The death kept with the config (its launch, the cell, the cause read from the end of the engine's log)
        and said in `events`; whether the config is done with: a study that picks a config takes the death as
        its result and does not launch it again."""
        from tokenbench.logs.launch import Death
        ctx = self.ctx
        death = Death(launch=number, cell=died.cell, sustain=died.role == "sustain",
                      failure=death_cause(died.seen, died.log))
        ctx.store.add_config_death(ctx.run_id, config.name, death)
        events.append(f"server died during {died} (launch {number}; {LAUNCH_CAUSES[death.failure.cause]})")
        if ctx.settings.searching.relaunch_after_death(config, death):
            return False
        ctx.events.log(f"{config.name}: {events[-1]}; not launched again: a config whose engine dies under load "
                       "is not one to pick")
        self._status(config, "failed", "; ".join(events))
        return True

    def _unreachable(self, config: ServerConfig, gone: ServerUnreachable, number: int, events: list[str]) -> None:
        """Said in `events`; a server tokenbench cannot relaunch stops the run (TargetError)."""
        events.append(f"server unreachable during {gone} (launch {number})")
        if not relaunchable(self.ctx):
            self._status(config, "failed", "; ".join(events))
            raise self._stopped(gone) from None

    def _stopped(self, gone: ServerUnreachable) -> TargetError:
        """The run stops: a server it cannot relaunch stopped answering (or the client ran out of files)."""
        kind, store, run_id = self.ctx.settings.kind, self.ctx.store, self.ctx.run_id
        first = "raise the limit" if OUT_OF_FILES in str(gone) else "check that the server is running"
        return TargetError(f"{kind} stopped: {gone}", f"{first}, then {commands.resume_advice(store, kind, run_id)}; "
                           "finished cells were kept")

    def _unfinished(self, config: ServerConfig, events: list[str], failed: LaunchFailure | None) -> str | None:
        """The config's status after its last launch; a problem line, unless it did not start and the study
        takes that as a result (a tune)."""
        if failed is not None and self.ctx.settings.searching.launch_is_result(failed):
            self._status(config, "failed", events[-1])
            return None
        message = "; ".join(events) + f"; {len(self.pending(config))} cell(s) left for --resume"
        self._status(config, "failed", message)
        return message

    def _status(self, config: ServerConfig, status: str, message: str) -> None:
        self.ctx.store.set_config_status(self.ctx.run_id, config.name, status, message)

    def _launch_and_run(self, config: ServerConfig, config_id: int, number: int = 1) -> None:
        ctx = self.ctx
        spec, given_server = ctx.plan.spec, ctx.settings.server
        given = contextlib.nullcontext(given_server) if given_server else None
        where = f"server config {config.name}"
        if not given and spec.target.profile:
            fits(ctx.plan, ctx.settings.searching, expected_ctx(load_profile(spec.target, config)), where)
        with given or server_for(spec.target, config, ctx.events.log, ctx.settings.isolation,
                                 ctx.traces.traced_profile) as server:
            fits(ctx.plan, ctx.settings.searching, server.facts.ctx_per_seq, where)
            with_graphs(server.facts, server.profile)
            endpoint = probed_endpoint(spec, server, ctx.events.log)
            ctx.store.upsert_config(ctx.run_id, config.name, config.as_dict(), server.profile, server.facts,
                                    status="running")
            ctx.store.set_config_launch(ctx.run_id, config.name, None)
            ctx.journal.header.add_config_facts(config.name, server.facts)
            with ctrl_c_to_loop():
                todo = None if spec.find_capacity else [c for c in self.pending(config) if c is not None]
                run_loop(self._measure(server, endpoint, config, config_id, todo, number))

    async def _measure(self, server: Server, endpoint: Endpoint, config: ServerConfig, config_id: int,
                       todo: list[PlannedCell] | None, number: int = 1) -> None:
        """On one launch (the config's `number`th in this run): the planned cells `todo` in order, or (None)
        the config's capacity searches."""
        async with self._launched(server, endpoint, config_id, number) as launch:
            if todo is None:
                await self.searches.run(launch, config, config_id)
            else:
                await self.cells.run_planned(launch, todo)

    @contextlib.asynccontextmanager
    async def _launched(self, server: Server, endpoint: Endpoint, config_id: int, number: int = 1):
        """The facts, one HTTP session for the launch's cells, the server's process (study/server_process.py); the JSON
        result and the listeners learn the target and the method its lengths are kept by."""
        ctx = self.ctx
        spec = ctx.plan.spec
        facts = server.facts.to_dict()
        ctx.journal.header.set_target(facts, Target(endpoint.base_url, endpoint.model, endpoint.max_model_len,
                                                    endpoint.vocab, method_line(endpoint, spec.target)))
        ctx.events.target_ready(endpoint, facts)
        kv_cap = spec.kv_capacity or server.facts.kv_capacity_tokens
        traced = ctx.traces.on_for(server)
        dep = server.deployment                  # launched by this process for this run (not `deploy up`'s)
        ours = dep is not None and dep.state.owner_pid == os.getpid()
        async with new_session(spec.target.timeout_s, spec.target.connect_in_ttft) as session:
            yield Launch(server=server, endpoint=endpoint, config_id=config_id, kv_cap=kv_cap, session=session,
                         traced=traced, process=identify(server), number=number if ours else None)
