"""Run a study: plan it, check it before anything is deployed, store it as one run, run every cell not
yet stored on each server config (relaunching a server tokenbench owns), keep the run's status.

A benchmark is a study with one server configuration and no relaunch; a sweep is a study over
several. `bench`, `sweep`, `demo` and `agree` all run through `start` + `execute`, so resume,
storage and the result files behave the same everywhere."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tokenbench import __version__
from tokenbench.deploy import address
from tokenbench.errors import DeployError, MeasurementError, SpecError, TargetError, UsageError
from tokenbench.host import environment
from tokenbench.load.cell import CellResult
from tokenbench.load.target import ResolvedTarget
from tokenbench.spec.loader import load_model
from tokenbench.spec.sweep import SweepSpec
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow
from tokenbench.sweep.plan import Plan, PlannedCell, check_context, plan
from tokenbench.sweep.run import SweepEvents, SweepRunner, client_target
from tokenbench.sweep.servers import Server, expected_ctx, load_profile


class Sink(Protocol):
    """A result file fed as the study runs (outputs.JsonResult, outputs.VllmResults)."""

    def target_ready(self, target: ResolvedTarget, facts: dict) -> None: ...
    def cell_stored(self, cell: PlannedCell, row: CellRow, result: CellResult) -> None: ...
    def finish(self, status: str) -> None: ...
    def locations(self) -> list[str]: ...


@dataclass
class Outcome:
    run_id: str
    store: Store
    cells: list[CellRow]                           # the run's stored cells, this and earlier sessions
    problems: list[str]                            # server configs that could not finish
    capacity: dict[str, list[str]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)        # "wrote PATH" of tokenbench's JSON result

    @property
    def failed(self) -> list[CellRow]:
        return [c for c in self.cells if c.status == "failed"]


def preflight(p: Plan) -> None:
    """Everything that can be checked before a deploy: profiles load, contexts fit."""
    if not p.spec.target.profile:
        return
    for config in p.configs:
        profile = load_profile(p.spec.target, config)
        check_context(p, expected_ctx(profile), f"profile {profile.name} [{config.name}]")


def create_run(store: Store, p: Plan, kind: str, argv: Sequence[str], target: str | None = None,
               profile=None) -> str:
    stored_spec = {**p.spec.model_dump(mode="json"), "planned_cells": len(p.cells)}
    where = target or p.spec.target.base_url or p.spec.target.profile or ""
    return store.create_run(kind, where, stored_spec, list(argv), environment.capture(profile))


def stored_spec(store: Store, run_id: str, kind: str) -> SweepSpec:
    """The spec of a stored run, for --resume; a run of another kind says how to resume it."""
    row = store.run(run_id)
    if row.kind != kind:
        hint = (f"resume it with `tokenbench {row.kind} --resume {run_id}`" if row.kind in ("bench", "sweep")
                else "only bench and sweep runs can be resumed; rerun it as a new run")
        raise UsageError(f"run {run_id} is a {row.kind} run, not a {kind}: `{kind} --resume` continues "
                         f"{kind} runs", hint)
    spec = dict(row.spec)
    spec.pop("planned_cells", None)
    try:
        return load_model(SweepSpec, spec, f"run {run_id}")
    except SpecError:
        raise UsageError(f"run {run_id} was stored by an older tokenbench whose {kind} spec cannot be resumed",
                         f"rerun it: `tokenbench {kind}` with the same options") from None


def start(spec: SweepSpec, store: Store, kind: str, argv: Sequence[str], resume: str | None = None,
          server: Server | None = None, output: str | None = None) -> SweepRunner:
    """Plan, check and (unless resuming) store a new run; `server`: one already running (demo);
    `output`: tokenbench's JSON result, rewritten after every cell."""
    if spec.target.base_url is not None and server is None and not resume:
        spec.target.base_url = address.base_url(spec.target.base_url)     # a deployment name, no scheme
    p = plan(spec)
    preflight(p)
    if spec.target.base_url and server is None:
        client_target(spec, spec.target.base_url)       # reachable, model served, vocabulary known: else stop here
    profile = server.profile if server else (load_profile(spec.target, p.configs[0]) if spec.target.profile else None)
    run_id = resume or create_run(store, p, kind, argv, profile.name if server and profile else None, profile)
    runner = SweepRunner(p, store, run_id, server=server, output=output, kind=kind)
    runner.journal.doc.update(tool={"name": "tokenbench", "version": __version__}, command=list(argv),
                              environment=store.run(run_id).environment or {})
    return runner


