"""Plots as hand-written SVG: line charts, a per-request timeline and stacked bars. No plotting library.

Every data mark carries a `<title>` (a native tooltip when the .svg file is opened alone) and a
`data-tip`/`data-s` pair that the report's inline script uses for styled tooltips and for toggling a
series by clicking its legend entry. All text goes through `esc`; the output is deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22")
W, H = 760, 420
LEFT, RIGHT, TOP, BOTTOM = 74, 200, 40, 56      # RIGHT holds the legend
SVG_NS = 'xmlns="http://www.w3.org/2000/svg"'
FONTS = "system-ui, 'Noto Sans CJK SC', 'Microsoft YaHei', 'PingFang SC', sans-serif"


def esc(text) -> str:
    return escape(str(text), {'"': "&quot;"})


def f(v: float) -> str:
    """Coordinates with one decimal, no '-0.0'."""
    s = f"{v:.1f}"
    return "0.0" if s == "-0.0" else s


@dataclass
class Series:
    name: str
    points: list[tuple[float, float, str]] = field(default_factory=list)   # x, y, tooltip
    hollow: list[tuple[float, float, str]] = field(default_factory=list)   # not-ok cells: open, not joined
    band: list[tuple[float, float, float]] = field(default_factory=list)   # x, low, high: a shaded range


@dataclass
class Bar:
    """One request on the timeline: seconds since the cell's first intended start."""

    intended: float
    sent: float
    first: float | None
    end: float
    tip: str


def nice_step(span: float, target: int = 5) -> float:
    if span <= 0:
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def linear_ticks(lo: float, hi: float) -> list[float]:
    step = nice_step(hi - lo)
    start = math.floor(lo / step) * step
    n = int(math.ceil((hi - start) / step - 1e-9))
    return [start + i * step for i in range(n + 1)]


def log2_ticks(xs: list[float]) -> list[float]:
    """Powers of two from below the smallest x to above the largest (1, 2, 4, ... or 0.5, 1, 2 ...)."""
    lo, hi = math.floor(math.log2(min(xs))), math.ceil(math.log2(max(xs)))
    return [2.0 ** k for k in range(lo, max(hi, lo + 1) + 1)]


def tick_label(v: float) -> str:
    if abs(v) >= 10000:
        return f"{v / 1000:g}k"
    return f"{v:g}" if v == int(v) else f"{v:.2g}" if abs(v) < 1 else f"{v:.1f}"


