"""What a report opens with: one line saying what was measured, then the headline table, one row per cell
with the figures a reader came for, each with its mark (not ok, moved by the client, over capacity),
and why each mark is there. Everything else (intervals, plots, environment, definitions) follows in the
numbered sections (build.py)."""

from __future__ import annotations

from tokenbench.judge.cells import label_of, measured, value_of
from tokenbench.judge.views import RunData
from tokenbench.metrics.cell_summary import Metric
from tokenbench.report.document import Block, Cell, Para, Table, num
from tokenbench.report.i18n import t
from tokenbench.report.marks import fig, footnotes
from tokenbench.report.verdicts import DIGITS
from tokenbench.store.rows import CellRow

FIGURES = ((Metric("request_throughput"), "col.req_s"), (Metric("output_throughput"), "col.out_tps"),
           (Metric("ttft"), "col.ttft_mean"), (Metric("ttft", "p99"), "col.ttft_p99"),
           (Metric("tpot"), "col.tpot_mean"), (Metric("tpot", "p99"), "col.tpot_p99"),
           (Metric("itl", "p99"), "col.itl_p99"), (Metric("e2el"), "col.e2e_mean"))


def _done(c: CellRow) -> str:
    s = c.summary
    sent = s.interruption.planned if s.interruption is not None else s.num_prompts
    return f"{num(s.completed)}/{num(sent)}" if sent is not None else num(s.completed)


def _row(c: CellRow, many: bool) -> list[str | Cell]:
    figures = [fig(c, num(value_of(c, m), DIGITS.get(m.name, 1)), over=False, key=m.key) for m, _ in FIGURES]
    return [*([c.config] if many else []), fig(c, label_of(c)), fig(c, _done(c), over=False), *figures]


def _cells(run: RunData) -> list[CellRow]:
    return [c for cfg in run.config_names() for c in run.cells_of(cfg)]


def table(run: RunData, lang: str, notes: bool = True) -> Table:
    """Every cell of the run, config by config, in the order the run measured them (`notes`: why each marked
    one is marked, under it)."""
    many = len(run.config_names()) > 1
    cells = _cells(run)
    head = [*([t(lang, "col.config")] if many else []), t(lang, "col.cell"), t(lang, "col.requests"),
            *[t(lang, key) for _, key in FIGURES]]
    said = footnotes(cells, lang, keys=[m.key for m, _ in FIGURES]) if notes else []
    said += [t(lang, "note.over_capacity")] if notes and any(c.over_capacity for c in cells) else []
    return Table(head, [_row(c, many) for c in cells], role="headline", left=2 if many else 1, footnotes=said)


def _when(run: RunData) -> str:
    return run.created_at[:16].replace("T", " ")


def blocks(run: RunData, lang: str) -> list[Block]:
    """The lead of the report: what was run, and its cells' figures (or why there are none). A run none of whose
    cells completed a request opens with that answer and why (each reason once, with the cells it covers); its
    table then shows the requests sent and no figure, and the sections of figures are left out (build.py)."""
    what = Para(t(lang, "note.headline", kind=run.kind, target=run.target, when=_when(run), cells=len(run.cells),
                  status=run.status))
    if run.cells and not measured(run.cells):
        why = " ".join(footnotes(_cells(run), lang))
        short = Para(t(lang, "note.headline_short", kind=run.kind, target=run.target, when=_when(run),
                       cells=len(run.cells), status=run.status))
        out: list[Block] = [Para(t(lang, "note.nothing_measured", cells=len(run.cells), why=why)), short,
                            table(run, lang, notes=False)]
    else:
        out = [what, table(run, lang)] if run.cells else [what, Para(t(lang, "note.no_cells"))]
    if run.kind == "import":
        out.append(Para(t(lang, "note.import", source=(run.spec.get("import") or {}).get("source") or run.target)))
    return out
