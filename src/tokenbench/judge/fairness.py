"""Do compared columns run the same effective workload? Numbers are only comparable when they do.

Checked per column (a server config of a stored run): server-reported input and output tokens per
request in every common cell, how each request's lengths were drawn (exact, or a length distribution:
workload/lengths.py), sampling (temperature and the other sampling fields asked), ignore_eos, and the
prefix-cache state; where sessions cells are compared, the session shape (turns, lengths, think time,
system prompt, what the assistant turns are, the API, the ramp; the users or session rate are the cells'
load) instead of the prefix-cache state: a session's reuse of its history is what it measures, its hit rate
a result, not a difference of workload. A value that differs is a difference; a value nothing stored can
tell is "unknown". `compare --strict` refuses both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tokenbench.judge.load_axes import LoadKey
from tokenbench.judge.views import CellInfo, ConfigInfo, RunData
from tokenbench.metrics.cell_summary import known
from tokenbench.spec.server_facts import Sampling
from tokenbench.spec.study import Sampling as SamplingAsked

TOLERANCE = 0.01           # relative difference in tokens per request that counts as different
OWN_KINDS = ("bench", "sweep")   # runs tokenbench measured: ignore_eos, the sampling its spec asked (temperature=0)


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

    def cell(self, pair: tuple[int, int], load: LoadKey | float) -> CellInfo | None:
        return self.run.cell_at(self.config.name, pair, load)


Check = Literal["input_tokens", "output_tokens", "lengths", "sampling", "ignore_eos", "cache", "session_shape"]
SINGLE_TURN = "single-turn"        # the session shape of a column's cells that are not sessions


@dataclass(frozen=True)
class CacheUse:
    """How much of the prompts a column served from a prefix cache."""

    percent: int | None = None      # some were (reported by the server), rounded to a whole percent
    stated: str | None = None       # an imported result's own word for it (its prefix-cache setting)


Value = float | bool | str | CacheUse


@dataclass(frozen=True)
class Issue:
    """A difference between the columns (`differs`: every column's value) or what some cannot tell
    (`unknown`: those columns). report/ says it in words."""

    kind: Literal["differs", "unknown"]
    check: Check
    columns: tuple[str, ...]
    values: tuple[Value | None, ...] = ()
    cell: str = ""                  # a difference found in one common cell: its label


def common_cells(cols: list[Column]) -> list[tuple[tuple[int, int], LoadKey]]:
    """The (pair, load) every column measured; a load is matched within its own dimension (load_axes)."""
    keys = [{(c.pair, c.load) for c in col.cells()} for col in cols]
    return sorted(set.intersection(*keys)) if keys else []


def _tokens(c: CellInfo, which: str) -> float | None:
    """Server-reported tokens per completed request, or None when the server did not report them."""
    if set(c.summary.usage_source) - {"server"}:
        return None
    s = c.summary
    done, total = known(s.completed), known(s.total_input_tokens if which == "input" else s.total_output_tokens)
    return total / done if done and total is not None else None


def _workload(col: Column) -> Sampling:
    return col.config.facts.workload or Sampling()


def length_distribution(col: Column, common: list[tuple[tuple[int, int], LoadKey]]) -> str | None:
    """How each request's lengths were drawn in the column's common cells: "exact", the distribution
    (workload/lengths.py), or None when an imported result does not say."""
    found: set[str | None] = set()
    for pair, load in common:
        c = col.cell(pair, load)
        found.add(c.summary.facts.length_distribution if c is not None and c.summary.facts is not None else None)
    if found - {None}:
        return "; ".join(sorted(f or "exact" for f in found))
    return "exact" if col.run.kind in OWN_KINDS else None


def _lengths(cols: list[Column], common: list[tuple[tuple[int, int], LoadKey]]) -> list[Issue]:
    """Cells whose lengths were drawn differently are not the same workload (checked once one column drew)."""
    vals = [length_distribution(c, common) for c in cols]
    if all(v in (None, "exact") for v in vals):
        return []
    return _compare("lengths", cols, vals, "", False)


def sampling(col: Column) -> str | None:
    """The sampling the column asked: tokenbench's runs their spec's sampling fields (temperature 0 unless
    asked otherwise), an imported result its stated temperature."""
    if col.run.kind in OWN_KINDS:
        asked = SamplingAsked.model_validate(col.run.spec.get("sampling") or {}).body()
        return ",".join(f"{k}={v:g}" for k, v in asked.items())
    temp = _workload(col).temperature
    return None if temp is None else f"temperature={temp:g}"


def ignore_eos(col: Column) -> bool | None:
    if col.run.kind in OWN_KINDS:
        return True
    v = _workload(col).ignore_eos
    return None if v is None else bool(v)


def cache_state(col: Column, cells: list[CellInfo]) -> CacheUse | None:
    cached = prompt = reported = 0
    for c in cells:
        a, b, n = col.run.cache.get(c.id, (0, 0, 0))
        cached, prompt, reported = cached + a, prompt + b, reported + n
    if reported and prompt and cached:
        return CacheUse(percent=int(f"{100 * cached / prompt:.0f}"))
    if (reported and prompt) or col.run.kind in OWN_KINDS:
        return CacheUse()               # reported as 0 cached, or fresh random prompts: the same state
    v = _workload(col).prefix_cache
    return CacheUse(stated=str(v)) if v else None


def session_shape(cells: list[CellInfo]) -> str | None:
    """The session shapes of a column's common cells (SINGLE_TURN for cells that are not sessions)."""
    shapes = {c.summary.sessions.shape_text() if c.summary.sessions is not None else SINGLE_TURN for c in cells}
    return "; ".join(sorted(shapes)) if shapes else None


def _compare(check: Check, cols: list[Column], vals: list, where: str, numeric: bool) -> list[Issue]:
    known_vals = [v for v in vals if v is not None]
    missing = tuple(c.label for c, v in zip(cols, vals, strict=False) if v is None)
    out = [Issue("unknown", check, missing)] if missing else []
    if numeric:
        differs = bool(known_vals) and max(known_vals) - min(known_vals) > TOLERANCE * max(abs(max(known_vals)), 1e-9)
    else:
        differs = len(set(known_vals)) > 1
    if differs:
        out.append(Issue("differs", check, tuple(c.label for c in cols), tuple(vals), where))
    return out


def check(cols: list[Column]) -> list[Issue]:
    issues: list[Issue] = []
    common = common_cells(cols)
    for which in ("input", "output"):
        for pair, x in common:
            cells = [col.cell(pair, x) for col in cols]
            vals = [_tokens(c, which) if c else None for c in cells]
            what: Check = "input_tokens" if which == "input" else "output_tokens"
            found = _compare(what, cols, vals, cells[0].label if cells[0] else "", True)
            issues += [i for i in found if i not in issues]
            if any(i.kind == "differs" for i in found):
                break          # one cell is enough to show it
    issues += _lengths(cols, common)
    issues += _compare("sampling", cols, [sampling(c) for c in cols], "", False)
    issues += _compare("ignore_eos", cols, [ignore_eos(c) for c in cols], "", False)
    measured = [[c for p, x in common if (c := col.cell(p, x)) is not None] for col in cols]
    shaped = [col.cells() for col in cols]     # users and concurrency are different loads (load_axes), so a
    if any(c.summary.sessions is not None for cs in shaped for c in cs):   # shape is read over every cell
        issues += _compare("session_shape", cols, [session_shape(cs) for cs in shaped], "", False)
    else:
        issues += _compare("cache", cols, [cache_state(c, cs) for c, cs in zip(cols, measured, strict=False)], "",
                           False)
    return list(dict.fromkeys(issues))
