"""The frontier section of the report and of `compare`: per (input, output) pair, output tok/s per user
against output tok/s per device (and per kW where power was sampled), each point with its 95 % interval,
dominated points greyed, then a table of every point with what dominates it (judge/frontier.py decides)."""

from __future__ import annotations

import string

from tokenbench.judge.cells import label_of, load_label_of, load_of, state_of
from tokenbench.judge.frontier import Estimate, Frontier, Member, Point, frontiers
from tokenbench.metrics.summary_groups import MonitorFigures
from tokenbench.report.document import Block, Cell, Figure, Para, Table, num
from tokenbench.report.i18n import t
from tokenbench.report.marks import fig, footnotes
from tokenbench.report.sections import Numberer
from tokenbench.report.svg_frontier import Dot, Range, frontier_chart

DERIVED = "≈"          # a figure derived from other figures of the cell (docs/metrics.md, "Frontier")
TOKENS_PER_JOULE = MonitorFigures.PREFIX + "accel_tokens_per_joule"   # marked `◌` where power is sparse
SHORT = 12            # owner names up to this long label their points; longer ones are lettered A, B, ...


def _tags(owners: list[str]) -> dict[str, str]:
    """How a point's label names its owner: the name itself when every name is short, else a letter."""
    if all(len(o) <= SHORT for o in owners):
        return {o: o for o in owners}
    return {o: string.ascii_uppercase[i % 26] for i, o in enumerate(owners)}


def _owners(fr: Frontier) -> list[str]:
    return list(dict.fromkeys(p.owner for p in fr.points))


def _range(e: Estimate) -> Range:
    return Range(e.value, e.lo, e.hi)


def _est(e: Estimate | None, digits: int = 1) -> str:
    if e is None:
        return "-"
    head = f"{DERIVED}{num(e.value, digits)}" if e.derived else num(e.value, digits)
    return head + (f" [{num(e.lo, digits)}, {num(e.hi, digits)}]" if e.has_interval else "")


def _status(p: Point, lang: str) -> str:
    if not p.ok:
        return t(lang, "fr.not_judged")
    if p.dominated_by is None:
        return t(lang, "fr.on_front")
    key = "fr.dominated_clearly" if p.clearly else "fr.dominated"
    return t(lang, key, by=p.dominated_by.label)


def _tip(p: Point, lang: str) -> str:
    c = p.cell
    star = (" *" if c.over_capacity else "") + ("" if state_of(c).ok else f" {state_of(c).mark}")
    return t(lang, "fr.tip", point=f"{p.owner} {label_of(c)}{star}", user=_est(p.per_user), device=_est(p.per_device),
             n=p.devices, status=_status(p, lang))


def _dot(p: Point, y: Estimate, series: int, tag: str, lang: str) -> Dot:
    star = ("*" if p.cell.over_capacity else "") + ("" if p.ok else f" {p.state.mark}")
    return Dot(x=_range(p.per_user), y=_range(y), series=series, label=f"{tag} {load_label_of(p.cell)}{star}".strip(),
               tip=_tip(p, lang), dominated=p.ok and p.dominated_by is not None, hollow=not p.ok,
               derived=p.per_user.derived or y.derived, order=(load_of(p.cell),),
               line=(load_of(p.cell).dimension, load_of(p.cell).cap), load=load_label_of(p.cell) + star)


def _figure(fr: Frontier, lang: str, per_kw: bool) -> Figure | None:
    owners = _owners(fr)
    tags = _tags(owners)
    names = [o if tags[o] == o else f"{tags[o]}: {o}" for o in owners]
    dots = [_dot(p, y, owners.index(p.owner), tags[p.owner], lang) for p in fr.points
            if (y := (p.per_kw if per_kw else p.per_device)) is not None]
    pair = f"{fr.pair[0]}/{fr.pair[1]}"
    title = t(lang, "plot.frontier_kw" if per_kw else "plot.frontier", pair=pair)
    ylabel = t(lang, "axis.per_kw" if per_kw else "axis.per_device")
    xlabel = t(lang, "axis.per_user" if fr.basis == "tpot" else "axis.per_user_stream")
    svg = frontier_chart(title, (xlabel, ylabel), names, dots,
                         (t(lang, "fr.key_front"), t(lang, "fr.key_dominated"), t(lang, "fr.key_derived")))
    stem = f"frontier{'-kw' if per_kw else ''}-{fr.pair[0]}-{fr.pair[1]}"
    return Figure(stem, title, svg) if svg else None


def _row(p: Point, fr: Frontier, lang: str) -> list[str | Cell]:
    c = p.cell
    row: list[str | Cell] = [p.owner, fig(c, load_label_of(c)), _status(p, lang), num(p.devices),
                             fig(c, _est(p.per_user), over=False), fig(c, _est(p.per_device), over=False)]
    if fr.has_power:
        row += [fig(c, _est(p.per_joule, 3), over=False, key=TOKENS_PER_JOULE),
                fig(c, _est(p.per_kw), over=False, key=TOKENS_PER_JOULE)]
    if fr.has_price:
        row += [fig(c, _est(p.per_usd, 0), over=False)]
    return row


def table(fr: Frontier, lang: str) -> Table:
    """Every point, the frontier's first (fastest per user first), then the dominated ones."""
    keys = ["col.config", "col.load", "col.frontier", "col.devices", "col.per_user", "col.per_device"]
    keys += (["col.per_joule", "col.per_kw"] if fr.has_power else []) + (["col.per_usd"] if fr.has_price else [])
    head = [t(lang, k) for k in keys]
    front = fr.front()
    rest = sorted((p for p in fr.points if p not in front), key=lambda p: (not p.ok, -p.per_user.value))
    rows = [_row(p, fr, lang) for p in front + rest]
    notes = footnotes([p.cell for p in fr.points], lang, {p.cell.id: p.owner for p in fr.points},
                      keys=[TOKENS_PER_JOULE] if fr.has_power else [])
    if any(p.per_user.derived or p.per_device.derived for p in fr.points):
        notes.append(t(lang, "fr.derived", mark=DERIVED))
    notes += [t(lang, f"fr.missing.{why}", cell=f"{owner} {label_of(c)}") for owner, c, why in fr.missing]
    return Table(head, rows, role="frontier", left=3, footnotes=notes)


def blocks(members: list[Member], lang: str, num_: Numberer) -> list[Block]:
    """The section's body: what the axes are, then per pair of two points or more a numbered subsection with
    its plot(s) and table (the report's and compare's section alike); [] when no pair has two (or a cell
    that could not be placed)."""
    fronts = [fr for fr in frontiers(members) if len(fr.points) > 1 or fr.missing]   # one point: no frontier
    if not fronts:
        return []
    out: list[Block] = [Para(t(lang, "fr.intro"))]
    for fr in fronts:
        out.append(num_.sub(t(lang, "h.frontier_pair", input=fr.pair[0], output=fr.pair[1])))
        out += [f for f in (_figure(fr, lang, False), _figure(fr, lang, True) if fr.has_power else None) if f]
        out.append(table(fr, lang))
    return out
