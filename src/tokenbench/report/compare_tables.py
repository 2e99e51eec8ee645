"""The tables and plots of `compare`: verdicts with 95 % intervals for every headline metric and common
cell (with each column's bottleneck), Study-B side-by-side tables with the verdict beside the speed-up,
and plots of every column on the same axes."""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.judge import plausibility
from tokenbench.judge.cells import figure_state_of, load_label_of, load_of, pair_of, value_of
from tokenbench.judge.fairness import Column, common_cells, paired
from tokenbench.judge.frontier import Member
from tokenbench.judge.intervals import Book, Judging
from tokenbench.metrics.cell_summary import Metric
from tokenbench.report import load_plots
from tokenbench.report.document import Block, Cell, Figure, Para, Table
from tokenbench.report.i18n import t
from tokenbench.report.load_plots import Plot, Source
from tokenbench.report.marks import footnotes, ratio_cell
from tokenbench.report.sections import Numberer
from tokenbench.report.verdicts import Side, figure, refused_in, refused_note, verdict_cell, verdict_table


@dataclass(frozen=True)
class _Compared:
    """The columns being compared, their sides (book, roofline), the language and the judging."""

    cols: list[Column]
    ss: list[Side]
    lang: str
    judging: Judging


def members(cols: list[Column]) -> list[Member]:
    """The columns as members of one frontier, one interval book per run."""
    books: dict[str, Book] = {}
    return [Member(col.label, col.run, col.config, books.setdefault(col.run.id, Book(col.run))) for col in cols]


def sides(cols: list[Column]) -> list[Side]:
    books: dict[str, Book] = {}
    out = []
    for col in cols:
        book = books.setdefault(col.run.id, Book(col.run))
        roofs = {chk.config.name: chk.roofline for chk in plausibility.check_run(col.run)}
        out.append(Side(col.label, book, col.config.name, roofs.get(col.config.name), col.name))
    return out


def _pairs(cols: list[Column]) -> list[tuple[int, int]]:
    return sorted({pair_of(c) for col in cols for c in col.cells()})


def side_by_side(view: _Compared, metric: Metric, digits: int, pair: tuple[int, int]) -> Table | None:
    cols, ss, lang = view.cols, view.ss, view.lang
    judging = view.judging
    base = cols[0]
    head = [t(lang, "col.load"), *[c.label for c in cols]]
    for c in cols[1:]:
        head += [t(lang, "col.speedup", other=c.label, base=base.label),
                 t(lang, "col.verdict", other=c.label, base=base.label)]
    loads = sorted({load_of(c) for col in cols for c in col.cells() if pair_of(c) == pair})
    rows, used, names = [], [], {}
    for load in loads:
        cells = [col.cell(pair, load) for col in cols]
        vals = [value_of(c, metric) if c else None for c in cells]
        if all(v is None for v in vals) and not any(c and not figure_state_of(c, metric.key).ok for c in cells):
            continue
        used += cells
        names.update({c.id: col.label for col, c in zip(cols, cells, strict=True) if c is not None})
        row: list = [next(load_label_of(c) for c in cells if c)]
        row += [_shown(s, c, metric, digits, judging) for s, c in zip(ss, cells, strict=True)]
        for side, other, v in zip(ss[1:], cells[1:], vals[1:], strict=True):
            first = cells[0]
            if first and other and not paired([first, other]):       # judge/fairness: different loads
                row += ["-", t(lang, "cmp.not_paired")]
                continue
            row.append(ratio_cell(first, other, vals[0], v, judging, metric.key))
            row.append(verdict_cell((ss[0], first), (side, other), metric, lang, judging)
                       if first and other else "-")
        rows.append(row)
    notes = footnotes(used, lang, names, [metric.key])
    notes += [refused_note(lang)] if refused_in(c for row in rows for c in row) else []
    return Table(head, rows, role="compare", footnotes=notes) if rows else None


def _shown(side: Side, c, metric: Metric, digits: int, judging: Judging):
    """The figure with its 95 % interval (and the `*` of an over-capacity cell)."""
    if c is None:
        return "-"
    cell = figure(side.book, c, metric, digits, judging)
    if isinstance(cell, Cell):
        cell.over = c.over_capacity
    return cell


def _section(cols: list[Column], lang: str, num_: Numberer, heading: str, make) -> list[Block]:
    out: list[Block] = [num_.sec(t(lang, heading))]
    for pair in _pairs(cols):
        table = make(pair)
        if table:
            out += [num_.sub(t(lang, "h.cmp_pair", input=pair[0], output=pair[1])), table]
    return out if len(out) > 1 else out + [Para(t(lang, "note.no_data"))]


CMP_PLOTS = [Plot("cmp-throughput", title="throughput", ylabel="axis.out_tps", metric=Metric("output_throughput")),
             Plot("cmp-ttft", title="ttft_p50", ylabel="axis.ttft_median_ms", metric=Metric("ttft", "p50")),
             Plot("cmp-tpot", title="tpot_p50", ylabel="axis.tpot_median_ms", metric=Metric("tpot", "p50")),
             Plot("cmp-jct", title="jct", ylabel="axis.jct_ms", metric=Metric("job", "p50"),
                  more=(Metric("job", "p95"),), intervals=True)]
JOB_P95 = Metric("job", "p95")


def figures(cols: list[Column], lang: str) -> list[Figure]:
    """Every column on the same axes: output tok/s, p50 TTFT and p50 TPOT against each load axis the
    columns have (concurrency, users, request rate, session rate: never mixed, report/load_plots.py), and
    where cells have jobs their completion time (p50 and p95, each with its 95 % interval)."""
    books: dict[str, Book] = {}
    sources = [Source(f"{col.label} {pair[0]}/{pair[1]}", col.label, [c for c in col.cells() if pair_of(c) == pair],
                      books.setdefault(col.run.id, Book(col.run)))
               for col in cols for pair in col.run.pairs(col.config.name)]
    return load_plots.figures(sources, CMP_PLOTS, lang)


def _jobs(cols: list[Column]) -> bool:
    return any(c.summary.jobs is not None for col in cols for c in col.cells())


def all_tables(cols: list[Column], lang: str, num_: Numberer, judging: Judging) -> list[Block]:
    ss = sides(cols)
    view = _Compared(cols, ss, lang, judging)
    common = common_cells(cols)

    def verdicts(pair):
        return verdict_table(ss, pair, [x for p, x in common if p == pair], lang, judging)

    out: list[Block] = _section(cols, lang, num_, "h.cmp_verdicts", verdicts)
    out.append(Para(t(lang, "note.verdicts", floor=f"{100 * judging.min_effect:g}%")))
    out.append(Para(t(lang, "noise.note")))
    out += _section(cols, lang, num_, "h.cmp_requests", lambda p: side_by_side(
        view, Metric("request_throughput", "mean"), 2, p))
    out += _section(cols, lang, num_, "h.cmp_output", lambda p: side_by_side(
        view, Metric("output_throughput", "mean"), 1, p))
    if _jobs(cols):
        out += _section(cols, lang, num_, "h.cmp_jobs", lambda p: side_by_side(view, JOB_P95, 1, p))
    figs = figures(cols, lang)
    if figs:
        out += [num_.sec(t(lang, "h.plots")), *figs]
    return out
