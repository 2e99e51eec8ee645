"""Do compared columns run the same effective workload? Numbers are only comparable when they do.

Checked per column (a server config of a stored run): server-reported input and output tokens per
request in every common cell, sampling (temperature), ignore_eos, and the prefix-cache state. A value
that differs is a difference; a value nothing stored can tell is "unknown". `compare --strict` refuses
both.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.report.document import pct
from tokenbench.report.i18n import t
from tokenbench.report.model import CellInfo, ConfigInfo, RunData

TOLERANCE = 0.01           # relative difference in tokens per request that counts as different
OWN_KINDS = ("bench", "sweep")   # runs tokenbench measured: it always sends temperature=0, ignore_eos


@dataclass
class Column:
    run: RunData
    config: ConfigInfo
    label: str              # the header: what it is and where it is stored
    name: str = ""          # what it is, for sentences ("... faster by"); default: the label

    def __post_init__(self) -> None:
        self.name = self.name or self.label

    def cells(self) -> list[CellInfo]:
        return self.run.cells_of(self.config.name)

    def cell(self, pair: tuple[int, int], x) -> CellInfo | None:
        return self.run.cell_at(self.config.name, pair, x)


@dataclass
class Issue:
    kind: str           # differs | unknown
    text: str


def common_cells(cols: list[Column]) -> list[tuple[tuple[int, int], float]]:
    keys = [{(c.pair, c.x) for c in col.cells()} for col in cols]
    return sorted(set.intersection(*keys), key=lambda k: (k[0], k[1] is None, k[1] or 0)) if keys else []


def _tokens(c: CellInfo, which: str) -> float | None:
    """Server-reported tokens per completed request, or None when the server did not report them."""
    sources = c.summary.get("usage_source")
    if isinstance(sources, dict) and set(sources) - {"server"}:
        return None
    done, total = c.get("completed"), c.get(f"total_{which}_tokens")
    return total / done if done and total is not None else None


def _workload(col: Column) -> dict:
    return col.config.facts.get("workload") or {}


def length_distribution(col: Column, common: list[tuple[tuple[int, int], float]]) -> str | None:
    """How each request's lengths were drawn in the column's common cells: "exact", the distribution
    (workload/lengths.py), or None when an imported result does not say."""
    found = set()
    for pair, x in common:
        c = col.cell(pair, x)
        found.add(c.summary.get("length_distribution") if c is not None else None)
    if found - {None}:
        return "; ".join(sorted(str(f or "exact") for f in found))
    return "exact" if col.run.kind in OWN_KINDS else None


def _lengths(cols: list[Column], common: list[tuple[tuple[int, int], float]], lang: str) -> list[Issue]:
    """Cells whose lengths were drawn differently are not the same workload (checked once one column drew)."""
    vals = [length_distribution(c, common) for c in cols]
    if all(v in (None, "exact") for v in vals):
        return []
    return _compare(lang, "fair.lengths", cols, vals, "", False)


def sampling(col: Column) -> str | None:
    if col.run.kind in OWN_KINDS:
        asked = col.run.spec.get("sampling") or {"temperature": 0}
        return ",".join(f"{k}={v:g}" for k, v in asked.items() if v is not None)
    temp = _workload(col).get("temperature")
    return None if temp is None else f"temperature={temp:g}"


def ignore_eos(col: Column) -> str | None:
    if col.run.kind in OWN_KINDS:
        return "true"
    v = _workload(col).get("ignore_eos")
    return None if v is None else str(bool(v)).lower()


NO_REUSE = "no prompt tokens from a prefix cache"


def cache_state(col: Column, cells: list[CellInfo]) -> str | None:
    cached = prompt = reported = 0
    for c in cells:
        a, b, n = col.run.cache.get(c.id, (0, 0, 0))
        cached, prompt, reported = cached + a, prompt + b, reported + n
    if reported and prompt and cached:
        return f"{pct(cached / prompt, 0)} of prompt tokens cached"
    if (reported and prompt) or col.run.kind in OWN_KINDS:
        return NO_REUSE                 # reported as 0 cached, or fresh random prompts: the same state
    v = _workload(col).get("prefix_cache")
    return str(v) if v else None


def _values(cols: list[Column], vals: list) -> str:
    return ", ".join(f"{c.label}={'-' if v is None else v}" for c, v in zip(cols, vals, strict=False))


def _compare(lang: str, what: str, cols: list[Column], vals: list, where: str, numeric: bool) -> list[Issue]:
    known = [v for v in vals if v is not None]
    missing = [c.label for c, v in zip(cols, vals, strict=False) if v is None]
    out = []
    if missing:
        out.append(Issue("unknown", t(lang, "fair.unknown", what=t(lang, what), columns=", ".join(missing))))
    if numeric:
        differs = bool(known) and max(known) - min(known) > TOLERANCE * max(abs(max(known)), 1e-9)
        shown = [None if v is None else f"{v:.1f}" for v in vals]
    else:
        differs, shown = len(set(known)) > 1, vals
    if differs:
        key = "fair.differs" if where else "fair.differs_all"
        out.append(Issue("differs", t(lang, key, what=t(lang, what), cell=where, values=_values(cols, shown))))
    return out


def check(cols: list[Column], lang: str) -> list[Issue]:
    issues: list[Issue] = []
    common = common_cells(cols)
    for which in ("input", "output"):
        for pair, x in common:
            cells = [col.cell(pair, x) for col in cols]
            vals = [_tokens(c, which) for c in cells]
            found = _compare(lang, f"fair.{which}_tokens", cols, vals, cells[0].label, True)
            issues += [i for i in found if i.text not in {j.text for j in issues}]
            if any(i.kind == "differs" for i in found):
                break          # one cell is enough to show it
    issues += _lengths(cols, common, lang)
    issues += _compare(lang, "fair.sampling", cols, [sampling(c) for c in cols], "", False)
    issues += _compare(lang, "fair.ignore_eos", cols, [ignore_eos(c) for c in cols], "", False)
    cells = [[col.cell(p, x) for p, x in common] for col in cols]
    issues += _compare(lang, "fair.cache", cols, [cache_state(c, cs) for c, cs in zip(cols, cells, strict=False)], "", False)
    return _dedupe(issues)


def _dedupe(issues: list[Issue]) -> list[Issue]:
    seen, out = set(), []
    for i in issues:
        if i.text not in seen:
            seen.add(i.text)
            out.append(i)
    return out
