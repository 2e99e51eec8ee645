"""`tokenbench sweep`: lengths x concurrency x server configs, unattended and resumable."""

from __future__ import annotations

import sys

import click

from tokenbench.cli import console, options
from tokenbench.errors import DeployError, MeasurementError, SpecError, TargetError, UsageError
from tokenbench.spec.loader import load_file, load_model
from tokenbench.spec.sweep import SweepSpec
from tokenbench.store import environment
from tokenbench.store.db import Store, default_db_path
from tokenbench.sweep.plan import Plan, PlannedCell, check_context, kv_demand, max_fitting_concurrency, plan
from tokenbench.sweep.run import SweepEvents, SweepRunner
from tokenbench.sweep.servers import expected_ctx, load_profile


def _from_flags(kw: dict) -> SweepSpec:
    if not kw["base_url"] or not kw["pairs"] or not (kw["concurrency"] or kw["request_rate"] or kw["find_capacity"]):
        raise UsageError("give a SPEC.yaml, or --base-url with --pairs and --concurrency/--request-rate",
                         "e.g. tokenbench sweep --base-url URL --pairs 512:512 --concurrency 1,8")
    data = {"target": {"base_url": kw["base_url"], "api_key_env": kw["api_key_env"]},
            "pairs": options.pairs("--pairs", kw["pairs"]),
            "concurrency": options.int_list("--concurrency", kw["concurrency"]),
            "rates": options.float_list("--request-rate", kw["request_rate"]),
            "kv_capacity": kw["kv_capacity"], "slo": options.slo(kw["slo"]).model_dump(),
            "find_capacity": kw["find_capacity"]}
    if kw["num_prompts"]:
        data["requests"] = {"per_concurrency": 1, "min": kw["num_prompts"]}
    return load_model(SweepSpec, data, "command line")


def _sweep_run(store: Store, run_id: str) -> dict:
    """The stored run to resume; a run of another kind (a bench) is refused with how to rerun it."""
    run = store.run(run_id)
    if run["kind"] != "sweep":
        argv = " ".join(["tokenbench", *run.get("command", [])[1:]]) if run.get("command") else ""
        how = f"rerun it with `{argv}`" if argv else f"rerun it with `tokenbench {run['kind']}`"
        raise UsageError(f"run {run_id} is a {run['kind']} run, not a sweep: `sweep --resume` continues sweeps",
                         how)
    return run


def _preflight(p: Plan) -> None:
    """Everything that can be checked before a deploy: profiles load, contexts fit."""
    if not p.spec.target.profile:
        return
    for config in p.configs:
        profile = load_profile(p.spec.target, config)
        check_context(p, expected_ctx(profile), f"profile {profile.name} [{config.name}]")


def _dry_run(p: Plan) -> None:
    kv = p.spec.kv_capacity
    rows = [(c.config.name, c.key, str(c.repeat), str(kv_demand(c) or "-"),
             "*" if kv and (kv_demand(c) or 0) > kv else "") for c in p.cells]
    table = console.Table(title=f"plan: {len(p.cells)} cells over {len(p.configs)} server config(s)")
    for name in ("config", "cell", "repeat", "KV demand (tokens)", "over KV"):
        table.add_column(name)
    for row in rows:
        table.add_row(*row)
    console.out.print(table)
    for inp, out in p.spec.pairs:
        fit = max_fitting_concurrency(inp, out, kv)
        if fit is not None:
            console.out.print(f"{inp}:{out}: largest concurrency that fits KV {kv}: {fit}")


class _Display:
    def __init__(self, bar, total: int) -> None:
        self.bar = bar
        self.overall = bar.add_task("sweep", total=total)
        self.cell_task = None

    def events(self) -> SweepEvents:
        return SweepEvents(log=lambda m: self.bar.console.print(m), cell_started=self.started,
                           cell_progress=self.progress, cell_done=self.done)

    def started(self, cell: PlannedCell) -> None:
        if self.cell_task is not None:
            self.bar.remove_task(self.cell_task)
        self.cell_task = self.bar.add_task(f"  {cell.config.name} {cell.key}", total=None)

    def progress(self, cell: PlannedCell, phase: str, done: int, total: int) -> None:
        self.bar.update(self.cell_task, description=f"  {cell.config.name} {cell.key} {phase}",
                        completed=done, total=total)

    def done(self, cell: PlannedCell, row: dict) -> None:
        self.bar.advance(self.overall)
        s = row["summary"]
        star = "*" if row["over_capacity"] else ""
        if s.get("monitor_queue_check"):
            self.bar.console.print(f"  note: {s['monitor_queue_check']}")
        self.bar.console.print(f"{cell.config.name} {cell.key}{star} {row['status']}: "
                               f"{console.fmt(s.get('output_throughput'))} out tok/s, "
                               f"TTFT {console.fmt(s.get('mean_ttft_ms'))} ms, TPOT {console.fmt(s.get('mean_tpot_ms'))} ms"
                               + (f" ({row['message']})" if row["message"] else ""))


