"""The report's timeslices section (drawn under the monitor timelines): every cell's steady-state verdict,
and for one cell (a capacity search's sustain cell, else the timeline's cell) its figures per slice as
charts, with the table when it is short. Rendering only: the slices are stored with each cell
(metrics/timeslices.py)."""

from __future__ import annotations

from tokenbench.judge.cells import label_of
from tokenbench.judge.views import RunData
from tokenbench.metrics.timeslices import STEADY_SPREAD, Timeslices
from tokenbench.report.document import Block, Figure, Para, Table, num, pct
from tokenbench.report.i18n import t
from tokenbench.report.svg import Series, line_chart
from tokenbench.store.rows import CellRow

SHORT = 24          # a cell with at most this many slices gets its table in the report too


def _steady(s: Timeslices | None, lang: str) -> str:
    verdict = None if s is None else s.steady
    return t(lang, "steady.short" if verdict is None else "steady.yes" if verdict else "steady.no")


def steady_table(run: RunData, lang: str) -> Table | None:
    """Every cell that ran a full slice or more: its slices and its steady-state verdict."""
    head = [t(lang, k) for k in ("col.config", "col.cell", "col.slices", "col.steady", "col.spread")]
    rows = []
    for c in run.cells:
        s = c.summary.slices
        if s is not None and s.full():
            rows.append([c.config, label_of(c), f"{len(s)} ({len(s.full())})", _steady(s, lang), pct(s.steady_spread)])
    return Table(head, rows, role="steady", left=2) if rows else None


def chosen(run: RunData) -> CellRow | None:
    """The sustain cell of the first search that has one, else the timeline's cell, else the longest."""
    have = [c for c in run.cells if c.summary.slices is not None]
    for row in run.searches:
        x = row.record.sustain
        found = next((c for c in have if x is not None and c.config == row.config and c.key == x.key
                      and c.repeat == x.repeat), None)
        if found is not None:
            return found
    tl = run.timeline.cell.id if run.timeline is not None else None
    if any(c.id == tl for c in have):
        return next(c for c in have if c.id == tl)
    return max(have, key=lambda c: len(c.summary.slices or []), default=None)


def _points(s: Timeslices, values: list[float | None] | None, what: str) -> list[tuple[float, float, str]]:
    starts, spans = s.start_s or [], s.span_s or []
    return [(a + w / 2, v, f"{a:g} s: {what} {num(v)}") for a, w, v in zip(starts, spans, values or [], strict=False)
            if v is not None]


def figures(c: CellRow, lang: str) -> list[Figure]:
    s = c.summary.slices
    if s is None:
        return []
    name = f"{c.config} {label_of(c)}"
    out = []
    tps = line_chart(t(lang, "plot.slices_tps", cell=name), t(lang, "axis.seconds"), t(lang, "axis.out_tps"),
                     [Series(t(lang, "series.out_tps"), _points(s, list(s.output_tps or []), "tok/s"))])
    if tps:
        out.append(Figure("slices-throughput", t(lang, "plot.slices_tps", cell=name), tps))
    series = [Series(t(lang, f"series.{k}"), _points(s, getattr(s, f"{k}_ms"), k))
              for k in ("ttft_mean", "ttft_p99", "tpot_mean")]
    lat = line_chart(t(lang, "plot.slices_latency", cell=name), t(lang, "axis.seconds"), t(lang, "axis.ms"),
                     [x for x in series if x.points])
    if lat:
        out.append(Figure("slices-latency", t(lang, "plot.slices_latency", cell=name), lat))
    return out


def _opt(values: list | None, k: int, digits: int = 1, scale: float = 1.0) -> str:
    v = values[k] if values is not None and k < len(values) else None
    return "-" if v is None else num(v * scale, digits)


def slice_table(s: Timeslices, lang: str) -> Table:
    keys = ("col.start_s", "col.span_s", "col.sent", "col.completed", "col.errors", "col.out_tps", "col.ttft_mean",
            "col.ttft_p99", "col.tpot_mean", "col.running", "col.waiting", "col.kv_max", "col.samples")
    rows = []
    for k in range(len(s)):
        rows.append([f"{(s.start_s or [])[k]:g}", _opt(s.span_s, k, 2), _opt(s.sent, k, 0), _opt(s.completed, k, 0),
                     _opt(s.errors, k, 0), _opt(s.output_tps, k), _opt(s.ttft_mean_ms, k), _opt(s.ttft_p99_ms, k),
                     _opt(s.tpot_mean_ms, k, 2), _opt(s.running_mean, k), _opt(s.waiting_max, k, 0),
                     _opt(s.kv_usage_max, k, 1, 100.0), _opt(s.monitor_samples, k, 0)])
    return Table([t(lang, k) for k in keys], rows, role="slices", left=1)


def section(run: RunData, lang: str) -> list[Block]:
    """Nothing where no cell ran more than one slice (one slice is the cell's own figures)."""
    if not any(c.summary.slices is not None and len(c.summary.slices) > 1 for c in run.cells):
        return []
    table = steady_table(run, lang)
    out: list[Block] = [Para(t(lang, "note.steady", spread=pct(STEADY_SPREAD, 0)))]
    out.append(table if table is not None else Para(t(lang, "note.no_full_slice")))
    c = chosen(run)
    s = c.summary.slices if c is not None else None
    if c is None or s is None:
        return out
    out.append(Para(t(lang, "note.slices_cell", width=f"{s.width_s:g}", cell=label_of(c), config=c.config)))
    if len(s) > 1:
        out += figures(c, lang)
    if len(s) <= SHORT:
        out.append(slice_table(s, lang))
    return out
