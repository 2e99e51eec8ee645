"""`tokenbench export RUN`: cell summaries (vLLM-style keys) or per-request rows as JSON or CSV."""

from __future__ import annotations

import click

from tokenbench.cli import options
from tokenbench.formats.export import to_csv, to_json
from tokenbench.judge.views import open_store
from tokenbench.store import outputs


@click.command("export")
@click.argument("run_id")
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True)
@click.option("--requests", is_flag=True, help="per-request rows (CSV) or requests inside each cell (JSON)")
@click.option("-o", "--output", default=None, help="file (default: stdout; - too)")
@options.DB
def command(run_id: str, fmt: str, requests: bool, output: str | None, db: str | None) -> None:
    """Export a stored run's cells (and requests) for other tools."""
    store = open_store(db)
    text = to_json(store, run_id, requests) if fmt == "json" else to_csv(store, run_id, requests)
    if output is None:
        click.echo(text, nl=False)
        return
    outputs.write_text(output, text, "-o/--output")
