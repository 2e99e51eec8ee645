"""Figures against the load, one set per load dimension, never mixed: closed-loop concurrency (requests in
flight), users (closed-loop sessions; concurrent agents where every cell on the axis replays trajectories),
open-loop request rate (requests/s) and session rate (sessions, or agents, started per second) each get their
own plots with their own axis title, so a 3 req/s cell is never drawn at x = 3 of a concurrency axis. A rate cell that ran
with an in-flight cap stays on the rate axis; its cap is in the series name and, when every rate cell
shares it, in the axis title. Trace replays have no load axis and are not drawn here. Used by the run
report (plots.py) and by `compare` (compare_tables.py)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from tokenbench.judge.cells import agents, figure_state_of, label_of, load_of, value_of, x_of
from tokenbench.judge.intervals import Book
from tokenbench.judge.load_axes import SESSION_AXES, Dimension
from tokenbench.metrics.cell_summary import Metric
from tokenbench.report.document import Figure, num
from tokenbench.report.i18n import t
from tokenbench.report.svg import Series, line_chart
from tokenbench.store.rows import CellRow

AXES: tuple[Dimension, ...] = ("concurrency", "users", "rate", "session_rate")      # replay has no load axis


@dataclass(frozen=True)
class Source:
    """The cells one line is drawn from (a config's pair, a compared column's pair), how its series is named
    and how its points' tooltips name the cell's owner."""

    name: str
    owner: str
    cells: list[CellRow]
    book: Book | None = None        # its cells' intervals, for a plot that shades each point's own


@dataclass(frozen=True)
class Plot:
    """One figure per load dimension: its file stem (the concurrency axis keeps it, the others add
    '-users' / '-rate'), the metric's title and axis keys (i18n), the metric and an optional p90-p99 band."""

    name: str
    _: KW_ONLY                          # the name first, by position; the rest by keyword
    title: str
    ylabel: str
    metric: Metric
    band: tuple[Metric, Metric] | None = None
    more: tuple[Metric, ...] = ()      # further statistics of the figure, each a line of its own (p95 beside p50)
    intervals: bool = False            # shade each point's 95 % interval (its source's book) instead of a band


def dimensions(cells: list[CellRow]) -> list[Dimension]:
    """The load axes these cells need, in the order they are shown."""
    have = {load_of(c).dimension for c in cells}
    return [d for d in AXES if d in have]


def _caps(cells: list[CellRow]) -> list[int]:
    return sorted({load_of(c).cap for c in cells})


def _agents(dim: Dimension, cells: list[CellRow]) -> bool:
    """Every cell on this session axis replays trajectories: its users are concurrent agents."""
    on = [c for c in cells if load_of(c).dimension == dim]
    return dim in SESSION_AXES and bool(on) and all(agents(c) for c in on)


def axis_title(dim: Dimension, cells: list[CellRow], lang: str) -> str:
    """'concurrency (requests in flight)', 'request rate (requests/s)' with the cap when all share one,
    'concurrent agents' where every cell on a session axis replays trajectories."""
    if _agents(dim, cells):
        return t(lang, f"axis.agents.{dim}")
    caps = _caps([c for c in cells if load_of(c).dimension == dim]) if dim == "rate" else []
    if len(caps) == 1 and caps[0]:
        return t(lang, "axis.dim.rate_cap", cap=caps[0])
    if len(caps) > 1:
        return t(lang, "axis.dim.rate_caps")
    return t(lang, f"axis.dim.{dim}")


def dim_name(dim: Dimension, cells: list[CellRow], lang: str) -> str:
    """The dimension's name in a plot's title: 'concurrency', 'users', 'concurrent agents'..."""
    return t(lang, f"dim.agents.{dim}") if _agents(dim, cells) else t(lang, f"dim.{dim}")


def _plain(c: CellRow, *metrics: Metric) -> bool:
    """Drawn as a plain point: each figure it plots is shown plain (its cell ok, the figure not moved)."""
    return all(figure_state_of(c, m.key).ok for m in metrics)