class Frame:
    """Maps data to pixels for one plot area; linear, or log2 on x."""

    def __init__(self, xs: list[float], ymax: float, logx: bool, xmin: float | None = None) -> None:
        self.logx = logx
        self.xticks = log2_ticks(xs) if logx else linear_ticks(min(xs) if xmin is None else xmin, max(xs))
        self.x0, self.x1 = self._t(self.xticks[0]), self._t(self.xticks[-1])
        self.yticks = linear_ticks(0, ymax if ymax > 0 else 1)
        self.y1 = self.yticks[-1]
        self.pw: float = W - LEFT - RIGHT
        self.ph: float = H - TOP - BOTTOM

    def _t(self, x: float) -> float:
        return math.log2(x) if self.logx else x

    def px(self, x: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return LEFT + (self._t(x) - self.x0) / span * self.pw

    def py(self, y: float) -> float:
        return TOP + self.ph - y / self.y1 * self.ph


def _open(title: str, height: int = H) -> list[str]:
    return [f'<svg class="chart" viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" '
            f'aria-label="{esc(title)}" font-family="{FONTS}" font-size="12">',
            f'<rect x="0" y="0" width="{W}" height="{height}" fill="#ffffff"/>',
            f'<text x="{W / 2:.0f}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{esc(title)}</text>']


def _axes(fr: Frame, xlabel: str, ylabel: str) -> list[str]:
    out = []
    for y in fr.yticks:
        yy = f(fr.py(y))
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{yy}" y2="{yy}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{LEFT - 6}" y="{yy}" dy="4" text-anchor="end">{esc(tick_label(y))}</text>')
    base = f(TOP + fr.ph)
    for x in fr.xticks:
        xx = f(fr.px(x))
        out.append(f'<line x1="{xx}" x2="{xx}" y1="{base}" y2="{f(TOP + fr.ph + 5)}" stroke="#555"/>')
        out.append(f'<text x="{xx}" y="{f(TOP + fr.ph + 19)}" text-anchor="middle">{esc(tick_label(x))}</text>')
    out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{base}" y2="{base}" stroke="#555"/>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{base}" stroke="#555"/>')
    out.append(f'<text x="{f(LEFT + fr.pw / 2)}" y="{H - 12}" text-anchor="middle">{esc(xlabel)}</text>')
    out.append(f'<text transform="translate(16 {f(TOP + fr.ph / 2)}) rotate(-90)" text-anchor="middle">'
               f'{esc(ylabel)}</text>')
    return out


def _legend(names: list[str], colors: list[str]) -> list[str]:
    out = []
    for i, (name, color) in enumerate(zip(names, colors, strict=False)):
        y = TOP + 8 + i * 20
        short = name if len(name) <= 26 else name[:25] + "…"
        out.append(f'<g class="legend" data-s="{i}" style="cursor:pointer"><title>{esc(name)}</title>'
                   f'<rect x="{W - RIGHT + 14}" y="{y - 9}" width="14" height="10" fill="{color}"/>'
                   f'<text x="{W - RIGHT + 34}" y="{y}">{esc(short)}</text></g>')
    return out


def line_chart(title: str, xlabel: str, ylabel: str, series: list[Series], logx: bool = False) -> str:
    """The chart, or "" with fewer than two points (one point shows nothing its table does not)."""
    pts = [p for s in series for p in s.points + s.hollow]
    if len(pts) < 2:
        return ""
    xs = [p[0] for p in pts]
    logx = logx and min(xs) > 0
    top = max([p[1] for p in pts] + [hi for s in series for _, _, hi in s.band])
    fr = Frame(xs, top * 1.05, logx, xmin=0 if not logx and min(xs) >= 0 else None)
    out = _open(title) + _axes(fr, xlabel, ylabel)
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(series))]
    for i, (s, color) in enumerate(zip(series, colors, strict=False)):
        ordered = sorted(s.points)
        path = " ".join(f"{f(fr.px(x))},{f(fr.py(y))}" for x, y, _ in ordered)
        out.append(f'<g class="series" data-s="{i}">')
        out += _band(fr, s.band, color)
        if len(ordered) > 1:
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y, tip in ordered:
            out.append(f'<circle cx="{f(fr.px(x))}" cy="{f(fr.py(y))}" r="4" fill="{color}" '
                       f'data-tip="{esc(tip)}"><title>{esc(tip)}</title></circle>')
        for x, y, tip in sorted(s.hollow):
            out.append(f'<circle class="notok" cx="{f(fr.px(x))}" cy="{f(fr.py(y))}" r="4.5" fill="#ffffff" '
                       f'stroke="{color}" stroke-width="2" data-tip="{esc(tip)}"><title>{esc(tip)}</title></circle>')
        out.append("</g>")
    out += _legend([s.name for s in series], colors)
    out.append("</svg>")
    return "\n".join(out)


def _band(fr: Frame, band: list[tuple[float, float, float]], color: str) -> list[str]:
    """A shaded polygon between the lows and highs of a series (p90 to p99)."""
    ordered = sorted(band)
    if len(ordered) < 2:
        return [f'<line class="band" x1="{f(fr.px(x))}" x2="{f(fr.px(x))}" y1="{f(fr.py(lo))}" y2="{f(fr.py(hi))}" '
                f'stroke="{color}" stroke-opacity="0.3" stroke-width="8"/>' for x, lo, hi in ordered]
    edge = [(x, hi) for x, _, hi in ordered] + [(x, lo) for x, lo, _ in reversed(ordered)]
    pts = " ".join(f"{f(fr.px(x))},{f(fr.py(y))}" for x, y in edge)
    return [f'<polygon class="band" points="{pts}" fill="{color}" fill-opacity="0.15" stroke="none"/>']


def _rows(title: str, xmax: float, plot_height: float, height: int) -> tuple[Frame, list[str]]:
    """A chart of horizontal rows over [0, xmax] (`plot_height` pixels of them): its frame, and its opening with the
    vertical grid and the x ticks."""
    fr = Frame([0.0, xmax], 1.0, False, xmin=0.0)
    fr.ph = plot_height
    out = _open(title, height)
    base = f(TOP + fr.ph)
    for x in fr.xticks:
        xx = f(fr.px(x))
        out.append(f'<line x1="{xx}" x2="{xx}" y1="{TOP}" y2="{base}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{xx}" y="{f(TOP + fr.ph + 18)}" text-anchor="middle">{esc(tick_label(x))}</text>')
    return fr, out


