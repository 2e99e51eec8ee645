"""A series' history in words and plots (judge/history.py): per cell and figure, a table of each run's value
with the band learned before it and its state, and a line chart of the values over the runs with the band
shaded and the points outside it marked. The `tokenbench history` document, and the section a run's report
shows when the run belongs to a series."""

from __future__ import annotations

from tokenbench.judge.history import History, Point, Track
from tokenbench.metrics.cell_summary import Metric
from tokenbench.report import svg
from tokenbench.report.document import Block, Document, Figure, Heading, Para, Table, num
from tokenbench.report.i18n import t
from tokenbench.report.verdicts import DIGITS, metric_name

# the figures a run's report shows of its series (`tokenbench history` shows every figure the gate judges)
REPORT_METRICS = (Metric("output_throughput"), Metric("ttft", "p50"), Metric("ttft", "p99"), Metric("tpot", "mean"),
                  Metric("itl", "p99"), Metric("e2el", "p50"))
STATES = {"within": "hist.s.within", "worse": "hist.s.worse", "better": "hist.s.better",
          "learning": "hist.s.learning", "moved": "hist.s.moved", "not_ok": "hist.s.not_ok"}


def _band(p: Point, digits: int) -> str:
    return "-" if p.band is None else f"[{num(p.band.lo, digits)}, {num(p.band.hi, digits)}]"


def rows(tr: Track, lang: str) -> list[list[str]]:
    """One row per run: the run, when, the engine version, the figure, the band, the state."""
    digits = DIGITS.get(tr.metric.name, 1)
    return [[p.run, p.when[:19].replace("T", " "), p.version, num(p.value, digits), _band(p, digits),
             t(lang, STATES[p.state])] for p in tr.points]


def headers(lang: str) -> list[str]:
    return [t(lang, k) for k in ("hist.col.run", "hist.col.when", "attr.version", "hist.col.value",
                                 "hist.col.band", "hist.col.state")]


def plot(tr: Track, lang: str, stem: str) -> Figure | None:
    """The figure over the runs (x: the run's place in the series), the band shaded where one was learned,
    the points outside it a series of their own."""
    title = f"{tr.config} {tr.cell}: {metric_name(tr.metric, lang)}"
    digits = DIGITS.get(tr.metric.name, 1)
    inside = svg.Series(t(lang, "hist.plot.runs"))
    outside = svg.Series(t(lang, "hist.plot.outside"))
    for x, p in enumerate(tr.points, start=1):
        if p.value is None:
            continue
        tip = f"{p.run}: {num(p.value, digits)} ({t(lang, STATES[p.state])})"
        target = outside if p.state in ("worse", "better") else inside
        (target.hollow if p.state in ("moved", "not_ok") else target.points).append((float(x), p.value, tip))
        if p.band is not None:
            inside.band.append((float(x), p.band.lo, p.band.hi))
    drawn = svg.line_chart(title, t(lang, "hist.plot.x"), metric_name(tr.metric, lang),
                           [s for s in (inside, outside) if s.points or s.hollow or s is inside])
    return Figure(stem, title, drawn) if drawn else None


def intro(h: History, lang: str) -> Para:
    outside = sum(len(tr.outside()) for tr in h.tracks)
    return Para(t(lang, "hist.intro", series=h.series, runs=len(h.runs), level=f"{100 * (1 - h.alpha):g}%",
                  outside=outside))


def blocks(h: History, lang: str, level: int = 3) -> list[Block]:
    """The intro, then per cell and figure a heading, its table and its plot."""
    out: list[Block] = [intro(h, lang)]
    for k, tr in enumerate(h.tracks):
        out.append(Heading(f"{tr.config} {tr.cell}: {metric_name(tr.metric, lang)}", level))
        out.append(Table(headers(lang), rows(tr, lang), role="history", left=3))
        figure = plot(tr, lang, f"history-{k + 1}")
        out += [figure] if figure is not None else []
    out.append(Para(t(lang, "hist.note")))
    return out


def document(h: History, lang: str, version: str) -> Document:
    doc = Document(t(lang, "hist.title", series=h.series), lang)
    doc.add(*blocks(h, lang, level=2), Para(t(lang, "note.rendered", version=version)))
    return doc
