"""`tokenbench compare RUN_A RUN_B [...]`: what differs, the fairness verdict, side-by-side tables."""

from __future__ import annotations

import click

from tokenbench import __version__
from tokenbench.cli import console
from tokenbench.cli.report_options import default_dir
from tokenbench.report import render
from tokenbench.report.compare import compare
from tokenbench.report.i18n import LANGS
from tokenbench.report.model import open_store


@click.command("compare")
@click.argument("selectors", nargs=-1, required=True)
@click.option("--db", default=None, type=click.Path(dir_okay=False), help="results database (default: $TOKENBENCH_RESULTS/tokenbench.db, else ~/.local/share/tokenbench/tokenbench.db)")
@click.option("--format", "formats", default="md,html", show_default=True, help="md, html or md,html")
@click.option("--lang", type=click.Choice(LANGS), default="en", show_default=True)
@click.option("-o", "--output", "out_dir", default=None, type=click.Path(file_okay=False),
              help="output directory (default: reports/compare-A-vs-B next to the database)")
@click.option("--strict", is_flag=True, help="refuse (exit 5) when the effective workloads differ or are unknown")
@click.option("--allow-not-ok", is_flag=True,
              help="show ratios built on cells that are not ok (failed, invalid, length mismatch), marked")
def command(selectors: tuple[str, ...], db: str | None, formats: str, lang: str, out_dir: str | None,
            strict: bool, allow_not_ok: bool) -> None:
    """Compare runs side by side (RUN, or RUN:CONFIG for one server config of a run)."""
    fmts = render.parse_formats(formats)
    store = open_store(db)
    doc, issues = compare(store, list(selectors), lang, __version__, strict, allow_not_ok)
    name = "compare-" + "-vs-".join(s.replace(":", "_") for s in selectors)
    for path in render.write(doc, out_dir or default_dir(db, name), fmts, stem="compare"):
        console.out.print(str(path))
    for issue in issues:
        console.err.print(f"[bold yellow]fairness ({issue.kind}):[/] {issue.text}")
