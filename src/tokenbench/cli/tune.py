"""`tokenbench tune PROFILE`: the best server config for the SLOs. Every combination of the --vary axes is
launched from PROFILE and its capacity searched (the baseline, the profile as given, first); the configs are
ranked per SLO tier with 95 % intervals, losing ones stopped early, and the best is printed as a ready
`deploy` command and written as a profile file. Options are the study spec's keys (cli/flags.py), as sweep's;
docs/metrics.md "Tune" says how it decides."""

from __future__ import annotations

import math
import shlex
import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from tokenbench.cli import console, flags, options, progress, run_options
from tokenbench.deploy.profiles import to_yaml
from tokenbench.errors import DeployError, MeasurementError, TokenbenchError, UsageError
from tokenbench.judge import tune as judged
from tokenbench.report import tune as words
from tokenbench.spec.loader import Lines, apply_overrides
from tokenbench.spec.study import StudySpec, merge_axes
from tokenbench.store import outputs
from tokenbench.store.db import Store
from tokenbench.study import run as study
from tokenbench.study import tune
from tokenbench.study.plan import plan, server_configs
from tokenbench.study.preflight import preflight
from tokenbench.study.settings import RunSettings

FLAGS = flags.SHARED + flags.SWEEP_ONLY + flags.TUNE_ONLY
KIND = "tune"


def merged_axes(given: dict[str, list], axes: list[tuple[str, list]]) -> dict[str, list]:
    """The --vary axes merged with those --set gave: a key given again (or by its short name) adds its values
    (the union); a value given twice is refused in one line."""
    for flag, pairs in (("--set vary", list(given.items())), ("--vary", [*given.items(), *axes])):
        try:
            merged = merge_axes(pairs)
        except ValueError as exc:
            raise UsageError(f"{flag} {exc}", "give each value once: one config per combination") from None
    return merged


def _data(profile: str | None, axes: tuple[str, ...], profile_sets: tuple[str, ...], overrides: list[str],
          kw: dict) -> dict:
    lines: Lines = {}
    data = apply_overrides({}, overrides, lines)
    if profile is None and "profile" not in data.get("target", {}):
        raise UsageError("give the profile to tune", "e.g. tokenbench tune cpu-smollm2-llamacpp --input-len 64 "
                         "--output-len 32 --slo ttft:p99<=3000 --vary slots=1,2,4")
    target = data.setdefault("target", {})
    if profile is not None:
        target["profile"] = profile
    target["set"] = [*target.get("set", []), *profile_sets]
    data["vary"] = merged_axes(data.get("vary", {}), [options.vary_axis("--vary", a) for a in axes])
    if not data["vary"]:
        raise UsageError("give the server configs to compare", "e.g. --vary slots=1,2,4 --vary args.n_batch=64,512 "
                         "(any profile key; one config per combination)")
    data.setdefault("tune", {})
    if kw["find_capacity"] is None and "find_capacity" not in data:
        data["find_capacity"] = "concurrency"
    return data


def build_spec(profile: str | None, axes: tuple[str, ...], profile_sets: tuple[str, ...], overrides: list[str],
               kw: dict) -> StudySpec | None:
    """The spec of a new tune, its baseline named (None for --resume, which keeps its stored spec)."""
    if kw["resume"]:
        given = ["--vary"] * bool(axes) + ["--profile-set"] * bool(profile_sets) + ["--set"] * bool(overrides)
        run_options.refuse_spec_with_resume(kw, FLAGS, given + ([profile] if profile else []))
        return None
    data = _data(profile, axes, profile_sets, overrides, kw)
    spec = flags.validate(run_options.translate(flags.study_data(kw, FLAGS, data), kw))
    return tune.resolved(spec)


def plan_lines(spec: StudySpec, count: int) -> list[str]:
    """What the plan implies, said before it starts: its configs and cells, and what a smaller budget leaves
    of them; a budget that leaves no config a cell is refused."""
    size = tune.plan_size(spec, count)
    grid = " x ".join(str(n) for n in size.axes) + " values" + (" and the baseline" * (count > math.prod(size.axes)))
    what = f"{size.configs:,} server configs ({grid}), up to {size.per_search} cells a search: {size.implied:,} cells"
    if size.share < 1:
        raise UsageError(f"tune: {what}, and the cell budget is {size.budget:,}: no config would get a cell",
                         f"narrow --vary, or give --budget-cells {size.configs} or more (a few cells a config: "
                         f"{3 * size.configs})")
    if not size.over:
        return [f"plan: {what}"]
    return [f"plan: {what}; the budget is {size.budget:,} cells (--budget-cells): a first search gets at most "
            f"{size.share}, what early stops leave goes to the contenders, and configs the budget does not reach "
            "are listed as not run"]


def _dry_run(spec: StudySpec) -> None:
    """The plan: the configs in the order searched, each one's deploy command, and the cell budget."""
    preflight(p := plan(spec))
    assert spec.tune is not None
    total = tune.total_budget(spec, len(p.configs))
    lines = plan_lines(spec, len(p.configs))
    table = Table(title=f"tune plan: {len(p.configs)} server configs, {spec.find_capacity} search, "
                        f"tiers {'; '.join(f'{x.name}={x.text}' for x in spec.capacity_tiers())}")
    for name in ("#", "config", "deploy command"):
        table.add_column(name)
    for i, c in enumerate(p.configs):
        argv = ["tokenbench", "deploy", "up", spec.target.profile or "",
                *(w for x in [*spec.target.set, *c.overrides] for w in ("--set", x))]
        table.add_row(str(i + 1), c.name + (" (baseline)" if i == 0 else ""), shlex.join(argv))
    console.out.print(table)
    minutes = f"{spec.tune.budget_minutes:g} min" if spec.tune.budget_minutes else "none"
    console.out.print(escape(f"cell budget: {total} cells in all; a config's first search gets at most "
                             f"{min(spec.capacity_budget, total // len(p.configs))} (an even share of what is "
                             f"left, up to capacity_budget {spec.capacity_budget}); what early stops leave goes to "
                             f"the contenders; time budget: {minutes}"), highlight=False)
    for line in lines:
        console.out.print(escape(line), highlight=False, soft_wrap=True)


