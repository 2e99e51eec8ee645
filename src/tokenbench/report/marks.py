"""Figures of cells that are not ok, and single figures the client's delays may have moved, marked where
they are shown: table cells, footnotes, ratios.

`fig(cell, text, key=...)` is the one way a table shows a cell's figure (`key`: which figure, so a mark of
that figure alone shows); `footnotes(cells, lang, keys=...)` says, under the table, why each marked cell
or figure is marked (both languages: i18n keys `mark.*` and `cause.*`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tokenbench.judge.cells import figure_state_of, label_of, state_of
from tokenbench.judge.status import MARKS, State
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import JOB_MARK_KEYS, FigureHealth, FigureMark
from tokenbench.report.document import Cell, missing, num
from tokenbench.report.i18n import t

if TYPE_CHECKING:                    # types only: the console's table needs neither the run model nor compare
    from tokenbench.judge.intervals import Judging
    from tokenbench.store.rows import CellRow


def fig(c: CellRow, text: str, over: bool = True, key: str | None = None) -> Cell:
    """`text` (a figure of cell `c`; `key` its summary key) with its not-ok or moved mark, and if `over` the
    `*` of an over-capacity cell and the `^` of a cell above the captured graph sizes."""
    s = state_of(c) if key is None else figure_state_of(c, key)
    return Cell(text, over=over and c.over_capacity, mark=s.mark, why="" if s.ok else s.kind, eager=over and c.eager)


def cause_text(cause: str, summary: CellSummary, lang: str) -> str:
    """Why the client's health marked a figure, in words, with the evidence the cell stored."""
    h, f = summary.health, summary.figures
    wait = f"{h.client_wait_percent:.1f} %" if h and h.client_wait_percent is not None else "?"
    cpu = f"{h.busiest_cpu_percent():.0f} %" if h and h.client_cpu_percent is not None else "?"
    chunks = f"{f.chunks_coalesced}/{f.token_chunks}" if f and f.token_chunks else "?"
    return t(lang, f"cause.{cause}", wait=wait, cpu=cpu, chunks=chunks, source=source_text(summary, lang))


def source_text(summary: CellSummary, lang: str) -> str:
    """Whose shape a stream's bursts are, on the cell's evidence (metrics/health.py), in words."""
    f = summary.figures
    source = (f.burst_source if f else None) or "upstream"
    return t(lang, f"delivery.{source}", k=num(f.server_writes if f else None), told=(f.server_writes_from if f else "") or "")


def _moved(c: CellRow, keys: Iterable[str]) -> dict[str, list[str]]:
    """The cell's moved figures among `keys`, by cause."""
    out: dict[str, list[str]] = {}
    for key in dict.fromkeys(keys):
        s: State = figure_state_of(c, key)
        if s.kind == "moved":
            out.setdefault(s.reason, []).append(key)
    return out


def moved_footnotes(c: CellRow, lang: str, keys: Iterable[str], name: str | None = None) -> list[str]:
    """One footnote per cause of the figures of `c` (among `keys`) marked moved."""
    health = c.summary.figures or FigureHealth()
    out = []
    for cause, figures in _moved(c, keys).items():
        shown = ", ".join(_bound(k, m) for k in figures if (m := health.mark(k)) is not None)
        out.append(t(lang, "mark.moved", mark=MARKS["moved"], cell=f"{name or c.config} {label_of(c)}", figures=shown,
                     reason=cause_text(cause, c.summary, lang)))
    return out


def _bound(key: str, m: FigureMark) -> str:
    """'p99_ttft_ms ±16.5'; a job figure's is its turn figure's: 'p95_job_ms (p95_e2el_ms ±15.2)'."""
    turn = JOB_MARK_KEYS.get(key)
    return f"{key} ({turn} ±{m.bound:.3g})" if turn else f"{key} ±{m.bound:.3g}"


def sparse_footnote(c: CellRow, lang: str, keys: Iterable[str], name: str | None = None) -> list[str]:
    """The footnote of a cell whose power and energy figures (among `keys`) are marked: what the monitor's
    samples covered of the measured window."""
    m = c.summary.monitor
    if m is None or not any(figure_state_of(c, k).kind == "sparse" for k in keys):
        return []
    key = "mark.sparse" if m.accel_coverage_pct is not None else "mark.sparse_counter"
    return [t(lang, key, mark=MARKS["sparse"], cell=f"{name or c.config} {label_of(c)}",
              coverage=f"{m.accel_coverage_pct or 0:.0f}", gap=f"{m.accel_max_gap_s or 0:.1f}",
              interval=f"{m.interval_s or 0:g}", window=f"{m.window_s or 0:.1f}")]


def bad(cells: Iterable[CellRow | None]) -> list[CellRow]:
    """The cells among `cells` that are not ok, each once, in order."""
    out: dict[int, CellRow] = {}
    for c in cells:
        if c is not None and not state_of(c).ok:
            out.setdefault(c.id, c)
    return list(out.values())


def footnote(c: CellRow, lang: str, name: str | None = None) -> str:
    """Why `c` is marked; `name` (default: its config) says whose cell it is (compare: RUN:CONFIG)."""
    s = state_of(c)
    reason = s.reason or t(lang, "mark.no_reason")
    return t(lang, f"mark.{s.kind}", mark=s.mark, cell=f"{name or c.config} {label_of(c)}", reason=reason)


def footnotes(cells: Iterable[CellRow | None], lang: str, names: dict[int, str] | None = None,
              keys: Iterable[str] = ()) -> list[str]:
    """One footnote per marked cell, and per cause of its figures (among `keys`, the figures shown) marked
    moved; `names` maps a cell id to the column that shows it."""
    cells = list(cells)
    out = [footnote(c, lang, (names or {}).get(c.id)) for c in bad(cells)]
    keys = list(keys)
    seen: set[int] = set()
    for c in cells:
        if c is not None and state_of(c).ok and c.id not in seen:
            seen.add(c.id)
            out += moved_footnotes(c, lang, keys, (names or {}).get(c.id))
            out += sparse_footnote(c, lang, keys, (names or {}).get(c.id))
    return out


def ratio_cell(a: CellRow | None, b: CellRow | None, va, vb, judging: Judging | None = None,
               key: str | None = None) -> Cell | str:
    """b / a as '1.35x'; built on a cell that is not ok (or, `key` given, a figure marked moved) it is refused
    ('n/a' plus the mark) unless the judging allows it (--allow-not-ok; a moved figure: --allow-client-lag
    too), and then shown with the mark."""
    if a is None or b is None or missing(va) or missing(vb) or not va:
        return "-"
    states = [state_of(c) if key is None else figure_state_of(c, key) for c in (a, b)]
    worst = next((s for s in states if not s.ok), None)
    if worst is None:
        return f"{vb / va:.2f}x"
    allow = judging is not None and (judging.allow_not_ok or (worst.kind == "moved" and judging.allow_client_lag))
    text = f"{vb / va:.2f}x" if allow else "n/a"
    return Cell(text, mark=worst.mark, why=worst.kind)


def legend(lang: str) -> str:
    """One line naming every mark (under the definitions)."""
    kinds = ("failed", "invalid", "mismatch", "moved", "spec_random", "sparse", "skipped", "interrupted",
             "unknown")  # one per symbol
    return t(lang, "mark.legend", marks="; ".join(f"{MARKS[k]} {t(lang, f'mark.name.{k}')}" for k in kinds))
