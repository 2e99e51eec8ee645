"""Side-by-side comparison of stored runs (or of server configs within them), Study-B style:
first what differs, then the fairness verdict, then tables with ratios against the first column."""

from __future__ import annotations

from tokenbench.errors import MeasurementError, UsageError
from tokenbench.report import hardware, plausibility
from tokenbench.report.build import plausibility_blocks
from tokenbench.report.document import Block, Bullets, Document, Para, Table, num
from tokenbench.report.fairness import Column, Issue, check, common_cells
from tokenbench.report.i18n import t
from tokenbench.report.marks import fig, footnotes, ratio_cell
from tokenbench.report.model import RunData, load_run
from tokenbench.report.sections import Numberer
from tokenbench.store.db import Store

PERCENTILES = (("P50", "median_e2el_ms"), ("P90", "p90_e2el_ms"), ("P99", "p99_e2el_ms"))


def select(store: Store, selectors: list[str]) -> list[Column]:
    """'RUN' (every config of the run that has cells) or 'RUN:CONFIG'."""
    runs: dict[str, RunData] = {}
    picked = []
    for sel in selectors:
        run_id, _, cfg = sel.partition(":")
        run = runs.get(run_id) or runs.setdefault(run_id, load_run(store, run_id, requests=False))
        names = run.config_names()
        if cfg and cfg not in names:
            raise UsageError(f"run {run_id} has no server config '{cfg}' with cells",
                             f"use one of: {', '.join(names) or '(none)'}")
        picked += [(run, n) for n in ([cfg] if cfg else names)]
    if len(picked) < 2:
        raise UsageError("compare needs at least two columns", "give two runs, or RUN:CONFIG twice")
    unique = len({n for _, n in picked}) == len(picked)
    return [Column(run, run.config(n), n if unique else f"{run.id}:{n}") for run, n in picked]


def _workload(col: Column) -> str:
    pairs = ", ".join(f"{a}/{b}" for a, b in col.run.pairs(col.config.name))
    loads = ", ".join(dict.fromkeys(c.load_label for c in sorted(col.cells(), key=lambda c: (c.x is None, c.x))))
    return f"{pairs}; {loads}"


def _hardware(col: Column) -> str:
    name = hardware.hardware_name(col.config.profile, col.config.facts, col.run.environment)
    return f"{hardware.device_count(col.config.profile, col.config.facts)} x {name}" if name else "-"


ATTRIBUTES = (
    ("attr.kind", lambda c: c.run.kind),
    ("attr.engine", lambda c: c.config.engine),
    ("attr.version", lambda c: c.config.version or "-"),
    ("attr.model", lambda c: c.config.model or "-"),
    ("attr.hardware", _hardware),
    ("attr.image", lambda c: c.config.image or "-"),
    ("attr.flags", lambda c: c.config.flags() or "-"),
    ("attr.kv_capacity", lambda c: num(c.config.kv_capacity)),
    ("attr.tool", lambda c: c.run.tool_version),
    ("attr.workload", _workload),
)


def differences(cols: list[Column], lang: str) -> list[Block]:
    rows, same = [], []
    for key, get in ATTRIBUTES:
        vals = [get(c) for c in cols]
        if len(set(vals)) > 1:
            rows.append([t(lang, key), *vals])
        else:
            same.append(f"{t(lang, key)} = {vals[0]}")
    out: list[Block] = []
    if rows:
        out.append(Table([t(lang, "col.attribute"), *[c.label for c in cols]], rows, role="differs",
                         left=len(cols) + 1))
    else:
        out.append(Para(t(lang, "note.differs_none")))
    if same:
        out.append(Para(t(lang, "note.same", items="; ".join(same))))
    return out


def fairness_blocks(issues: list[Issue], lang: str) -> list[Block]:
    differs = [i.text for i in issues if i.kind == "differs"]
    unknown = [i.text for i in issues if i.kind == "unknown"]
    out: list[Block] = []
    if not differs and not unknown:
        out.append(Para(t(lang, "note.fair")))
    if differs:
        out += [Para(t(lang, "note.unfair")), Bullets(differs)]
    if unknown:
        out += [Para(t(lang, "note.unknown")), Bullets(unknown)]
    return out


def _values(cells: list, vals: list, digits: int, allow: bool) -> list:
    """Each column's figure (marked when its cell is not ok), then b/a per extra column (refused when
    built on a cell that is not ok, unless `allow`)."""
    shown = [fig(c, num(v, digits)) if c else "-" for c, v in zip(cells, vals, strict=True)]
    return shown + [ratio_cell(cells[0], c, vals[0], v, allow) for c, v in zip(cells[1:], vals[1:], strict=True)]


