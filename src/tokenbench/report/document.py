"""A report as a list of plain blocks, rendered by markdown.py and html.py alike.

Blocks hold plain text (never markup): each renderer escapes it for its own format. Figures hold an
SVG string built by svg.py; markdown writes it to a file next to the report, HTML inlines it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

OVER_MARK = "*"     # the Study-A marker for cells whose KV demand exceeds the server's capacity
GRAPH_MARK = "^"    # cells whose decode batch is above the captured graph sizes (they run eager)


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Cell:
    """A table cell with its marks kept apart from the text, so every renderer can show them its own way
    and tests can find them: `over` is the over-capacity `*`, `eager` the above-the-captured-graphs `^`,
    `mark` the not-ok mark of judge/status.py
    (`why` its kind, shown as a hover title in HTML). `interval` is the figure's 95 % interval, e.g.
    '[21.9, 22.5]' (with '◊' when unreliable): after the text in markdown and the terminal, on a line of its
    own under it in HTML (so a table of figures with intervals stays narrow)."""

    text: str
    over: bool = False
    mark: str = ""
    why: str = ""
    interval: str = ""
    eager: bool = False

    @property
    def marks(self) -> str:
        return self.mark + (OVER_MARK if self.over else "") + (GRAPH_MARK if self.eager else "")

    @property
    def full(self) -> str:
        """The text with its interval, as one line."""
        return f"{self.text} {self.interval}" if self.interval else self.text


@dataclass
class Table:
    headers: list[str]
    rows: Sequence[Sequence[str | Cell]]
    role: str = ""          # e.g. "matrix": lets tests and styles find a table
    left: int = 1           # leading columns aligned left (text); the rest are numbers
    footnotes: list[str] = field(default_factory=list)    # shown right under the table (why a mark)


@dataclass
class Figure:
    name: str               # file stem for markdown (name.svg)
    title: str
    svg: str


Block = Heading | Para | Bullets | Table | Figure


@dataclass
class Document:
    title: str
    lang: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)

    def figures(self) -> list[Figure]:
        return [b for b in self.blocks if isinstance(b, Figure)]


# number formatting -------------------------------------------------------------------------------
def missing(v) -> bool:
    return v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))


def num(v, digits: int = 1) -> str:
    """Thousands separators, fixed decimals; '-' for unknown."""
    if missing(v):
        return "-"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return f"{v:,.{digits}f}"


def plain(value) -> str:
    """The terminal's number style: 2 decimals below 1,000, none above, thousands separators; '-' for
    unknown (the CLI's tables and agreement/agree.py's markdown)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def ratio(a, b) -> str:
    """b relative to a, as '1.35x'."""
    if missing(a) or missing(b) or not a:
        return "-"
    return f"{b / a:.2f}x"


def pct(v, digits: int = 1) -> str:
    return "-" if missing(v) else f"{100 * v:.{digits}f}%"


def signed_pct(v, digits: int = 1) -> str:
    """A change: its sign always shown ("+21.1%", "-3.0%")."""
    return "-" if missing(v) else f"{100 * v:+.{digits}f}%"
