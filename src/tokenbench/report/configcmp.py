"""The report's server-config comparison (TP=1 vs TP=2, engine vs engine): Study-shaped, with the
verdict and its 95 % interval beside each ratio (report/verdicts.py)."""

from __future__ import annotations

from tokenbench.judge.cells import load_label_of, load_of, pair_of, value_of
from tokenbench.judge.intervals import Book, Judging
from tokenbench.judge.views import RunData
from tokenbench.metrics.cell_summary import Metric
from tokenbench.report.document import Cell, Table, num
from tokenbench.report.i18n import t
from tokenbench.report.marks import fig, footnotes, ratio_cell
from tokenbench.report.verdicts import Side, refused_in, refused_note, verdict_cell
from tokenbench.store.rows import CellRow

CMP_METRICS = (("col.out_tps", Metric("output_throughput", "mean"), 1), ("col.tpot_mean", Metric("tpot", "mean"), 2),
               ("col.ttft_p99", Metric("ttft", "p99"), 1))


def config_pair_table(run: RunData, base: str, other: str, lang: str, book: Book,
                      judging: Judging = Judging()) -> Table | None:
    """One row per (pair, load, metric): each config's figure, the ratio other/base and the verdict."""
    head = [t(lang, "col.pair"), t(lang, "col.load"), t(lang, "col.metric"), base, other,
            t(lang, "col.ratio", other=other, base=base), t(lang, "col.verdict", other=other, base=base)]
    a_side, b_side = Side(base, book, base), Side(other, book, other)
    rows: list[list[str | Cell]] = []
    used: list[CellRow] = []
    for a in run.cells_of(base):
        b = run.cell_at(other, pair_of(a), load_of(a))
        if b is None:
            continue
        used += [a, b]
        for col, m, digits in CMP_METRICS:
            va, vb = value_of(a, m), value_of(b, m)
            rows.append([f"{a.input_len}/{a.output_len}", load_label_of(a), t(lang, col),
                         fig(a, num(va, digits), key=m.key), fig(b, num(vb, digits), key=m.key),
                         ratio_cell(a, b, va, vb, Judging(allow_client_lag=judging.allow_client_lag), m.key),
                         verdict_cell((a_side, a), (b_side, b), m, lang, judging)])
    keys = [m.key for _, m, _ in CMP_METRICS]
    notes = footnotes(used, lang, keys=keys) + ([refused_note(lang)] if refused_in(r[-1] for r in rows) else [])
    return Table(head, rows, role="configcmp", left=3, footnotes=notes) if rows else None
