"""`tokenbench sweep`: lengths x concurrency x server configs, unattended and resumable. Its options
are the study spec's keys (cli/flags.py); a SPEC.yaml gives the same keys, flags override it."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from tokenbench.cli import console, flags, progress, run_options
from tokenbench.errors import SpecError, UsageError
from tokenbench.spec.fields import fields as spec_fields
from tokenbench.spec.loader import Lines, apply_overrides, load_model, parse_yaml, read_spec
from tokenbench.spec.study import StudySpec
from tokenbench.study import run as study
from tokenbench.study.plan import kv_demand, max_fitting_concurrency, plan
from tokenbench.study.preflight import preflight
from tokenbench.study.servers import planned_graphs
from tokenbench.study.settings import RunSettings

FLAGS = flags.SHARED + flags.SWEEP_ONLY


def _from_file(path: str, overrides: list[str], kw: dict) -> StudySpec:
    p = Path(path)
    data, lines = parse_yaml(read_spec(p), str(p))
    if not isinstance(data, dict):
        raise SpecError(f"{p}: expected a mapping of keys at the top level", "see docs/ for an example")
    data = run_options.translate(flags.study_data(kw, FLAGS, apply_overrides(data, overrides, lines)), kw)
    return load_model(StudySpec, data, str(p), lines)


def _from_flags(overrides: list[str], kw: dict) -> StudySpec:
    """As _from_file without a file: --set, then the flags on top (the same order, the same errors)."""
    lines: Lines = {}
    base = apply_overrides({}, overrides, lines)
    if not kw["target__base_url"] and "target" not in base and not flags.peers_given(kw).keys() & {"--host", "--port"}:
        raise UsageError("give a SPEC.yaml, or --base-url with --pairs and --concurrency/--request-rate",
                         "e.g. tokenbench sweep --base-url URL --pairs 512:512 --concurrency 1,8")
    return flags.validate(run_options.translate(flags.study_data(kw, FLAGS, base), kw), overridden=lines)


def build_spec(spec_file: str | None, overrides: list[str], kw: dict) -> StudySpec | None:
    """The spec of a new run; None for --resume, which keeps its stored spec (so refuses a new one)."""
    if kw["resume"]:
        run_options.refuse_spec_with_resume(kw, FLAGS, ["--set"] * bool(overrides) + ([spec_file] if spec_file else []))
        return None
    return _from_file(spec_file, overrides, kw) if spec_file else _from_flags(overrides, kw)


def _stored(kw: dict) -> StudySpec:
    with run_options.opened_store(kw) as store:
        return study.stored_spec(store, kw["resume"], "sweep")


GRAPH_MARK = "^"


def _dry_run(spec: StudySpec) -> None:
    """The plan, its KV demand and its cells above the captured graph sizes; profiles and contexts are
    checked, nothing is deployed or stored."""
    preflight(p := plan(spec))
    kv = p.spec.kv_capacity
    graphs = {c.name: planned_graphs(spec.target, c) for c in p.configs}
    table = Table(title=f"plan: {len(p.cells)} cells over {len(p.configs)} server config(s)")
    for name in ("config", "cell", "repeat", "KV demand (tokens)", "over KV", "above graphs"):
        table.add_column(name)
    for c in p.cells:
        g = graphs[c.config.name]
        table.add_row(c.config.name, c.key, str(c.repeat), str(kv_demand(c) or "-"),
                      "*" if kv and (kv_demand(c) or 0) > kv else "", GRAPH_MARK if g and g.eager(c.width) else "")
    console.out.print(table)
    for inp, out in p.spec.pairs:
        fit = max_fitting_concurrency(inp, out, kv)
        if fit is not None:
            console.out.print(f"{inp}:{out}: largest concurrency that fits KV {kv}: {fit}")
    for name, g in graphs.items():
        if g is not None:
            console.out.print(escape(_graph_line(name, g)), highlight=False)


def _graph_line(config: str, g) -> str:
    if not g.known:
        return f"{config}: captured decode batch sizes unknown before launch ({g.source})"
    if g.max_size == 0:
        return f"{config}: no captured graphs ({g.source}): every batch runs eager"
    return (f"{config}: decode batches up to {g.max_size} run as captured graphs ({g.source}); "
            f"{GRAPH_MARK} = more streams than that: those cells run eager" + (f". Note: {g.note}" if g.note else ""))


def print_fields() -> None:
    """Every key of the sweep YAML with its flag, type, default and meaning (`sweep --fields`)."""
    table = Table(title="sweep spec keys (YAML key = --flag; --set KEY=VALUE)")
    for col in ("key", "flag", "type", "default", "meaning"):
        table.add_column(col)
    for f in spec_fields(StudySpec):
        table.add_row(f.key, flags.spellings(f.key), f.kind, f.default, f.text)
    console.out.print(table)


@click.command("sweep", cls=run_options.StudyCommand)
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False))
@flags.apply(FLAGS)
@flags.length_options
@flags.peer_options
@run_options.apply
@click.option("--dry-run", is_flag=True, help="print the plan and KV demand, run nothing")
@click.option("--set", "overrides", multiple=True,
              help="set any key of the sweep YAML, with or without SPEC.yaml, e.g. repeats=2 (repeatable)")
@click.option("--fields", "show_fields", is_flag=True, help="list every sweep YAML key with its flag and meaning")
def command(spec_file, dry_run, overrides, show_fields, **kw) -> None:
    """Run a sweep from SPEC.yaml (or flags), storing every cell as it finishes."""
    if show_fields:
        print_fields()
        return
    given = build_spec(spec_file, list(overrides), kw)
    if dry_run:
        _dry_run(given or _stored(kw))
        return
    run_options.precheck(kw)
    with run_options.opened_store(kw) as store:
        spec = given or study.stored_spec(store, kw["resume"], "sweep")
        planned = study.start(spec, store, RunSettings(kind="sweep", output=kw["output"]), sys.argv, kw["resume"])
        files = run_options.result_files(kw, planned)
        todo = study.pending_count(planned)
        what = f"{todo} of {len(planned.plan.cells)} cells to run" if todo is not None else "capacity search"
        console.err.print(f"[bold]sweep[/] run {planned.run_id}: {what}; database {store.path}")
        out, display = progress.run(planned, files, quiet=kw["disable_tqdm"])
        progress.report(out, display, run_options.locations(kw, out, files), run_options.table_console(kw))
    study.check(out, "sweep")

