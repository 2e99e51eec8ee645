"""The report's capacity section: per stored search (server config x workload), the answer of each SLO
tier (capacity, the boundary's 95 % interval, why the search ended, the binding SLO with its evidence and
the bottleneck of the first failing cell), the sustain cell's verdict and drift, and the cells tried.
Rendering only: the search's record is stored (metrics/capacity.SearchRecord), the bottleneck judged by
judge/bottleneck.py."""

from __future__ import annotations

from tokenbench.judge import hardware
from tokenbench.judge.bottleneck import label
from tokenbench.judge.cells import agents
from tokenbench.judge.cost import Price, capacity_units
from tokenbench.judge.load_axes import SESSION_AXES
from tokenbench.judge.plausibility import Roofline
from tokenbench.judge.views import RunData
from tokenbench.metrics.capacity import Answer, Check, SearchRecord, Sustain, TierVerdict
from tokenbench.metrics.timeslices import Drift
from tokenbench.report import explain
from tokenbench.report.document import Block, Heading, Para, Table, num, pct, signed_pct
from tokenbench.report.i18n import t
from tokenbench.report.sections import Numberer
from tokenbench.report.verdicts import UNRELIABLE
from tokenbench.spec.slo import JOB_METRICS
from tokenbench.store.rows import CellRow, SearchRow


