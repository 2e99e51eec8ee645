"""A study as one stored run: plan it, check it before anything is deployed (study/preflight.py), store it
as one run (`start`), run every cell not yet stored under the run's lock (`execute`: the runner, study/configs.py),
keep the run's status and its result files, and say how it ended (`Outcome`, `check`).

A benchmark is a study with one server configuration and no relaunch; a sweep is a study over
several. `bench`, `sweep`, `demo`, `calibrate` and `agree` all run through `start` + `execute` (or
`measure`, which is both over a temporary database), so resume, storage and the result files behave the
same everywhere, and every cell is run by the one runner (study/configs.StudyRunner), through
study/cells.Cells.run."""

from __future__ import annotations

import dataclasses
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tokenbench import __version__
from tokenbench.deploy import address
from tokenbench.errors import DeployError, Interrupted, MeasurementError, SpecError, TargetError, UsageError
from tokenbench.host import environment, isolation
from tokenbench.load.cell import CellResult
from tokenbench.load.target import Endpoint
from tokenbench.metrics.verdict import how_far
from tokenbench.spec.loader import load_model
from tokenbench.spec.study import StudySpec
from tokenbench.store import commands, run_lock
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow
from tokenbench.study.cells import CellInterrupted
from tokenbench.study.configs import StudyRunner
from tokenbench.study.launch import endpoint_for
from tokenbench.study.plan import Plan, PlannedCell, pending, plan
from tokenbench.study.preflight import preflight
from tokenbench.study.servers import load_profile
from tokenbench.study.settings import RunSettings, StudyEvents

RESUMABLE = commands.RESUMABLE


class ResultFile(Protocol):
    """A result file fed as the study runs (result_files.VllmResults and SglangResults; `Kept` keeps the
    results in memory)."""

    needs_records: bool        # it reads every record of a cell (the cells then keep them in memory)

    def target_ready(self, endpoint: Endpoint, facts: dict) -> None: ...
    def cell_stored(self, cell: PlannedCell, row: CellRow, result: CellResult) -> None: ...
    def finish(self, status: str) -> None: ...
    def locations(self) -> list[str]: ...


@dataclass
class Study:
    """A planned study, stored as one run (new or resumed), ready to execute."""

    plan: Plan
    store: Store
    run_id: str
    settings: RunSettings
    new: bool = True              # stored by this session (not a resume): a usage error leaves no run behind


@dataclass(kw_only=True)
class Outcome:
    run_id: str
    store: Store
    cells: list[CellRow]                           # the run's stored cells, this and earlier sessions
    problems: list[str]                            # server configs that could not finish
    capacity: dict[str, list[str]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)        # "wrote PATH" of tokenbench's JSON result
    results: list[CellResult] = field(default_factory=list)   # this session's cells, when kept (`measure`)
    measured: int = 0                              # cells measured by this session (0: a resume with nothing left)

    @property
    def failed(self) -> list[CellRow]:
        return [c for c in self.cells if c.status == "failed"]


def salted(spec: StudySpec) -> None:
    """A new run without a seed gets its salt: its prompts share nothing with another run's (docs/workloads.md,
    "Fresh prompts"); with --seed (or a seed in the spec) its prompts are the same in every run."""
    if "seed" not in spec.model_fields_set and spec.prompt_salt is None:
        spec.prompt_salt = secrets.token_hex(6)


def create_run(store: Store, p: Plan, settings: RunSettings, argv: Sequence[str], profile=None) -> str:
    """Store the new run: its spec, command and environment; its target is the server given (demo: the
    profile deployed), else the spec's URL or profile."""
    stored_spec = {**p.spec.model_dump(mode="json"), "planned_cells": len(p.cells)}
    given = profile.name if settings.server and profile else None
    where = given or p.spec.target.base_url or p.spec.target.profile or ""
    env = environment.capture(profile, isolation=settings.isolation.record())
    return store.create_run(settings.kind, where, stored_spec, list(argv), env)


