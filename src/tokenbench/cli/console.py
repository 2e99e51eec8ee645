"""Console rendering shared by commands: progress bars and result tables (stderr for progress)."""

from __future__ import annotations

import math
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

TABLE_COLUMNS = (
    ("cell", None), ("ok", "completed"), ("fail", "failed"), ("req/s", "request_throughput"),
    ("out tok/s", "output_throughput"), ("total tok/s", "total_token_throughput"),
    ("TTFT mean", "mean_ttft_ms"), ("TTFT p99", "p99_ttft_ms"), ("TPOT mean", "mean_tpot_ms"),
    ("TPOT p99", "p99_tpot_ms"), ("ITL mean", "mean_itl_ms"), ("E2EL mean", "mean_e2el_ms"),
)


def fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(),
                    console=err, transient=False)


def cells_table(rows: list[tuple[str, dict, str]], title: str = "results (ms, tokens/s)") -> Table:
    """rows: (label, summary, status)."""
    table = Table(title=title)
    for name, _ in TABLE_COLUMNS:
        table.add_column(name, justify="right" if name != "cell" else "left")
    table.add_column("status")
    for label, summary, status in rows:
        table.add_row(label, *(fmt(summary.get(k)) for _, k in TABLE_COLUMNS[1:]), status)
    return table
