"""`tokenbench report RUN`: a study-shaped report (markdown + SVG, and/or HTML), from the database only."""

from __future__ import annotations

import click

from tokenbench import __version__
from tokenbench.cli import console, options
from tokenbench.cli.report_options import default_dir, overrides, plausibility_options, warn_flagged
from tokenbench.judge import history, plausibility
from tokenbench.judge.views import load_run, open_store
from tokenbench.report import render
from tokenbench.report.build import build_report
from tokenbench.report.history import REPORT_METRICS
from tokenbench.report.i18n import LANGS


@click.command("report")
@click.argument("run_id")
@options.DB
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
    doc = build_report(run, lang, checks, __version__, series=history.of_run(store, run, REPORT_METRICS))
    for path in render.write(doc, out_dir or default_dir(db, run_id), fmts):
        console.out.print(str(path))
    warn_flagged(checks, run_id)