def stored_spec(store: Store, run_id: str, kind: str) -> StudySpec:
    """The spec of a stored run, for --resume; a run of another kind says how to resume it."""
    row = store.run(run_id)
    if row.kind != kind:
        hint = (f"resume it with `{commands.resume(store.path, row.kind, run_id)}`" if row.kind in RESUMABLE
                else "only bench, sweep and tune runs can be resumed; rerun it as a new run")
        raise UsageError(f"run {run_id} is a {row.kind} run, not a {kind}: `{kind} --resume` continues "
                         f"{kind} runs", hint)
    spec = dict(row.spec)
    spec.pop("planned_cells", None)
    try:
        return load_model(StudySpec, spec, f"run {run_id}")
    except SpecError:
        raise UsageError(f"run {run_id} was stored by an older tokenbench whose {kind} spec cannot be resumed",
                         f"rerun it: `tokenbench {kind}` with the same options") from None


def start(spec: StudySpec, store: Store, settings: RunSettings, argv: Sequence[str] = (),
          resume: str | None = None) -> Study:
    """Plan, check and (unless resuming) store a new run. `settings.server`: one already running (demo),
    named as the run's target; `settings.output`: tokenbench's JSON result, rewritten after every cell."""
    server = settings.server
    if spec.target.base_url is not None and server is None and not resume:
        spec.target.base_url = address.base_url(spec.target.base_url)     # a deployment name, no scheme
    if resume:                          # another process measuring it: refused before anything is done
        run_lock.refuse_if_held(store, resume, commands.resume_advice(store, settings.kind, resume))
    else:
        salted(spec)
    p = plan(spec)
    preflight(p)
    if spec.target.base_url and server is None and (not resume or _left(p, store, resume)):
        endpoint_for(spec, spec.target.base_url)        # reachable, model served, vocabulary known: else stop here
    profile = server.profile if server else (load_profile(spec.target, p.configs[0]) if spec.target.profile else None)
    if settings.isolation == isolation.Isolation():          # not planned by the caller (demo plans its own)
        local = server is None and profile is not None and profile.runs_in == "local"
        settings = dataclasses.replace(settings, isolation=isolation.plan(spec.client, local))
    run_id = resume or create_run(store, p, settings, argv, profile)
    header = {"tool": {"name": "tokenbench", "version": __version__}, "command": list(argv),
              "environment": store.run(run_id).environment or {}}
    return Study(p, store, run_id, dataclasses.replace(settings, header=header), new=not resume)


def _left(p: Plan, store: Store, run_id: str) -> bool:
    """Whether a resumed run may have cells to measure (a capacity search decides its cells as it goes)."""
    done = store.done_keys(run_id)
    return bool(p.spec.find_capacity) or any(pending(p, done, c) for c in p.configs)


def pending_count(study: Study) -> int | None:
    """Cells left to run; None for a capacity search (it decides its cells as results come in)."""
    p = study.plan
    if p.spec.find_capacity:
        return None
    done = study.store.done_keys(study.run_id)
    return sum(len(pending(p, done, c)) for c in p.configs)


def _fan_out(events: StudyEvents, files: Sequence[ResultFile]) -> StudyEvents:
    def ready(endpoint: Endpoint, facts: dict) -> None:
        events.target_ready(endpoint, facts)
        for f in files:
            f.target_ready(endpoint, facts)

    def stored(cell: PlannedCell, row: CellRow, result: CellResult) -> None:
        events.cell_stored(cell, row, result)
        for f in files:
            f.cell_stored(cell, row, result)
    return dataclasses.replace(events, target_ready=ready, cell_stored=stored)


def _finish(files: Sequence[ResultFile], status: str) -> None:
    for f in files:
        f.finish(status)


def execute(study: Study, events: StudyEvents, files: Sequence[ResultFile] = ()) -> Outcome:
    """Run the missing cells under the run's lock; keep the run's status (interrupted, failed, done) and the
    result files current."""
    store, run_id = study.store, study.run_id
    with run_lock.held(store, run_id, commands.resume_advice(store, study.settings.kind, run_id)), \
            isolation.applied(study.settings.isolation):
        return _measure(study, events, files)


