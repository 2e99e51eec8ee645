"""The frontier plot as hand-written SVG (the style of svg.py): one point per operating point with its 95 %
interval on both axes as whiskers, a thin line through each owner's points in load order, the frontier as
a dark dashed line through the points no other beats, dominated points greyed, each point labelled with its
load. Points of cells that are not ok are hollow; derived figures are drawn as diamonds."""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.report.svg import (
    LEFT,
    PALETTE,
    RIGHT,
    TOP,
    Frame,
    W,
    _axes,
    _legend,
    _open,
    esc,
    f,
)

GREY_FILL, GREY_LINE, FRONT = "#cfcfcf", "#9a9a9a", "#333333"


@dataclass(frozen=True)
class Range:
    value: float
    lo: float | None = None
    hi: float | None = None


@dataclass(frozen=True, kw_only=True)
class Dot:
    """One operating point: x and y with their intervals, its owner (series index), its load label, its
    tooltip and how it is drawn."""

    x: Range
    y: Range
    series: int
    label: str
    tip: str
    dominated: bool = False
    hollow: bool = False
    derived: bool = False
    order: tuple = ()        # its place along its owner's line (the cell's load)
    line: tuple = ()         # which of its owner's lines joins it (one per load dimension and cap)
    load: str = ""           # the load part of its label (points sharing a spot are named by it)


def _ends(r: Range) -> list[float]:
    return [v for v in (r.value, r.lo, r.hi) if v is not None]


def _whiskers(fr: Frame, d: Dot, color: str) -> list[str]:
    out = []
    cx, cy = fr.px(d.x.value), fr.py(d.y.value)
    if d.x.lo is not None and d.x.hi is not None:
        a, b = fr.px(d.x.lo), fr.px(d.x.hi)
        out.append(f'<path class="iv ivx" d="M{f(a)},{f(cy)}H{f(b)}M{f(a)},{f(cy - 4)}V{f(cy + 4)}'
                   f'M{f(b)},{f(cy - 4)}V{f(cy + 4)}" stroke="{color}" stroke-width="1.3" fill="none"/>')
    if d.y.lo is not None and d.y.hi is not None:
        a, b = fr.py(d.y.lo), fr.py(d.y.hi)
        out.append(f'<path class="iv ivy" d="M{f(cx)},{f(a)}V{f(b)}M{f(cx - 4)},{f(a)}H{f(cx + 4)}'
                   f'M{f(cx - 4)},{f(b)}H{f(cx + 4)}" stroke="{color}" stroke-width="1.3" fill="none"/>')
    return out


def _mark(fr: Frame, d: Dot, color: str) -> str:
    cx, cy = fr.px(d.x.value), fr.py(d.y.value)
    cls = "dominated" if d.dominated else "notok" if d.hollow else "front"
    fill = "#ffffff" if d.hollow else GREY_FILL if d.dominated else color
    stroke = GREY_LINE if d.dominated else color
    attrs = (f'class="pt {cls}{" derived" if d.derived else ""}" fill="{fill}" stroke="{stroke}" stroke-width="1.6" '
             f'data-x="{d.x.value:.6g}" data-y="{d.y.value:.6g}" data-tip="{esc(d.tip)}"')
    if d.derived:
        shape = f'<path d="M{f(cx)},{f(cy - 6)}L{f(cx + 6)},{f(cy)}L{f(cx)},{f(cy + 6)}L{f(cx - 6)},{f(cy)}Z" {attrs}>'
        return shape + f"<title>{esc(d.tip)}</title></path>"
    return f'<circle cx="{f(cx)}" cy="{f(cy)}" r="5" {attrs}><title>{esc(d.tip)}</title></circle>'


CHAR_W, LINE_H = 6.0, 12.0       # label font: average character width and line height, px


@dataclass
class _Label:
    """A point's label: its left edge, baseline and text (text-anchor start)."""

    x: float
    y: float
    text: str
    grey: bool
    series: int

    @property
    def right(self) -> float:
        return self.x + CHAR_W * len(self.text)

    def clashes(self, other: _Label) -> bool:
        return abs(self.y - other.y) < LINE_H and self.x < other.right and other.x < self.right

    def inside(self, fr: Frame) -> bool:
        return LEFT + 2 <= self.x and self.right <= W - RIGHT + 4 and TOP + LINE_H <= self.y <= TOP + fr.ph - 2


# where a label may go, tried in order: right of the point above or below it, left of it, then further out
SPOTS = [(7, -8), (7, 15), (-7, -8), (-7, 15), (7, -20), (7, 27), (-7, -20), (-7, 27), (7, -32), (7, 39)]


def _place(fr: Frame, cx: float, cy: float, text: str, placed: list[_Label]) -> tuple[float, float]:
    """The first spot around (cx, cy) inside the plot where the label overprints no label already placed."""
    width = CHAR_W * len(text)
    for dx, dy in SPOTS:
        x = cx + dx if dx > 0 else cx + dx - width
        trial = _Label(x, cy + dy, text, False, 0)
        if trial.inside(fr) and not any(trial.clashes(o) for o in placed):
            return x, cy + dy
    return min(cx + 7, W - RIGHT + 4 - width), min(max(cy - 8, TOP + LINE_H), TOP + fr.ph - 2)