def timeline_chart(title: str, xlabel: str, ylabel: str, bars: list[Bar], legend: list[str]) -> str:
    """Horizontal bars, one row per request in send order: client wait, send->first token, decode."""
    if not bars:
        return ""
    bars = sorted(bars, key=lambda b: (b.sent, b.intended))
    row = max(1.0, min(18.0, 420 / len(bars)))
    height = int(TOP + BOTTOM + row * len(bars) + 10)
    fr, out = _rows(title, max(b.end for b in bars), len(bars) * row, height)
    out.append(f'<text x="{f(LEFT + fr.pw / 2)}" y="{height - 12}" text-anchor="middle">{esc(xlabel)}</text>')
    out.append(f'<text transform="translate(16 {f(TOP + fr.ph / 2)}) rotate(-90)" text-anchor="middle">'
               f'{esc(ylabel)}</text>')
    colors = ["#9e9e9e", "#ff7f0e", "#1f77b4"]
    for i, b in enumerate(bars):
        y, h = f(TOP + i * row), f(max(row - 0.5, 0.8))
        segs = [(b.intended, b.sent, 0), (b.sent, b.first if b.first is not None else b.end, 1)]
        if b.first is not None:
            segs.append((b.first, b.end, 2))
        out.append(f'<g data-tip="{esc(b.tip)}"><title>{esc(b.tip)}</title>')
        for a, z, k in segs:
            if z > a:
                out.append(f'<rect class="s{k}" data-s="{k}" x="{f(fr.px(a))}" y="{y}" '
                           f'width="{f(max(fr.px(z) - fr.px(a), 0.5))}" height="{h}" fill="{colors[k]}"/>')
        out.append("</g>")
    out += _legend(legend, colors)
    out.append("</svg>")
    return "\n".join(out)


@dataclass
class Stack:
    """One horizontal stacked bar: its label and its parts in legend order (a value in the x unit, a tooltip);
    a negative part is drawn as nothing (its tooltip still says it)."""

    label: str
    parts: list[tuple[float, str]]


def stacked_chart(title: str, xlabel: str, stacks: list[Stack], legend: list[str], colors: list[str]) -> str:
    """Horizontal stacked bars, one row per stack (its label above it), the parts coloured as the legend (clicking
    an entry hides that part in every bar)."""
    if not stacks:
        return ""
    row = 36.0
    height = int(max(TOP + BOTTOM + row * len(stacks) + 10, TOP + 20 * len(legend) + 20))
    total = max(sum(max(v, 0.0) for v, _ in st.parts) for st in stacks)
    fr, out = _rows(title, total or 1.0, row * len(stacks), height)
    out.append(f'<text x="{f(LEFT + fr.pw / 2)}" y="{f(TOP + fr.ph + 40)}" text-anchor="middle">{esc(xlabel)}</text>')
    for i, st in enumerate(stacks):
        out += _stack(fr, st, TOP + i * row, colors)
    out += _legend(legend, colors)
    out.append("</svg>")
    return "\n".join(out)


def _stack(fr: Frame, st: Stack, y: float, colors: list[str]) -> list[str]:
    out = [f'<text class="stack-label" x="{LEFT + 2}" y="{f(y + 12)}" font-size="11">{esc(st.label)}</text>']
    at = 0.0
    for k, (value, tip) in enumerate(st.parts):
        width = max(value, 0.0)
        out.append(f'<rect class="series" data-s="{k}" x="{f(fr.px(at))}" y="{f(y + 16)}" '
                   f'width="{f(max(fr.px(at + width) - fr.px(at), 0.0))}" height="16" fill="{colors[k]}" '
                   f'data-tip="{esc(tip)}"><title>{esc(tip)}</title></rect>')
        at += width
    return out


def standalone(svg: str) -> str:
    """The same SVG as a file of its own (needs the namespace and an XML prolog)."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + svg.replace("<svg ", f"<svg {SVG_NS} ", 1) + "\n"
