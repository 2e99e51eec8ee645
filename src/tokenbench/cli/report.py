"""`tokenbench report RUN`: a study-shaped report (markdown + SVG, and/or HTML), from the database only."""

from __future__ import annotations

from pathlib import Path

import click

from tokenbench import __version__
from tokenbench.cli import console
from tokenbench.report import plausibility, render
from tokenbench.report.build import build_report
from tokenbench.report.i18n import LANGS
from tokenbench.report.model import load_run, open_store


def default_dir(db: str | None, name: str) -> Path:
    from tokenbench.store.db import default_db_path
    return (Path(db) if db else default_db_path()).parent / "reports" / name


def warn_flagged(checks: list[plausibility.ConfigCheck], run_id: str) -> None:
    n = plausibility.flagged(checks)
    if n:
        console.err.print(f"[bold red]warning:[/] run {run_id}: {n} result(s) beyond the decode roofline "
                          "(physically impossible); the report's plausibility section shows the arithmetic")


def plausibility_options(fn):
    for opt in reversed((
        click.option("--hardware", default=None, help="device for the roofline, e.g. ascend-910b4, h100, cpu"),
        click.option("--hardware-file", default=None, type=click.Path(dir_okay=False, exists=True),
                     help="YAML with extra/overriding devices (format of report/hardware.yaml)"),
        click.option("--params-b", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="model parameters, billions (when the run did not store them)"),
        click.option("--bytes-per-param", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="bytes per weight: 2 for BF16"),
        click.option("--devices", type=click.IntRange(min=1), default=None, help="devices serving the model"),
    )):
        fn = opt(fn)
    return fn


def overrides(kw: dict) -> plausibility.Overrides:
    return plausibility.Overrides(kw["hardware"], kw["hardware_file"], kw["params_b"], kw["bytes_per_param"],
                                  kw["devices"])


@click.command("report")
@click.argument("run_id")
@click.option("--db", default=None, type=click.Path(dir_okay=False), help="results database (default: $TOKENBENCH_RESULTS/tokenbench.db, else ~/.local/share/tokenbench/tokenbench.db)")
@click.option("--format", "formats", default="md,html", show_default=True, help="md, html or md,html")
@click.option("--lang", type=click.Choice(LANGS), default="en", show_default=True)
@click.option("-o", "--output", "out_dir", default=None, type=click.Path(file_okay=False),
              help="output directory (default: reports/RUN next to the database)")
@click.option("--timeline-cell", default=None, help="cell for the per-request timeline, e.g. 512:512/c=32 "
              "or CONFIG:512:512/c=32 (default: the busiest cell)")
@plausibility_options
def command(run_id: str, db: str | None, formats: str, lang: str, out_dir: str | None, timeline_cell: str | None,
            **kw) -> None:
    """Render a stored run as a report: environment, baseline, scaling, matrix, comparison, plots."""
    fmts = render.parse_formats(formats)
    store = open_store(db)
    run = load_run(store, run_id, timeline_cell)
    checks = plausibility.check_run(run, overrides(kw))
    doc = build_report(run, lang, checks, __version__)
    for path in render.write(doc, out_dir or default_dir(db, run_id), fmts):
        console.out.print(str(path))
    warn_flagged(checks, run_id)