def _labels(fr: Frame, dots: list[Dot]) -> list[str]:
    """One label per drawn spot: points of one owner at the same spot share it ('slots2 c=2, 1/s'); each is
    put where it overprints no other label and stays inside the plot (`_place`)."""
    spots: dict[tuple[int, int, int], list[Dot]] = {}
    for d in sorted(dots, key=lambda d: (d.dominated or d.hollow, d.series)):     # the frontier's first
        spots.setdefault((d.series, round(fr.px(d.x.value) / 3), round(fr.py(d.y.value) / 3)), []).append(d)
    placed: list[_Label] = []
    for group in spots.values():
        d = group[0]
        text = ", ".join([d.label] + [g.load or g.label for g in group[1:]])
        x, y = _place(fr, fr.px(d.x.value), fr.py(d.y.value), text, placed)
        placed.append(_Label(x, y, text, all(g.dominated or g.hollow for g in group), d.series))
    return [f'<text class="ptlabel" data-s="{lab.series}" x="{f(lab.x)}" y="{f(lab.y)}" font-size="10.5" '
            f'fill="{GREY_LINE if lab.grey else "#222222"}">{esc(lab.text)}</text>' for lab in placed]


def _owner_lines(fr: Frame, dots: list[Dot], color: str) -> list[str]:
    """A thin line through an owner's points along each of its load axes (never from a concurrency to a
    rate: they are not neighbours)."""
    lines: dict[tuple, list[Dot]] = {}
    for d in dots:
        lines.setdefault(d.line, []).append(d)
    out = []
    for group in lines.values():
        ordered = sorted(group, key=lambda d: d.order)
        if len(ordered) > 1:
            pts = " ".join(f"{f(fr.px(d.x.value))},{f(fr.py(d.y.value))}" for d in ordered)
            out.append(f'<polyline class="owner" points="{pts}" fill="none" stroke="{color}" stroke-opacity="0.45" '
                       f'stroke-width="1.2"/>')
    return out


def _front(fr: Frame, front: list[tuple[float, float]]) -> list[str]:
    if not front:
        return []
    pts = " ".join(f"{f(fr.px(x))},{f(fr.py(y))}" for x, y in sorted(front))
    return [f'<polyline class="frontier" points="{pts}" fill="none" stroke="{FRONT}" stroke-width="2.2" '
            f'stroke-dasharray="7 4"/>']


def _key(names: list[str], colors: list[str], words: tuple[str, str, str], derived: bool) -> list[str]:
    """The owners (clickable, as in every chart), then the frontier line, the greyed point and (when drawn)
    the diamond of a derived point, explained."""
    out = _legend(names, colors)
    x, y = W - RIGHT + 14, TOP + 8 + len(names) * 20 + 6
    out.append(f'<g class="key"><line x1="{x}" x2="{x + 14}" y1="{y - 4}" y2="{y - 4}" stroke="{FRONT}" '
               f'stroke-width="2.2" stroke-dasharray="4 2"/><text x="{x + 20}" y="{y}">{esc(words[0])}</text></g>')
    out.append(f'<g class="key"><circle cx="{x + 7}" cy="{y + 16}" r="5" fill="{GREY_FILL}" stroke="{GREY_LINE}"/>'
               f'<text x="{x + 20}" y="{y + 20}">{esc(words[1])}</text></g>')
    if derived:
        cx, cy = x + 7, y + 36
        out.append(f'<g class="key"><path d="M{cx},{cy - 6}L{cx + 6},{cy}L{cx},{cy + 6}L{cx - 6},{cy}Z" fill="#ffffff" '
                   f'stroke="{FRONT}" stroke-width="1.4"/><text x="{x + 20}" y="{y + 40}">{esc(words[2])}</text></g>')
    return out


def frontier_chart(title: str, axes: tuple[str, str], names: list[str], dots: list[Dot],
                   key: tuple[str, str, str]) -> str:
    """`axes`: (x title, y title); `names`: the owners, indexed by `Dot.series`; `key`: the legend's words for
    the frontier line, a dominated point and a derived one. Both axes linear from 0."""
    if not dots:
        return ""
    xs = [v for d in dots for v in _ends(d.x)]
    ys = [v for d in dots for v in _ends(d.y)]
    fr = Frame([0.0, max(xs) * 1.08 or 1.0], max(ys) * 1.08, False, xmin=0.0)
    out = _open(title) + _axes(fr, axes[0], axes[1])
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(names))]
    out += _front(fr, [(d.x.value, d.y.value) for d in dots if not d.dominated and not d.hollow])
    for i, color in enumerate(colors):
        mine = [d for d in dots if d.series == i]
        out.append(f'<g class="series" data-s="{i}">')
        out += _owner_lines(fr, [d for d in mine if not d.hollow], color)
        for d in mine:
            out += _whiskers(fr, d, GREY_LINE if d.dominated else color)
        out += [_mark(fr, d, color) for d in mine]
        out.append("</g>")
    out += _labels(fr, dots)
    out += _key(names, colors, key, any(d.derived for d in dots))
    out.append("</svg>")
    return "\n".join(out)
