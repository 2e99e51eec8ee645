"""The cost section of a run report, shown when the run states a price (`--price-per-hour`): per cell the
server's price per hour, $ per million output tokens with the whole cost on them, the cost split between
input and output tokens (by measured prefill and decode time, or by token share: each row says which, and a
table with token-share rows says that split is proportional by construction), and output tokens per $ (judge/cost.py computes; formulas in docs/metrics.md, "Cost")."""

from __future__ import annotations

from tokenbench.judge.cells import label_of, measured
from tokenbench.judge.cost import Cost, Price, cell_cost
from tokenbench.judge.frontier import devices, seen
from tokenbench.judge.views import ConfigInfo, RunData
from tokenbench.report.document import Block, Cell, Para, Table, num
from tokenbench.report.i18n import t
from tokenbench.report.marks import fig, footnotes
from tokenbench.store.rows import CellRow


def shown(run: RunData) -> bool:
    return Price.of(run.spec) is not None and measured(run.cells)


def _money(v: float | None) -> str:
    return "-" if v is None else f"{v:,.4f}" if v < 10 else f"{v:,.2f}"


def _row(c: CellRow, cost: Cost, config: ConfigInfo, lang: str) -> list[str | Cell]:
    n = devices(config, c)
    split = t(lang, f"cost.by.{cost.split_by}", pct=num(100 * (cost.input_share or 0), 1)) if cost.split_by else "-"
    shown = t(lang, "cost.devices_seen", n=n) if seen(config, c) else num(n)
    return [fig(c, label_of(c)), shown, _money(cost.usd_per_hour), fig(c, _money(cost.per_m_output), over=False),
            fig(c, _money(cost.per_m_input_split), over=False), fig(c, _money(cost.per_m_output_split), over=False),
            split, fig(c, num(cost.output_per_usd, 0), over=False)]


def section(run: RunData, lang: str) -> list[Block]:
    price = Price.of(run.spec)
    if price is None:
        return []
    head = [t(lang, k) for k in ("col.cell", "col.devices", "col.usd_per_hour", "col.usd_per_m_out",
                                  "col.usd_per_m_in_split", "col.usd_per_m_out_split", "col.split_by",
                                  "col.out_per_usd")]
    out: list[Block] = [Para(t(lang, f"cost.intro.{price.basis}", price=f"{price.per_hour:g}"))]
    for cfg in run.config_names():
        cells = run.cells_of(cfg)
        costs = [(c, cost) for c in cells if (cost := cell_cost(c, price, devices(run.config(cfg), c))) is not None]
        rows = [_row(c, cost, run.config(cfg), lang) for c, cost in costs]
        if rows:
            out += [Para(t(lang, "cost.config", config=cfg)),
                    Table(head, rows, role="cost", left=1, footnotes=footnotes(cells, lang))]
        if any(cost.split_by == "tokens" for _, cost in costs):
            out.append(Para(t(lang, "cost.tokens_note")))
    return out
