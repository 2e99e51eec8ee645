"""`tokenbench history NAME`: the runs of a series (`--series NAME`) as a history. Prints, per cell and figure,
each run's value with the noise band learned from the series' earlier launches and the point's state; `-o DIR`
writes the history as markdown and HTML with a plot per cell and figure."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table as RichTable

from tokenbench import __version__
from tokenbench.cli import console, options
from tokenbench.errors import UsageError
from tokenbench.judge.gate import GATE_METRICS
from tokenbench.judge.history import History, history, runs_of
from tokenbench.judge.views import open_store
from tokenbench.report import history as words
from tokenbench.report import render
from tokenbench.report.i18n import LANGS
from tokenbench.report.verdicts import metric_name


def print_history(h: History, lang: str) -> None:
    console.out.print(escape(words.intro(h, lang).text))
    for tr in h.tracks:
        table = RichTable(*[escape(x) for x in words.headers(lang)], header_style="bold",
                          title=escape(f"{tr.config} {tr.cell}: {metric_name(tr.metric, lang)}"))
        for row in words.rows(tr, lang):
            table.add_row(*[escape(c) for c in row])
        console.out.print(table)


@click.command("history")
@click.argument("series")
@options.DB
@click.option("--figures", "figure_list", default=None,
              help="figures to show, e.g. ttft:p50,tpot:mean,output_throughput (default: those the gate judges: "
                   "throughputs and TTFT, TPOT, ITL, E2EL mean, p50, p99)")
@click.option("--alpha", type=click.FloatRange(min=0, max=0.5, min_open=True), default=0.05, show_default=True,
              help="a point is outside its band when a new launch of the same noise falls there with at most this "
                   "probability")
@click.option("-o", "--output", "out_dir", default=None, type=click.Path(file_okay=False),
              help="write the history (history.md / history.html, a plot per cell and figure) into this directory")
@click.option("--format", "formats", default="md,html", show_default=True, help="md, html or md,html")
@click.option("--lang", type=click.Choice(LANGS), default="en", show_default=True)
def command(series: str, db: str | None, figure_list: str | None, alpha: float, out_dir: str | None,  # noqa: PLR0913 (a click command)
            formats: str, lang: str) -> None:
    """A series' runs over time: each figure with the noise band learned from its earlier launches."""
    fmts = render.parse_formats(formats)
    metrics = options.figures("--figures", figure_list, GATE_METRICS)
    store = open_store(db)
    runs = runs_of(store, series)
    if not runs:
        raise UsageError(f"no run of the series '{series}' in {store.path}",
                         "give a run --series NAME (bench, sweep), or list the runs with `tokenbench runs`")
    h = history(series, runs, metrics, alpha)
    print_history(h, lang)
    if out_dir:
        for path in render.write(words.document(h, lang, __version__), out_dir, fmts, stem="history"):
            console.err.print(f"wrote {path}")