def pending_count(runner: SweepRunner) -> int | None:
    """Cells left to run; None for a capacity search (it decides its cells as results come in)."""
    if runner.plan.spec.find_capacity:
        return None
    return sum(len(runner.pending(c)) for c in runner.plan.configs)


def _fan_out(runner: SweepRunner, events: SweepEvents, sinks: Sequence[Sink]) -> SweepEvents:
    def ready(target: ResolvedTarget, facts: dict) -> None:
        v = target.vocab
        runner.journal.doc.update(server_facts=facts, target={
            "base_url": target.base_url, "model": target.model, "max_model_len": target.max_model_len,
            "vocab": {"size": v.size, "low": v.low, "high": v.high, "source": v.source}})
        events.target_ready(target, facts)
        for s in sinks:
            s.target_ready(target, facts)

    def stored(cell: PlannedCell, row: CellRow, result: CellResult) -> None:
        events.cell_stored(cell, row, result)
        for s in sinks:
            s.cell_stored(cell, row, result)
    return SweepEvents(log=events.log, cell_started=events.cell_started, cell_progress=events.cell_progress,
                       cell_done=events.cell_done, target_ready=ready, cell_stored=stored)


def _finish(sinks: Sequence[Sink], status: str) -> None:
    for s in sinks:
        s.finish(status)


def execute(runner: SweepRunner, events: SweepEvents, sinks: Sequence[Sink] = ()) -> Outcome:
    """Run the missing cells; keep the run's status (interrupted, failed, done) and the sinks current."""
    store, run_id = runner.store, runner.run_id
    store.set_run_status(run_id, "running")
    runner.ev = _fan_out(runner, events, sinks)
    try:
        problems = runner.run()
    except KeyboardInterrupt:
        store.set_run_status(run_id, "interrupted", "interrupted; resume with --resume")
        _finish(sinks, "interrupted")
        raise
    except (DeployError, MeasurementError, SpecError, TargetError, UsageError) as exc:
        store.set_run_status(run_id, "failed", exc.one_line())
        _finish(sinks, "failed")
        raise
    out = Outcome(run_id, store, store.cells(run_id), problems, runner.capacity)
    status = "failed" if out.failed or problems else "done"
    store.set_run_status(run_id, status, "; ".join(problems))
    runner.journal.doc["status"] = status
    runner.journal.write()
    _finish(sinks, status)
    out.files = [f"wrote {runner.journal.json_path}"] if runner.journal.json_path else []
    return out


def check(out: Outcome, kind: str) -> None:
    """Raise the one-line error of an incomplete or failed study (everything measured is kept)."""
    if out.problems and not out.failed:
        raise DeployError(f"{kind} incomplete: {out.problems[0]}",
                          f"fix the cause, then `tokenbench {kind} --resume {out.run_id}`")
    if out.failed:
        first = out.failed[0]
        raise MeasurementError(f"{len(out.failed)} cell(s) failed, first {first.key}: {first.message}",
                               "results were kept; see `tokenbench report` and the JSON/database for each "
                               "request's error")


def measure(spec: SweepSpec, json_path: str | None = None, events: SweepEvents | None = None) -> Outcome:
    """A study kept only in a temporary database (agree, scripts): the outcome's cells carry the summaries;
    `json_path` also writes tokenbench's JSON result."""
    with tempfile.TemporaryDirectory(prefix="tokenbench-") as folder:
        store = Store(Path(folder) / "results.db")
        runner = start(spec, store, "bench", [], output=json_path)
        out = execute(runner, events or SweepEvents(log=lambda m: None))
        store.close()
    check(out, "bench")
    return out
