"""Figures of cells that are not ok, marked where they are shown: table cells, footnotes, ratios.

`fig(cell, text)` is the one way a table shows a cell's figure; `footnotes(cells, lang)` says, under the
table, why each marked cell is marked (both languages: i18n keys `mark.*`).
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenbench.judge.status import MARKS
from tokenbench.judge.views import CellInfo
from tokenbench.report.document import Cell, missing
from tokenbench.report.i18n import t


def fig(c: CellInfo, text: str, over: bool = True) -> Cell:
    """`text` (a figure of cell `c`) with its not-ok mark, and the `*` of an over-capacity cell if `over`."""
    s = c.state
    return Cell(text, over=over and c.over_capacity, mark=s.mark, why="" if s.ok else s.kind)


def bad(cells: Iterable[CellInfo | None]) -> list[CellInfo]:
    """The cells among `cells` that are not ok, each once, in order."""
    out: dict[int, CellInfo] = {}
    for c in cells:
        if c is not None and not c.state.ok:
            out.setdefault(c.id, c)
    return list(out.values())


def footnote(c: CellInfo, lang: str, name: str | None = None) -> str:
    """Why `c` is marked; `name` (default: its config) says whose cell it is (compare: RUN:CONFIG)."""
    s = c.state
    reason = s.reason or t(lang, "mark.no_reason")
    return t(lang, f"mark.{s.kind}", mark=s.mark, cell=f"{name or c.config} {c.label}", reason=reason)


def footnotes(cells: Iterable[CellInfo | None], lang: str, names: dict[int, str] | None = None) -> list[str]:
    """One footnote per marked cell; `names` maps a cell id to the column that shows it."""
    return [footnote(c, lang, (names or {}).get(c.id)) for c in bad(cells)]


def ratio_cell(a: CellInfo | None, b: CellInfo | None, va, vb, allow: bool) -> Cell | str:
    """b / a as '1.35x'; built on a cell that is not ok it is refused ('refused' plus the mark) unless
    `allow`, and then shown with the mark."""
    if a is None or b is None or missing(va) or missing(vb) or not va:
        return "-"
    worst = next((c.state for c in (a, b) if not c.state.ok), None)
    if worst is None:
        return f"{vb / va:.2f}x"
    text = f"{vb / va:.2f}x" if allow else "n/a"
    return Cell(text, mark=worst.mark, why=worst.kind)


def legend(lang: str) -> str:
    """One line naming every mark (under the definitions)."""
    kinds = ("failed", "invalid", "mismatch", "lagged", "spec_random", "skipped", "interrupted", "unknown")  # one per symbol
    return t(lang, "mark.legend", marks="; ".join(f"{MARKS[k]} {t(lang, f'mark.name.{k}')}" for k in kinds))
