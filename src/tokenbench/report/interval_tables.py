"""The report's "95 % intervals" section: per config and pair, one row per load and metric, the mean and
p50/p90/p99 each with its interval (throughputs: the rate with its interval)."""

from __future__ import annotations

from tokenbench.judge.cells import load_label_of, pair_of, value_of
from tokenbench.judge.intervals import STATS, Book
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.cell_summary import LATENCIES, RATES, Metric
from tokenbench.report.document import Block, Para, Table
from tokenbench.report.i18n import t
from tokenbench.report.marks import footnotes
from tokenbench.report.sections import Numberer
from tokenbench.report.verdicts import UNRELIABLE, figure, unreliable_in


def _rows(book: Book, cfg: str, pair: tuple[int, int], lang: str) -> tuple[list[list], bool]:
    rows: list[list] = []
    unreliable = False
    for c in [c for c in book.run.cells_of(cfg) if pair_of(c) == pair]:
        for name in LATENCIES:
            shown = [figure(book, c, Metric(name, s)) for s in STATS]
            unreliable = unreliable or unreliable_in(shown)
            rows.append([load_label_of(c), t(lang, f"vm.{name}"), *shown])
        for rate in RATES:
            m = Metric(rate, "mean")
            if value_of(c, m) is not None:
                rows.append([load_label_of(c), t(lang, f"vm.{rate}"), figure(book, c, m), "", "", ""])
    return rows, unreliable


def section(book: Book, lang: str, num_: Numberer) -> list[Block]:
    out: list[Block] = [Para(t(lang, "note.intervals"))]
    head = [t(lang, "col.load"), t(lang, "col.metric"), *[t(lang, f"col.{s}") for s in STATS]]
    for cfg in book.run.config_names():
        for pair in book.run.pairs(cfg):
            rows, unreliable = _rows(book, cfg, pair, lang)
            keys = [Metric(n, s).key for n in LATENCIES for s in STATS] + [Metric(r).key for r in RATES]
            notes = footnotes([c for c in book.run.cells_of(cfg) if pair_of(c) == pair], lang, keys=keys)
            if unreliable:
                notes.append(t(lang, "note.unreliable", mark=UNRELIABLE, n=u.UNRELIABLE_N))
            out += [num_.sub(t(lang, "h.intervals_pair", config=cfg, input=pair[0], output=pair[1])),
                    Table(head, rows, role="intervals", left=2, footnotes=notes)]
    return out