def load_text(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def _value(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _margin(m: float) -> str:
    return "-" if m == float("-inf") else f"{m:+.1%}"


def _cell_at(run: RunData, config: str, record: SearchRecord, x: float | None) -> CellRow | None:
    keys = _keys_at(record, x)
    return next((c for c in run.cells_of(config) if c.key in keys), None)


def _check(c: Check | None, x: float | None, lang: str) -> str:
    if c is None:
        return "-"
    if c.value is None:
        return t(lang, "cap.no_value", limit=c.limit.text, load=load_text(x))
    return t(lang, "cap.binding", limit=c.limit.text, load=load_text(x), value=_value(c.value), lo=_value(c.lo),
             hi=_value(c.hi), margin=_margin(c.margin))


def _capacity(a: Answer, lang: str) -> str:
    if a.capacity is None:
        return t(lang, "cap.none")
    return t(lang, "cap.at_least", load=load_text(a.capacity)) if a.reason == "above_max" else load_text(a.capacity)


def _why(run: RunData, row: SearchRow, a: Answer, roof: Roofline | None, lang: str) -> str:
    cell = _cell_at(run, row.config, row.record, a.fail_load)
    return explain.bottleneck_text(label(run, cell, roof), lang) if cell is not None else "-"


def _binding(row: SearchRow, a: Answer, lang: str) -> str:
    text = _check(a.binding, a.fail_load, lang)
    at = row.record.load(a.fail_load) if a.fail_load is not None else None
    if at is not None and at.of(a.tier).client:
        text += t(lang, "cap.client")
    return text


def _searched(run: RunData, row: SearchRow) -> list[CellRow]:
    keys = {c.key for c in row.record.tried}
    return [c for c in run.all_cells_of(row.config) if c.key in keys]


def _agents(run: RunData, row: SearchRow) -> bool:
    """A search in concurrent agents (or agents started per second): its cells replayed trajectories."""
    cells = _searched(run, row)
    return row.record.dimension in SESSION_AXES and bool(cells) and all(agents(c) for c in cells)


def unit_text(run: RunData, row: SearchRow, lang: str) -> str:
    """What the search's loads count: streams, requests/s, users, sessions/s; agents, agents/s."""
    dim = row.record.dimension
    return t(lang, f"unit.agents.{dim}") if _agents(run, row) else t(lang, f"unit.{dim}")


def _per_units(a: Answer, devices: int, price: Price | None) -> list[str]:
    """The answer per device, and at a price per $ an hour (only then)."""
    units = None if a.capacity is None else capacity_units((a.capacity, a.lo, a.hi), devices, price)
    per_device = _per(units.per_device if units else None)
    return [per_device] if price is None else [per_device, _per(units.per_usd_hour if units else None)]


def _per(values: tuple[float | None, float | None, float | None] | None) -> str:
    """'1.25 [1, 1.5]': an answer per device or per $/h with its interval's ends so divided."""
    if values is None or values[0] is None:
        return "-"
    return f"{values[0]:.3g} [{_g(values[1])}, {_g(values[2])}]"


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def answers(run: RunData, row: SearchRow, roof: Roofline | None, lang: str) -> Table:
    """One row per tier: its answer, the boundary's interval, why the search ended, the binding limit, the
    headroom at the answer, why the boundary is there; the answer per device and, at the study's price, per $
    an hour (judge/cost.capacity_units)."""
    r = row.record
    cfg = run.config(row.config)
    devices, price = hardware.device_count(cfg.profile, cfg.facts), Price.of(run.spec)
    unit = unit_text(run, row, lang)
    head = [t(lang, k) for k in ("col.tier", "col.limits", "col.capacity", "col.interval", "col.stopped",
                                  "col.binding", "col.headroom", "col.why")]
    head += [t(lang, "col.cap_per_device", unit=unit, devices=devices)]
    head += [t(lang, "col.cap_per_usd_hour", unit=unit)] if price is not None else []
    rows = [[a.tier, ", ".join(x.text for x in a.limits), _capacity(a, lang),
             f"[{load_text(a.lo)}{UNRELIABLE * a.lo_unreliable}, {load_text(a.hi)}{UNRELIABLE * a.hi_unreliable}]",
             t(lang, f"cap.reason.{a.reason}", budget=r.budget),
             _binding(row, a, lang), _check(a.headroom, a.capacity, lang), _why(run, row, a, roof, lang),
             *_per_units(a, devices, price)]
            for a in r.answers]
    notes = [t(lang, "cap.unreliable_jobs" if _job_limits(r) else "cap.unreliable")] \
        if any(a.lo_unreliable or a.hi_unreliable for a in r.answers) else []
    if price is not None:
        notes.append(t(lang, f"cap.per_usd.{price.basis}", price=f"{price.per_hour:g}", hourly=f"{price.hourly(devices):g}",
                       devices=devices))
    return Table(head, rows, role="capacity", left=2, footnotes=notes + job_limit_notes(run, row, lang))


def _job_limits(r: SearchRecord) -> bool:
    return any(limit.metric in JOB_METRICS for tier in r.tiers for limit in tier.limits)


def job_limit_notes(run: RunData, row: SearchRow, lang: str) -> list[str]:
    """Under the answers, one per job limit that binds (fails first, or is closest to failing at the answer): what
    it read, the complete jobs pooled at each such load, each from its first send to its last token, its tool time
    included (the tools' share of a job in the cells there), and how many a percentile needs to be a bound."""
    out = []
    for a in row.record.answers:
        found = [(c, x) for c, x in ((a.binding, a.fail_load), (a.headroom, a.capacity))
                 if c is not None and c.limit.metric in JOB_METRICS]
        for limit in dict.fromkeys(c.limit.text for c, _ in found):
            at = [(c, x) for c, x in found if c.limit.text == limit]
            keys = set().union(*(_keys_at(row.record, x) for _, x in at))
            tool = _tool_share([c for c in run.all_cells_of(row.config) if c.key in keys])
            out.append(t(lang, "cap.job_limit", tier=a.tier, limit=limit, tool=tool,
                         jobs=", ".join(f"{load_text(x)}: {c.n}" for c, x in at)))
    return out


def _tool_share(cells: list[CellRow]) -> str:
    """The mean over these cells of their jobs' tool share (a job's tool delays over its completion time)."""
    shares = [c.summary.jobs.tool_share for c in cells if c.summary.jobs and c.summary.jobs.tool_share is not None]
    return pct(sum(shares) / len(shares)) if shares else "-"


def _keys_at(r: SearchRecord, x: float | None) -> set[str]:
    return {c.key for c in r.tried if c.load == x and c.role != "sustain"}


def _verdict(v: TierVerdict, lang: str) -> str:
    word = t(lang, "cap.pass" if v.passes else "cap.fail")
    sure = v.sure
    word = t(lang, "cap.sure", verdict=word) if sure is not None and (sure == "pass") == v.passes else word
    b = v.binding
    return t(lang, "cap.verdict", verdict=word, margin=_margin(b.margin) if b is not None else "")


def tried(row: SearchRow, lang: str) -> Table:
    """Every cell in the order run: its role, load, replicate and its own verdict per tier; then the
    verdict pooled over every cell at each load."""
    r = row.record
    tiers = [x.name for x in r.tiers]
    head = [t(lang, k) for k in ("col.role", "col.load", "col.cell", "col.status")] + tiers
    rows = [[t(lang, f"role.{c.role}"), load_text(c.load), f"{c.key} #{c.repeat + 1}", c.status,
             *[_verdict(v, lang) for v in c.verdicts]] for c in r.tried]
    return Table(head, rows, role="capacity-cells", left=4)


def pooled(row: SearchRow, lang: str) -> Table:
    r = row.record
    head = [t(lang, "col.load"), t(lang, "col.cells")] + [x.name for x in r.tiers]
    rows = [[load_text(v.load), str(v.cells), *[_verdict(x, lang) for x in v.verdicts]] for v in r.loads]
    return Table(head, rows, role="capacity-loads", left=1)


def _drift(d: list[Drift], lang: str) -> str:
    """What the sustain cell's slices showed; nothing checked (no figure on both sides) is said as such."""
    if not d:
        return t(lang, "cap.drift_unchecked")
    moved = [t(lang, "cap.drift_item", figure=t(lang, f"fig.{x.figure}"), first=num(x.first), last=num(x.last),
               change=signed_pct(x.change)) for x in d if x.drifted]
    return t(lang, "cap.drifted", what="; ".join(moved)) if moved else t(lang, "cap.no_drift")


def sustain_text(r: SearchRecord, s: Sustain, lang: str) -> str:
    steady = t(lang, "steady.short" if s.steady is None else "steady.yes" if s.steady else "steady.no")
    return t(lang, "cap.sustain", cell=s.key, repeat=s.repeat + 1, duration=f"{s.duration_s:.0f}",
             load=load_text(s.load), verdict=t(lang, "cap.holds" if s.holds else "cap.fails"),
             tier=r.tiers[0].name, drift=_drift(s.drift, lang), steady=steady)


def _doubts(r: SearchRecord, lang: str) -> list[Block]:
    """The cells measured again for the client's delays, and the loads none could be measured cleanly at."""
    a = r.answers[0] if r.answers else None
    if a is None or not a.remeasured:
        return []
    blocked = t(lang, "cap.blocked", loads=", ".join(map(load_text, a.client_loads))) if a.client_loads else ""
    return [Para(t(lang, "cap.remeasured", n=a.remeasured, blocked=blocked))]


def _dimension(run: RunData, row: SearchRow, lang: str) -> str:
    r = row.record
    key = f"cap.dim.agents.{r.dimension}" if _agents(run, row) else f"cap.dim.{r.dimension}"
    return t(lang, key, arrival=run.spec.get("arrival", "poisson"))


def section(run: RunData, lang: str, num_: Numberer, roofs: dict[str, Roofline | None]) -> list[Block]:
    out: list[Block] = []
    for row in run.searches:
        r = row.record
        out += [num_.sub(t(lang, "h.capacity_search", config=row.config, workload=r.workload,
                           dimension=_dimension(run, row, lang))), answers(run, row, roofs.get(row.config), lang)]
        if r.sustain is not None:
            out.append(Para(sustain_text(r, r.sustain, lang)))
            if r.sustain.apart:
                out.append(Para(t(lang, "cap.apart", limits=", ".join(r.sustain.apart))))
        out += _doubts(r, lang)
        out += [Para(t(lang, "cap.nonmonotone", loads=", ".join(map(load_text, a.nonmonotone)), tier=a.tier))
                for a in r.answers if a.nonmonotone]
        out += [Heading(t(lang, "h.capacity_tried"), 4), pooled(row, lang), tried(row, lang)]
    if out:
        first = run.searches[0].record
        out.insert(0, Para(t(lang, "note.capacity", precision=pct(first.precision, 0), budget=first.budget)))
    return out

