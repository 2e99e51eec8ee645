"""`tokenbench runs`: the runs in the results database, each with its study name and one-word verdict,
filtered by name, target and date."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime

import click
from rich.markup import escape
from rich.table import Table

from tokenbench.cli import console, options
from tokenbench.errors import UsageError
from tokenbench.judge.run_verdict import run_rows
from tokenbench.judge.views import open_store
from tokenbench.store.db import RunFilter


def _filter(name: str | None, target: str | None, since: str | None, until: str | None) -> RunFilter:
    """The runs asked for; one-line errors for a date that is none, or a window that ends before it starts."""
    start = options.moment("--since", since) if since is not None else None
    end = options.moment("--until", until, end_of_day=True) if until is not None else None
    if start is not None and end is not None and start > end:
        raise UsageError(f"--since {since} is after --until {until}: no run can match",
                         "give the earlier moment to --since")
    return RunFilter(name, target, _stamp(start), _stamp(end))


def _stamp(when: datetime | None) -> str | None:
    """As the database stores a run's start (UTC, to the second), so that text compares as time."""
    return when.isoformat(timespec="seconds") if when is not None else None


@click.command("runs")
@options.DB
@click.option("--name", default=None, metavar="TEXT", help="only runs whose study name (--name, vLLM's --label) "
              "contains TEXT, in any case")
@click.option("--target", default=None, metavar="TEXT", help="only runs whose target (URL, profile, imported "
              "file) contains TEXT, in any case")
@click.option("--since", default=None, metavar="WHEN", help="only runs started at or after WHEN: a date "
              "(2025-06-01), a time (2025-06-01T14:30; UTC unless it names its offset) or a span back from now "
              "(30m, 12h, 7d, 2w)")
@click.option("--until", default=None, metavar="WHEN", help="only runs started at or before WHEN (a date "
              "alone: up to its end), written as for --since")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
def command(db: str | None, name: str | None, target: str | None, since: str | None, until: str | None,
            as_json: bool) -> None:
    """List stored runs: id, date, study name, kind, target, cells done/total, verdict (running,
    interrupted, failed, empty, marked or ok), status."""
    which = _filter(name, target, since, until)
    rows = run_rows(open_store(db), which)
    if as_json:
        click.echo(json.dumps([asdict(r) for r in rows], indent=1))
        return
    table = Table(title="runs")
    for col in ("id", "date", "name", "kind", "target", "cells", "verdict", "status"):
        table.add_column(col)
    for r in rows:
        total = r.cells_total if r.cells_total is not None else "?"
        table.add_row(r.id, r.date, escape(r.name or "-"), r.kind, escape(r.target), f"{r.cells_done}/{total}",
                      r.verdict, escape(r.status + (f" ({r.message})" if r.message else "")))
    console.out.print(table)
    if not rows and which != RunFilter():
        console.err.print("no run matches (`tokenbench runs` without --name, --target, --since, --until lists all)",
                          markup=False, highlight=False)