@click.command("sweep")
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False))
@click.option("--resume", "resume", default=None, help="run id to continue (runs only the missing cells)")
@click.option("--dry-run", is_flag=True, help="print the plan and KV demand, run nothing")
@click.option("--db", default=None, type=click.Path(dir_okay=False), help="results database")
@click.option("--output", default=None, help="also write a JSON result, rewritten after every cell")
@click.option("--base-url", default=None)
@click.option("--pairs", default=None, help="INPUT:OUTPUT list, e.g. 512:512,16384:2048")
@click.option("--concurrency", default=None, help="e.g. 1,8,32,128")
@click.option("--request-rate", default=None, help="open-loop rates, e.g. 1,2,4")
@click.option("--num-prompts", type=click.IntRange(min=1), default=None)
@click.option("--kv-capacity", type=click.IntRange(min=1), default=None, help="override the server's KV tokens")
@click.option("--slo", default=None)
@click.option("--api-key-env", default=None)
@click.option("--find-capacity", is_flag=True, help="search the highest concurrency meeting --slo per pair")
@click.option("--set", "overrides", multiple=True, help="spec override key=value (e.g. repeats=2)")
def command(spec_file, resume, dry_run, db, output, overrides, **kw) -> None:
    """Run a sweep from SPEC.yaml (or flags), storing every cell as it finishes."""
    store = Store(db or default_db_path())
    if resume:
        stored = dict(_sweep_run(store, resume)["spec"])
        stored.pop("planned_cells", None)
        spec = load_model(SweepSpec, stored, f"run {resume}")
    elif spec_file:
        spec = load_file(SweepSpec, spec_file, list(overrides))
    else:
        spec = _from_flags(kw)
    p = plan(spec)
    _preflight(p)
    if dry_run:
        _dry_run(p)
        return
    target = spec.target.base_url or spec.target.profile
    profile = load_profile(spec.target, p.configs[0]) if spec.target.profile else None
    run_id = resume or create_run(store, p, target, profile)
    execute(SweepRunner(p, store, run_id, output=output), store)


def execute(runner: SweepRunner, store: Store) -> list[dict]:
    """Run with progress and ETA; keep the run's status; print the matrix; fail on failed cells."""
    p, run_id = runner.plan, runner.run_id
    todo = sum(len(runner.pending(c)) for c in p.configs) if not p.spec.find_capacity else None
    what = f"{todo} of {len(p.cells)} cells to run" if todo is not None else "capacity search"
    console.err.print(f"[bold]sweep[/] run {run_id}: {what}; database {store.path}")
    store.set_run_status(run_id, "running")
    with console.progress() as bar:
        runner.ev = _Display(bar, todo).events()
        try:
            problems = runner.run()
        except KeyboardInterrupt:
            store.set_run_status(run_id, "interrupted", "interrupted; resume with --resume")
            console.err.print(f"interrupted: resume with `tokenbench sweep --resume {run_id}`")
            raise
        except (DeployError, MeasurementError, SpecError, TargetError) as exc:
            store.set_run_status(run_id, "failed", exc.one_line())
            raise
    cells = store.cells(run_id)
    failed = [c for c in cells if c["status"] == "failed"]
    store.set_run_status(run_id, "failed" if failed or problems else "done", "; ".join(problems))
    _print_matrix(cells)
    for lines in runner.capacity.items():
        for line in lines[1]:
            console.out.print(f"{lines[0]}: {line}")
    console.err.print(f"stored run {run_id} in {store.path}; report with `tokenbench report {run_id}`")
    if problems and not failed:
        raise DeployError(f"sweep incomplete: {problems[0]}", f"fix the cause, then `tokenbench sweep --resume {run_id}`")
    if failed:
        raise MeasurementError(f"{len(failed)} cell(s) failed, first {failed[0]['key']}: {failed[0]['message']}",
                               "see `tokenbench report` for each failure; finished cells were kept")
    return cells


def create_run(store: Store, p: Plan, target: str, profile=None) -> str:
    stored_spec = {**p.spec.model_dump(mode="json"), "planned_cells": len(p.cells)}
    return store.create_run("sweep", target, stored_spec, sys.argv, environment.capture(profile))


def _print_matrix(cells: list[dict]) -> None:
    rows = [(f"{c['config_name']} {c['key']}{'*' if c['over_capacity'] else ''}", c["summary"], c["status"])
            for c in cells]
    console.out.print(console.cells_table(rows, "sweep results (* = concurrency x (input+output) > KV capacity)"))