def _tip(owner: str, c: CellRow, metric: Metric, y: float, x: float | None = None) -> str:
    state = figure_state_of(c, metric.key)
    star = (" *" if c.over_capacity else "") + ("" if state.ok else f" {state.mark} {state.kind}")
    xs = "" if x is None else f", x={num(x)}"
    return f"{owner} {label_of(c)}{star}: {metric.key}={num(y)}{xs}"


def _band(src: Source, c: CellRow, plot: Plot, metric: Metric) -> tuple[float, float] | None:
    """What is shaded at a plain point: the figure's own 95 % interval (`plot.intervals`), or the plot's band
    (p90 to p99 of the same cell)."""
    if plot.intervals:
        iv = src.book.interval(c, metric) if src.book is not None else None
        return None if iv is None else (iv.lo, iv.hi)
    band = plot.band
    if band is None or not _plain(c, *band):
        return None
    lo, hi = value_of(c, band[0]), value_of(c, band[1])
    return None if lo is None or hi is None else (lo, hi)


def _series(src: Source, dim: Dimension, plot: Plot, cap_names: bool) -> list[Series]:
    """One series per in-flight cap of the source's cells on this axis (rate cells only have caps), and per
    statistic where the plot draws several."""
    out = []
    for cap in _caps([c for c in src.cells if load_of(c).dimension == dim]):
        for metric in (plot.metric, *plot.more):
            stat = f" {metric.stat}" if plot.more else ""
            s = Series(src.name + (f" cap {cap}" if cap_names and cap else "") + stat)
            for c in src.cells:
                y = value_of(c, metric)
                if load_of(c).dimension != dim or load_of(c).cap != cap or y is None:
                    continue
                plain = _plain(c, metric)
                (s.points if plain else s.hollow).append((x_of(c), y, _tip(src.owner, c, metric, y)))
                b = _band(src, c, plot, metric) if plain else None
                if b is not None:
                    s.band.append((x_of(c), *b))
            if s.points or s.hollow:
                out.append(s)
    return out


def figures(sources: list[Source], plots: list[Plot], lang: str, prefix: str = "") -> list[Figure]:
    """Every plot on every load axis the sources' cells need: concurrency first, then users, then rate."""
    cells = [c for s in sources for c in s.cells]
    out = []
    for dim in dimensions(cells):
        caps = len(_caps([c for c in cells if load_of(c).dimension == dim])) > 1
        xlabel, where = axis_title(dim, cells, lang), dim_name(dim, cells, lang)
        for plot in plots:
            series = [s for src in sources for s in _series(src, dim, plot, caps)]
            title = t(lang, f"plot.dim.{plot.title}", dim=where)
            svg = line_chart(title, xlabel, t(lang, plot.ylabel), series, logx=True)
            if svg:
                out.append(Figure(prefix + plot.name + ("" if dim == "concurrency" else f"-{dim}"), title, svg))
    return out


def figure_series(sources: list[Source], ykey: Metric, xkey: Metric) -> list[Series]:
    """A figure against another (TPOT against output tok/s): one series per source and load dimension (and
    rate cap), each joined along its own load, so cells of different dimensions never share a line."""
    cells = [c for s in sources for c in s.cells]
    dims = [d for d in AXES if d in {load_of(c).dimension for c in cells}]
    out = []
    for src in sources:
        for dim in dims:
            for cap in _caps([c for c in src.cells if load_of(c).dimension == dim]):
                name = src.name + (f" ({dim}{f' cap {cap}' if cap else ''})" if len(dims) > 1 or cap else "")
                out += _joined(src, name, [c for c in src.cells if load_of(c).dimension == dim and load_of(c).cap == cap],
                               ykey, xkey)
    return out


def _joined(src: Source, name: str, cells: list[CellRow], ykey: Metric, xkey: Metric) -> list[Series]:
    s = Series(name)
    for c in sorted(cells, key=lambda c: load_of(c)):
        x, y = value_of(c, xkey), value_of(c, ykey)
        if x is not None and y is not None:
            (s.points if _plain(c, ykey, xkey) else s.hollow).append((x, y, _tip(src.owner, c, ykey, y, x)))
    return [s] if s.points or s.hollow else []
