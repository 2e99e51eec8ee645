"""`tokenbench compare RUN_A RUN_B [...]`: what differs, the fairness verdict, verdicts with 95 % intervals,
side-by-side tables; written as files and printed as a terminal table."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table as RichTable

from tokenbench import __version__
from tokenbench.cli import console, options
from tokenbench.cli.report_options import default_dir
from tokenbench.judge.intervals import Judging
from tokenbench.judge.views import open_store
from tokenbench.metrics.uncertainty import MIN_EFFECT
from tokenbench.report import render
from tokenbench.report.compare import compare
from tokenbench.report.document import Cell, Document, Table
from tokenbench.report.explain import issue_text
from tokenbench.report.i18n import LANGS


def _text(c: str | Cell) -> str:
    return escape(f"{c.full}{c.marks}" if isinstance(c, Cell) else c)


def print_verdicts(doc: Document) -> None:
    """The verdict tables of the document, in the terminal (same text as the files)."""
    for block in doc.blocks:
        if isinstance(block, Table) and block.role == "verdicts":
            table = RichTable(*[escape(h) for h in block.headers], header_style="bold")
            for row in block.rows:
                table.add_row(*[_text(c) for c in row])
            console.out.print(table)
            for note in block.footnotes:
                console.out.print(f"  {escape(note)}")


def print_differences(doc: Document) -> None:
    """What the columns ran with differently (engine, launch, host, cache...) and who used their hosts' CPUs,
    one line each, before the verdicts."""
    for block in doc.blocks:
        if isinstance(block, Table) and block.role in ("differs", "host_load"):
            columns = block.headers[1:]
            for attr, *vals in block.rows:
                told = "; ".join(f"{c}: {_text(v)}" for c, v in zip(columns, vals, strict=True))
                head = "differs" if block.role == "differs" else escape(block.headers[0])
                console.out.print(f"[bold]{head}:[/] {_text(attr)}: {told}")


@click.command("compare")
@click.argument("selectors", nargs=-1, required=True)
@options.DB
@click.option("--format", "formats", default="md,html", show_default=True, help="md, html or md,html")
@click.option("--lang", type=click.Choice(LANGS), default="en", show_default=True)
@click.option("-o", "--output", "out_dir", default=None, type=click.Path(file_okay=False),
              help="output directory (default: reports/compare-A-vs-B next to the database)")
@click.option("--strict", is_flag=True, help="refuse (exit 5) when the effective workloads differ or are unknown, "
              "or when no cell was measured ok by every column")
@click.option("--allow-not-ok", is_flag=True,
              help="show ratios built on cells that are not ok (failed, invalid, length mismatch), marked")
@click.option("--allow-client-lag", is_flag=True,
              help="give verdicts (marked ~) for figures the client's delays may have moved beyond their tolerance")
@click.option("--min-effect", type=click.FloatRange(min=0, max=1), default=MIN_EFFECT, show_default=True,
              help="smallest relative difference a verdict may call real (run-to-run drift of one machine)")
@click.option("--quiet", is_flag=True, help="write the files only; print no terminal table")
def command(selectors: tuple[str, ...], db: str | None, formats: str, lang: str, out_dir: str | None,  # noqa: PLR0913 (a click command)
            strict: bool, allow_not_ok: bool, allow_client_lag: bool, min_effect: float, quiet: bool) -> None:
    """Compare runs side by side (RUN, or RUN:CONFIG for one server config of a run)."""
    fmts = render.parse_formats(formats)
    store = open_store(db)
    doc, issues = compare(store, list(selectors), lang, __version__, strict, Judging(allow_not_ok, min_effect, allow_client_lag))
    if not quiet:
        print_differences(doc)
        print_verdicts(doc)
    name = "compare-" + "-vs-".join(s.replace(":", "_") for s in selectors)
    for path in render.write(doc, out_dir or default_dir(db, name), fmts, stem="compare"):
        console.out.print(str(path))
    for issue in issues:
        console.err.print(f"[bold yellow]fairness ({issue.kind}):[/] {escape(issue_text(issue, lang))}")
