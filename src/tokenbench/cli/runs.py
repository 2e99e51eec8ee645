"""`tokenbench runs`: the runs in the results database."""

from __future__ import annotations

import json
from dataclasses import asdict

import click
from rich.table import Table

from tokenbench.cli import console, options
from tokenbench.formats.export import run_rows
from tokenbench.judge.views import open_store


@click.command("runs")
@options.DB
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
def command(db: str | None, as_json: bool) -> None:
    """List stored runs: id, date, kind, target, cells done/total, status."""
    rows = run_rows(open_store(db))
    if as_json:
        click.echo(json.dumps([asdict(r) for r in rows], indent=1))
        return
    table = Table(title="runs")
    for col in ("id", "date", "kind", "target", "cells", "status"):
        table.add_column(col)
    for r in rows:
        total = r.cells_total if r.cells_total is not None else "?"
        table.add_row(r.id, r.date, r.kind, r.target, f"{r.cells_done}/{total}",
                      r.status + (f" ({r.message})" if r.message else ""))
    console.out.print(table)
