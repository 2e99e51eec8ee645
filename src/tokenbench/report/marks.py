"""Figures of cells that are not ok, and single figures the client's delays may have moved, marked where
they are shown: table cells, footnotes, ratios.

`fig(cell, text, key=...)` is the one way a table shows a cell's figure (`key`: which figure, so a mark of
that figure alone shows); `footnotes(cells, lang, keys=...)` says, under the table, why each marked cell
or figure is marked (both languages: i18n keys `mark.*` and `cause.*`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
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
    return t(lang, f"cause.{cause}", **_evidence(summary, lang))


def causes_text(cause: str, summaries: Iterable[CellSummary], lang: str) -> str:
    """One cause said once for several cells: each piece of evidence as the cells' range (3.6–6.2 %), or its
    values where they are not numbers of one unit."""
    found = [_evidence(s, lang) for s in summaries]
    return t(lang, f"cause.{cause}", **{k: _span([f[k] for f in found]) for k in found[0]})


def _evidence(summary: CellSummary, lang: str) -> dict[str, str]:
    h, f = summary.health, summary.figures
    wait = f"{h.client_wait_percent:.1f} %" if h and h.client_wait_percent is not None else "?"
    cpu = f"{h.busiest_cpu_percent():.0f} %" if h and h.client_cpu_percent is not None else "?"
    chunks = f"{f.chunks_coalesced}/{f.token_chunks}" if f and f.token_chunks else "?"
    return {"wait": wait, "cpu": cpu, "chunks": chunks, "source": source_text(summary, lang)}


def _span(values: list[str]) -> str:
    """The values as one: the value they share, a range `lo–hi %` of percentages, else each once."""
    unique = list(dict.fromkeys(values))
    if len(unique) == 1:
        return unique[0]
    pcts = [float(v.removesuffix(" %")) for v in unique if v.endswith(" %") and _number(v.removesuffix(" %"))]
    if len(pcts) == len(unique):
        return f"{min(pcts):g}–{max(pcts):g} %"
    return ", ".join(unique)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Note:
    """One cell's mark as a line says it: the cell's label, the mark's kind, its reason (a moved figure's: the
    cause's key), the cell's summary (the evidence) and, for figures marked moved, those figures with bounds."""

    cell: str
    kind: str
    reason: str
    summary: CellSummary
    figures: str = ""


def said_once(notes: Iterable[Note], lang: str) -> list[str]:
    """The notes' lines, a mark that repeats one reason (or cause) across cells said once with the cells it
    covers, in the order first seen; a reason one cell alone has reads as that cell's own line."""
    by: dict[tuple[str, str], list[Note]] = {}
    for n in notes:
        by.setdefault((n.kind, n.reason), []).append(n)
    return [_line(group, lang) for group in by.values()]


def _line(group: list[Note], lang: str) -> str:
    first = group[0]
    if first.kind == "moved" and len(group) == 1:
        return t(lang, "mark.moved", mark=MARKS["moved"], cell=first.cell, figures=first.figures,
                 reason=cause_text(first.reason, first.summary, lang))
    if first.kind == "moved":
        return t(lang, "mark.moved_cells", mark=MARKS["moved"], count=len(group),
                 figures="; ".join(f"{n.cell}: {n.figures}" for n in group),
                 reason=causes_text(first.reason, [n.summary for n in group], lang))
    cell = first.cell if len(group) == 1 else t(lang, "mark.each", cells=", ".join(n.cell for n in group))
    return t(lang, f"mark.{first.kind}", mark=MARKS[first.kind], cell=cell,
             reason=first.reason or t(lang, "mark.no_reason"))


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


def moved_notes(c: CellRow, keys: Iterable[str], name: str | None = None) -> list[Note]:
    """One note per cause of the figures of `c` (among `keys`) marked moved."""
    health = c.summary.figures or FigureHealth()
    return [Note(f"{name or c.config} {label_of(c)}", "moved", cause, c.summary,
                 ", ".join(_bound(k, m) for k in figures if (m := health.mark(k)) is not None))
            for cause, figures in _moved(c, keys).items()]


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


def note(c: CellRow, name: str | None = None) -> Note:
    """Why `c` is marked; `name` (default: its config) says whose cell it is (compare: RUN:CONFIG)."""
    s = state_of(c)
    return Note(f"{name or c.config} {label_of(c)}", s.kind, s.reason, c.summary)


def footnotes(cells: Iterable[CellRow | None], lang: str, names: dict[int, str] | None = None,
              keys: Iterable[str] = ()) -> list[str]:
    """Why each marked cell is marked, and each cause of its figures (among `keys`, the figures shown) marked
    moved, a reason that repeats across cells said once with the cells it covers; then the cells whose power
    samples fall short. `names` maps a cell id to the column that shows it."""
    cells = list(cells)
    named = names or {}
    notes = [note(c, named.get(c.id)) for c in bad(cells)]
    keys = list(keys)
    sparse: list[str] = []
    seen: set[int] = set()
    for c in cells:
        if c is not None and state_of(c).ok and c.id not in seen:
            seen.add(c.id)
            notes += moved_notes(c, keys, named.get(c.id))
            sparse += sparse_footnote(c, lang, keys, named.get(c.id))
    return said_once(notes, lang) + sparse


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
