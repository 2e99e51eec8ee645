"""Console rendering shared by commands: progress bars and result tables (stderr for progress)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tokenbench.judge.status import State, figure_state, judge
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.report.document import plain
from tokenbench.report.marks import Note, said_once

out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

Figure = Callable[[CellSummary], object]
COUNTS: tuple[tuple[str, Figure], ...] = (("ok", lambda s: s.completed), ("fail", lambda s: s.failed))
FIGURES: tuple[tuple[str, str], ...] = (        # (column, summary key)
    ("req/s", "request_throughput"), ("out tok/s", "output_throughput"),
    ("total tok/s", "total_token_throughput"), ("TTFT mean", "mean_ttft_ms"),
    ("TTFT p99", "p99_ttft_ms"), ("TPOT mean", "mean_tpot_ms"),
    ("TPOT p99", "p99_tpot_ms"), ("ITL mean", "mean_itl_ms"), ("ITL p99", "p99_itl_ms"),
    ("E2EL mean", "mean_e2el_ms"),
)
Row = tuple[str, CellSummary, str, str]          # (label, summary, status, message)


fmt = plain     # numbers as the terminal shows them (report/document.py, shared with study/)


PROGRESS_HZ = 2      # rich's default is 10; every redraw holds the GIL the stamping loop needs


def progress(disable: bool = False) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(),
                    console=err, transient=False, refresh_per_second=PROGRESS_HZ, disable=disable)


def state(status: str, message: str | None, summary: CellSummary) -> State:
    """The report's verdict on a stored cell (judge/status.py): the same mark in the terminal as in reports."""
    return judge(status, message or "", summary)


def marked(value, s: State) -> str:
    """A figure as the terminal shows it: plain only for a cell (and figure) that is ok, else with its mark."""
    text = fmt(value)
    return text if text == "-" else text + s.mark


def figure(summary: CellSummary, key: str, s: State) -> str:
    """One figure of a cell whose state is `s`, with the cell's mark or, in an ok cell, its own."""
    return marked(getattr(summary, key, None), figure_state(s, summary, key))


def cells_table(rows: list[Row], title: str = "results (ms, tokens/s)") -> Table:
    """rows: (label, summary, status, message). A cell that is not ok shows every figure with its mark
    (✗ failed, ‡ invalid, ≠ length mismatch tolerated), dimmed; `notes(rows)` says why under the table.
    The request counts (ok, fail) are facts of any cell and stay plain."""
    table = Table(title=title)
    table.add_column("cell", justify="left")
    for name in [c for c, _ in COUNTS] + [c for c, _ in FIGURES]:
        table.add_column(name, justify="right")
    table.add_column("status")
    for label, summary, status, message in rows:
        s = state(status, message, summary)
        figures = [fmt(get(summary)) for _, get in COUNTS] + [figure(summary, key, s) for _, key in FIGURES]
        table.add_row(escape(label), *figures, f"{s.mark} {status}" if s.mark else status,
                      style=None if s.ok else "dim")
    return table


def notes(rows: list[Row]) -> list[str]:
    """Why cells are marked (the report's footnotes, in English): one line per mark and reason, a reason that
    repeats across cells said once with the cells it covers."""
    said: list[Note] = []
    for label, summary, status, message in rows:
        s = state(status, message, summary)
        said += [Note(label, s.kind, s.reason or "", summary)] if not s.ok else moved_notes(label, summary)
    return said_once(said, "en")


def moved_notes(label: str, summary: CellSummary) -> list[Note]:
    """One note per cause of the cell's figures marked moved: which, by how much (the cause says why)."""
    marks = (summary.figures.client_marks if summary.figures else None) or {}
    by_cause: dict[str, list[str]] = {}
    for key, m in marks.items():
        by_cause.setdefault(m.cause, []).append(f"{key} ±{m.bound:.3g}")
    return [Note(label, "moved", cause, summary, ", ".join(figures)) for cause, figures in by_cause.items()]