def side_by_side(cols: list[Column], key: str, digits: int, lang: str, pair: tuple[int, int],
                 allow: bool = False) -> Table | None:
    base = cols[0]
    head = [t(lang, "col.load"), *[c.label for c in cols]]
    head += [t(lang, "col.speedup", other=c.label, base=base.label) for c in cols[1:]]
    xs = sorted({c.x for col in cols for c in col.cells() if c.pair == pair and c.x is not None})
    rows, used = [], []
    for x in xs:
        cells = [col.cell(pair, x) for col in cols]
        vals = [c.get(key) if c else None for c in cells]
        if all(v is None for v in vals) and not any(c and not c.state.ok for c in cells):
            continue
        used += cells
        label = next(c.load_label for c in cells if c)
        rows.append([label, *_values(cells, vals, digits, allow)])
    return Table(head, rows, role="compare", footnotes=footnotes(used, lang)) if rows else None


def latency_table(cols: list[Column], lang: str, pair: tuple[int, int], allow: bool = False) -> Table | None:
    head = [t(lang, "col.load"), t(lang, "col.percentile"), *[c.label for c in cols]]
    head += [t(lang, "col.ratio", other=c.label, base=cols[0].label) for c in cols[1:]]
    rows, used = [], []
    for (p, x) in common_cells(cols):
        if p != pair:
            continue
        cells = [col.cell(pair, x) for col in cols]
        used += cells
        for name, key in PERCENTILES:
            vals = [c.get(key) for c in cells]
            if any(v is not None for v in vals) or any(not c.state.ok for c in cells):
                rows.append([cells[0].load_label, name, *_values(cells, vals, 1, allow)])
    return Table(head, rows, role="latency", left=2, footnotes=footnotes(used, lang)) if rows else None


def _pairs(cols: list[Column]) -> list[tuple[int, int]]:
    return sorted({c.pair for col in cols for c in col.cells()})


def _tables(cols: list[Column], lang: str, num_: Numberer, heading: str, make) -> list[Block]:
    out: list[Block] = [num_.sec(t(lang, heading))]
    for pair in _pairs(cols):
        table = make(pair)
        if table:
            out += [num_.sub(t(lang, "h.cmp_pair", input=pair[0], output=pair[1])), table]
    return out if len(out) > 1 else out + [Para(t(lang, "note.no_data"))]


def build_compare(cols: list[Column], lang: str, issues: list[Issue], version: str,
                  allow_not_ok: bool = False) -> Document:
    doc = Document(t(lang, "title.compare", runs=" vs ".join(c.label for c in cols)), lang)
    num_ = Numberer()
    doc.add(num_.sec(t(lang, "h.differs")), *differences(cols, lang))
    doc.add(num_.sec(t(lang, "h.fairness")), *fairness_blocks(issues, lang))
    if not common_cells(cols):
        doc.add(Para(t(lang, "note.no_common")))
    doc.add(*_tables(cols, lang, num_, "h.cmp_requests",
                     lambda p: side_by_side(cols, "request_throughput", 2, lang, p, allow_not_ok)))
    doc.add(*_tables(cols, lang, num_, "h.cmp_output",
                     lambda p: side_by_side(cols, "output_throughput", 1, lang, p, allow_not_ok)))
    doc.add(*_tables(cols, lang, num_, "h.cmp_latency", lambda p: latency_table(cols, lang, p, allow_not_ok)))
    checks = [chk for col in cols for chk in plausibility.check_run(col.run)
              if chk.config.name == col.config.name]
    doc.add(num_.sec(t(lang, "h.plausibility")), *plausibility_blocks(checks, lang))
    doc.add(Para(t(lang, "note.rendered", version=version)))
    return doc


def enforce(issues: list[Issue]) -> None:
    """--strict: refuse a comparison whose effective workloads differ or cannot be verified."""
    if issues:
        first = issues[0].text
        more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
        raise MeasurementError(f"compare --strict refused: {first}{more}",
                               "compare runs of the same effective workload, or drop --strict to see the "
                               "comparison with the warning")


def compare(store: Store, selectors: list[str], lang: str, version: str, strict: bool = False,
            allow_not_ok: bool = False) -> tuple[Document, list[Issue]]:
    cols = select(store, selectors)
    issues = check(cols, lang)
    if strict:
        enforce(issues)
    return build_compare(cols, lang, issues, version, allow_not_ok), issues