def _measure(study: Study, events: StudyEvents, files: Sequence[ResultFile]) -> Outcome:
    store, run_id = study.store, study.run_id
    keep = study.settings.keep_records or any(f.needs_records for f in files)
    runner = StudyRunner(study.plan, store, run_id, dataclasses.replace(study.settings, keep_records=keep),
                         _fan_out(events, files))
    store.set_run_status(run_id, "running")
    try:
        problems = runner.run()
    except CellInterrupted as stop:
        raise _interrupted(study, runner, files, stop) from None
    except KeyboardInterrupt:            # a second Ctrl-C, or one outside any cell: nothing may wait now
        with store.no_wait():
            store.set_run_status(run_id, "interrupted", "interrupted by the user")
        _finish(files, "interrupted")
        raise
    except UsageError as exc:              # bad input found once the server answered: nothing was measured
        if not (study.new and store.discard_run(run_id)):
            store.set_run_status(run_id, "failed", exc.one_line())
        _finish(files, "failed")
        raise
    except (DeployError, MeasurementError, TargetError) as exc:
        store.set_run_status(run_id, "failed", exc.one_line())
        _finish(files, "failed")
        raise
    out = Outcome(run_id=run_id, store=store, cells=store.cells(run_id), problems=problems, capacity=runner.capacity,
                  measured=len(runner.attempted))
    status = "failed" if out.failed or problems else "done"
    store.set_run_status(run_id, status, "; ".join(problems))
    runner.journal.header.set_status(status)
    runner.journal.write()
    _finish(files, status)
    out.files = [f"wrote {runner.journal.json_path}"] if runner.journal.json_path else []
    return out


def _interrupted(study: Study, runner: StudyRunner, files: Sequence[ResultFile], stop: CellInterrupted
                 ) -> Interrupted:
    """The first Ctrl-C in a cell: the cell is stored as interrupted; the run is marked interrupted, the
    result files finished; the one error line says where it is kept and how to resume it."""
    store, run_id, row = study.store, study.run_id, stop.row
    why = f"interrupted by the user in cell {stop.config} {row.key}"
    store.set_run_status(run_id, "interrupted", why)
    runner.journal.header.set_status("interrupted")
    runner.journal.write()
    _finish(files, "interrupted")
    where = f"; run {run_id} kept in {store.path}" if store.kept else ""
    finished = how_far(row.summary, int(row.summary.num_prompts or 0))
    return Interrupted(f"{why}: {finished}; the cell is stored as interrupted{where}",
                       f"{commands.resume_advice(store, study.settings.kind, run_id)} (it measures that cell "
                       "again in full)")


def check(out: Outcome, kind: str) -> None:
    """Raise the one-line error of an incomplete or failed study (everything measured is kept)."""
    if out.problems and not out.failed:
        raise DeployError(f"{kind} incomplete: {out.problems[0]}",
                          f"fix the cause, then {commands.resume_advice(out.store, kind, out.run_id)}")
    if out.failed:
        first = out.failed[0]
        kept = (f"`{commands.tokenbench(out.store.path, 'report', out.run_id)}` shows each request's error"
                if out.store.kept else "the JSON result holds each request's error")
        again = commands.resume_advice(out.store, kind, out.run_id)
        again += (" (it measures the failed cells again, with the options stored; a cause in an option needs a new "
                  "run)") if out.store.kept and kind in RESUMABLE else ""
        raise MeasurementError(f"{len(out.failed)} cell(s) failed, first {first.key}: {first.message}",
                               f"results were kept: {kept}; fix the cause, then {again}")


class Kept:
    """A result file that is no file: every cell's result kept in memory (with its records when asked), in
    the order the cells ran (calibrate, agree and the tests read them)."""

    def __init__(self, records: bool = True) -> None:
        self.needs_records = records
        self.results: list[CellResult] = []

    def target_ready(self, endpoint: Endpoint, facts: dict) -> None:
        return None

    def cell_stored(self, cell: PlannedCell, row: CellRow, result: CellResult) -> None:
        self.results.append(result)

    def finish(self, status: str) -> None:
        return None

    def locations(self) -> list[str]:
        return []


def measure(spec: StudySpec, json_path: str | None = None, events: StudyEvents | None = None,
            records: bool = True) -> Outcome:
    """A study kept only in a temporary database (calibrate, agree, scripts, the tests): the outcome's cells
    carry the stored rows and its `results` every cell's result (with its records unless `records` is
    False), in the order run; `json_path` also writes tokenbench's JSON result. A failed cell is returned
    like any other (`check` raises for it)."""
    kept = Kept(records)
    with tempfile.TemporaryDirectory(prefix="tokenbench-") as folder:
        store = Store(Path(folder) / "results.db")
        store.kept = False              # removed on return: nothing to resume from
        try:
            study = start(spec, store, RunSettings(kind="bench", output=json_path))
            out = execute(study, events or StudyEvents(log=lambda m: None), [kept])
        finally:
            store.close()
    out.results = kept.results
    return out
