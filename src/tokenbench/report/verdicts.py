"""Verdict tables: for each common cell and headline metric, A and B with their 95 % intervals and
"A faster by x % [lo, hi]", "B faster ..." or "no difference detectable (smallest detectable: y %)".
Used by the report's server-config comparison and by `compare`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenbench.judge import bottleneck, fingerprint
from tokenbench.judge.cells import figure_state_of, load_label_of, value_of
from tokenbench.judge.intervals import FIGURES, Book, Judging, verdict
from tokenbench.judge.plausibility import Roofline
from tokenbench.judge.status import usable
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.cell_summary import Metric, known
from tokenbench.report.document import Cell, Table, missing, num
from tokenbench.report.document import pct as pct_plain
from tokenbench.report.explain import bottleneck_text, refusal_text
from tokenbench.report.i18n import t
from tokenbench.report.marks import fig, footnotes
from tokenbench.store.rows import CellRow

UNRELIABLE = "◊"           # a p99 from fewer than 100 requests
DIGITS = {"request_throughput": 2, "tpot": 2, "itl": 2}


@dataclass
class Side:
    """One compared column: its header (run id and config), interval book, config and roofline."""
    label: str
    book: Book
    config: str
    roof: Roofline | None = None
    name: str = ""              # how verdict sentences name it; default: the label

    def __post_init__(self) -> None:
        self.name = self.name or self.label

    def cell(self, pair, load) -> CellRow | None:
        return self.book.run.cell_at(self.config, pair, load)


def metric_name(m: Metric, lang: str) -> str:
    return t(lang, f"vm.{m.name}") + ("" if m.name.endswith("put") else f" {m.stat}")


def pct(x: float) -> str:
    return f"{100 * x:+.1f}%" if x < 0 else f"{100 * x:.1f}%"


def verdict_text(v: u.Comparison | None, a: str, b: str, lang: str) -> str:
    """The verdict, and the between-run noise it took (the sides' repeats, or a noise floor: learned from
    the database's earlier runs, or the default)."""
    if v is None:
        return t(lang, "verdict.na")
    if v.winner is None:
        text = t(lang, "verdict.none", y=f"{100 * v.detectable:.1f}%")
    else:
        x, lo, hi = v.faster_by()
        text = t(lang, "verdict.faster", who=a if v.winner == "A" else b, x=f"{100 * x:.1f}%", lo=pct(lo), hi=pct(hi))
    return f"{text} {t(lang, f'noise.used.{v.noise}')}" if v.noise != "within" else text


def figure(book: Book, c: CellRow | None, m: Metric, digits: int | None = None,
           judging: Judging = Judging()) -> Cell | str:
    """'22.2 [21.9, 22.5]' (◊ on an unreliable p99), marked when the cell is not ok or the figure was marked
    moved (such a figure gets no interval, unless --allow-client-lag for a moved one: it is shown marked, as
    it was stored)."""
    if c is None:
        return "-"
    digits = DIGITS.get(m.name, 1) if digits is None else digits
    iv = book.interval(c, m) if usable(figure_state_of(c, m.key), judging.allow_client_lag) else None
    if iv is None:
        return fig(c, num(value_of(c, m), digits), over=False, key=m.key)
    cell = fig(c, num(iv.value, digits), over=False, key=m.key)
    cell.interval = f"[{num(iv.lo, digits)}, {num(iv.hi, digits)}]" + (UNRELIABLE if iv.unreliable else "")
    return cell


def unreliable_in(cells) -> bool:
    """Whether any of these shown figures is a p99 marked unreliable."""
    return any(isinstance(f, Cell) and f.interval.endswith(UNRELIABLE) for f in cells)


def _has(book: Book, c: CellRow, m: Metric) -> bool:
    return not missing(value_of(c, m)) or (m.name == "request_goodput" and book.slo is not None)


def verdict_table(sides: list[Side], pair, xs: list, lang: str, judging: Judging = Judging(),
                  metrics: Sequence[Metric] = FIGURES) -> Table | None:
    """Rows (load, metric); columns: each side's figure with its interval, then per extra side the
    verdict against the first: every figure of the catalogue (judge/intervals.FIGURES) some side's cell has.
    Headers name run id and config."""
    base = sides[0]
    head = [t(lang, "col.load"), t(lang, "col.metric"), *[s.label for s in sides]]
    head += [t(lang, "col.verdict", other=s.label, base=base.label) for s in sides[1:]]
    rows, used, unreliable, names, refused = [], [], False, {}, False
    for x in xs:
        found = [s.cell(pair, x) for s in sides]
        cells = [c for c in found if c is not None]
        if len(cells) < len(found):
            continue
        used += cells
        names.update({c.id: s.label for s, c in zip(sides, cells, strict=True) if c is not None})
        for m in metrics:
            if not any(_has(s.book, c, m) for s, c in zip(sides, cells, strict=True)):
                continue
            shown = [figure(s.book, c, m, judging=judging) for s, c in zip(sides, cells, strict=True)]
            unreliable = unreliable or unreliable_in(shown)
            verdicts = [verdict_cell((base, cells[0]), (s, c), m, lang, judging)
                        for s, c in zip(sides[1:], cells[1:], strict=True)]
            refused = refused or refused_in(verdicts)
            rows.append([load_label_of(cells[0]), metric_name(m, lang), *shown, *verdicts])
        if any(known(c.summary.goodput_fraction) is not None for c in cells):
            rows.append([load_label_of(cells[0]), t(lang, "col.slo_attain"),
                         *[fig(c, pct_plain(known(c.summary.goodput_fraction)), over=False) for c in cells],
                         *[""] * (len(sides) - 1)])
        rows.append([load_label_of(cells[0]), t(lang, "col.bottleneck"),
                     *[_bottleneck(s, c, lang) for s, c in zip(sides, cells, strict=True)], *[""] * (len(sides) - 1)])
    notes = footnotes(used, lang, names, [m.key for m in metrics]) + ([t(lang, "note.unreliable", mark=UNRELIABLE, n=u.UNRELIABLE_N)]
                                     if unreliable else []) + ([refused_note(lang)] if refused else [])
    return Table(head, rows, role="verdicts", left=2, footnotes=notes) if rows else None


def verdict_cell(base: tuple[Side, CellRow], other: tuple[Side, CellRow], m: Metric, lang: str,
                 judging: Judging = Judging()) -> Cell | str:
    """The verdict of `other` against `base` (each a column's side and its cell) on metric `m`: none where a
    cell is not ok or a figure was marked moved (with --allow-client-lag: given, marked)."""
    (a_side, a), (b_side, b) = base, other
    worst = next((s for c in (a, b) if not (s := figure_state_of(c, m.key)).ok), None)
    if worst is not None and not usable(worst, judging.allow_client_lag):
        return Cell(t(lang, "verdict.moved" if worst.kind == "moved" else "verdict.not_ok"), mark=worst.mark,
                    why=worst.kind)
    v = verdict(a_side.book, a, b_side.book, b, m, judging)
    reasons = _refusals(v, a, b)
    if fingerprint.refused(reasons):
        return Cell(refusal_text(reasons, lang), why="refused")
    text = verdict_text(v, a_side.name, b_side.name, lang)
    return text if worst is None else Cell(text, mark=worst.mark, why=worst.kind)


def _refusals(v: u.Comparison | None, a: CellRow, b: CellRow) -> tuple[fingerprint.Reason, ...]:
    """Why the verdict between A's cell and B's cannot be given (judge/fingerprint.refusals): none without one."""
    if v is None:
        return ()
    worse: fingerprint.Side | None = None if v.winner is None else "b" if v.winner == "A" else "a"
    return fingerprint.refusals(fingerprint.summaries([a]), fingerprint.summaries([b]), worse)


def refused_in(cells) -> bool:
    """Whether any of these shown verdicts was refused (judge/fingerprint.py)."""
    return any(isinstance(c, Cell) and c.why == "refused" for c in cells)


def refused_note(lang: str) -> str:
    rule = fingerprint.HostRule()
    return t(lang, "note.refused", points=f"{rule.other_points / 100:g}", psi=f"{rule.psi_points:g}",
             wait=f"{rule.wait_points / 100:g}")


def _bottleneck(side: Side, c: CellRow, lang: str) -> Cell:
    return fig(c, bottleneck_text(bottleneck.label(side.book.run, c, side.roof), lang), over=False)