def profile_file(store: Store, run_id: str, tuning: judged.Tuning, where: str | None) -> str | None:
    """Write the recommended config's profile (named PROFILE-tuned) where asked, else beside the database."""
    rec = tuning.recommendation
    config = next((c for c in store.configs(run_id) if rec and c.name == rec.config), None)
    if rec is None or config is None or config.profile is None or (where is None and not store.kept):
        return None                                  # --no-store: nothing beside a database that is removed
    profile = config.profile.model_copy(update={
        "name": f"{config.profile.name}-tuned",
        "description": f"tokenbench tune run {run_id}: {rec.config}, best under tier {tuning.rankings[0].tier.name}"})
    path = Path(where) if where else Path(store.path).parent / f"tune-{run_id}.yaml"
    outputs.write_text(path, to_yaml(profile), "--profile-out")
    return str(path)


def _answer(store: Store, run_id: str, where: str | None, to) -> judged.Tuning | None:
    run = store.run(run_id)
    tuning = judged.of_run(run.spec or {}, store.configs(run_id), store.searches(run_id))
    if tuning is None:
        return None
    for line in words.console_lines(tuning):
        to.print(escape(line), highlight=False, soft_wrap=True)
    written = profile_file(store, run_id, tuning, where)
    if written:
        console.err.print(escape(f"wrote the recommended profile to {written} (`tokenbench deploy up {written}`)"),
                          highlight=False, soft_wrap=True)
    return tuning


OPTIONS = (
    click.option("--vary", "axes", multiple=True, metavar="KEY=V1,V2,...",
                 help="a server-config axis: a profile key and its values (repeatable: a key given again adds its "
                      "values, a value given twice is refused; one config per combination), e.g. --vary slots=1,2,4 "
                      "--vary args.n_batch=64,512"),
    click.option("--profile-set", "profile_sets", multiple=True, metavar="KEY=VALUE",
                 help="a profile override applied to every config (repeatable)"),
    click.option("--dry-run", is_flag=True, help="print the configs in the order searched and the cell budget, run "
                 "nothing"),
    click.option("--set", "overrides", multiple=True, help="set any key of the study spec (sweep --fields lists them)"),
    click.option("--profile-out", default=None, type=click.Path(dir_okay=False),
                 help="write the recommended config's profile here (default: tune-RUN.yaml beside the database; with --no-store only where this names)"),
)


def _options(f):
    for opt in reversed(OPTIONS):
        f = opt(f)
    return f


@click.command("tune", cls=run_options.StudyCommand)
@click.argument("profile", required=False)
@_options
@flags.apply(FLAGS)
@flags.length_options
@flags.peer_options
@run_options.apply
def command(profile, axes, profile_sets, dry_run, overrides, profile_out, **kw) -> None:
    """Find the server config of PROFILE with the highest capacity under the SLOs, with its confidence."""
    given = build_spec(profile, axes, profile_sets, list(overrides), kw)
    if dry_run:                       # a new tune's plan writes nothing (no database either)
        if given is not None:
            _dry_run(given)
            return
        with run_options.opened_store(kw) as store:
            _dry_run(study.stored_spec(store, kw["resume"], KIND))
        return
    run_options.precheck(kw)
    if profile_out:
        outputs.check(profile_out, "--profile-out", probe=True)
    for line in plan_lines(given, len(server_configs(given))) if given is not None else []:
        console.err.print(escape(line), highlight=False, soft_wrap=True)
    with run_options.opened_store(kw) as store:
        spec = given or study.stored_spec(store, kw["resume"], KIND)
        started = study.start(spec, store, RunSettings(kind=KIND, output=kw["output"]), sys.argv, kw["resume"])
        planned = tune.prepare(started)
        files = run_options.result_files(kw, planned)
        console.err.print(f"[bold]tune[/] run {planned.run_id}: {len(server_configs(spec))} server configs, budget "
                          f"{tune.total_budget(spec, len(planned.plan.configs))} cells; database {store.path}")
        out, display = progress.run(planned, files, quiet=kw["disable_tqdm"])
        to = run_options.table_console(kw)
        progress.report(out, display, run_options.locations(kw, out, files), to)
        tuning = _answer(store, planned.run_id, profile_out, to)
    if tuning is None or tuning.recommended is None:
        raise nothing_to_recommend(tuning)
    if out.problems:
        study.check(out, KIND)


def nothing_to_recommend(tuning: judged.Tuning | None) -> TokenbenchError:
    """Why the tune ends with no answer, in one line: no config started (the causes: the profile to fix), none
    that met the first tier held (died, or missed it on its confirmation), or none met it (the SLO)."""
    why = tuning.empty if tuning is not None else "none_met"
    if tuning is not None and why == "none_started":
        return DeployError(f"tune: no config started ({'; '.join(words.failure_causes(tuning, 'en'))})",
                           "fix the profile (its command, model or flags: the causes above, read from each engine's "
                           "log), then run the tune again")
    if tuning is not None and why == "none_held":
        return MeasurementError(f"tune: {words.empty_text(tuning, 'en')}", "see the report: each config's death or "
                                "confirmation, with its cause")
    return TokenbenchError("tune: no config met the first tier at any load tried, nothing to recommend",
                           "see the report; loosen the SLO, or search lower loads (--capacity-start)")
