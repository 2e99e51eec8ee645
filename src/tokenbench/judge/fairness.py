"""Do compared columns run the same effective workload? Numbers are only comparable when they do.

Checked per column (a server config of a stored run): server-reported input and output tokens per
request in every common cell, how each request's lengths were drawn (exact, or a length distribution:
workload/lengths.py), sampling (temperature and the other sampling fields asked), ignore_eos, and the
prefix-cache state; where sessions cells are compared, the session shape (turns, lengths, think time,
system prompt, what the assistant turns are, the API, the ramp; the users or session rate are the cells'
load) instead of the prefix-cache state: a session's reuse of its history is what it measures, its hit rate
a result, not a difference of workload. A value that differs is a difference; a value nothing stored can
tell is "unknown". `compare --strict` refuses both.

Cells pair by (input, output, load). Two cells at the same load figure are not the same load when one is
a concurrency (closed loop) and the other a request rate (open loop), or two rates differ in their
`--max-concurrency` cap (or how it held arrivals: queue or gate) or their arrival process: such cells are
never paired (no ratio, no verdict), and the difference is an issue (check "load", its reason code in
`detail`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tokenbench.judge.cells import label_of, load_of, pair_of, session_shape_of, x_of
from tokenbench.judge.load_axes import LoadKey
from tokenbench.judge.views import ConfigInfo, RunData
from tokenbench.metrics.cell_summary import known
from tokenbench.spec.server_facts import Sampling
from tokenbench.spec.study import Sampling as SamplingAsked
from tokenbench.store.rows import CellRow

TOLERANCE = 0.01           # relative difference in tokens per request that counts as different
OWN_KINDS = ("bench", "sweep", "demo")   # runs tokenbench measured: ignore_eos, the sampling its spec asked (temperature=0)


@dataclass
class Column:
    run: RunData
    config: ConfigInfo
    label: str              # the header: what it is and where it is stored
    name: str = ""          # what it is, for sentences ("... faster by"); default: the label

    def __post_init__(self) -> None:
        self.name = self.name or self.label

    def cells(self) -> list[CellRow]:
        return self.run.cells_of(self.config.name)

    def cell(self, pair: tuple[int, int], load: LoadKey | float) -> CellRow | None:
        return self.run.cell_at(self.config.name, pair, load)


Check = Literal["input_tokens", "output_tokens", "lengths", "sampling", "ignore_eos", "cache", "session_shape",
                "load"]
LoadDiff = Literal["mode", "cap", "arrival"]     # closed vs open loop; the in-flight cap; the arrival process
SINGLE_TURN = "single-turn"        # the session shape of a column's cells that are not sessions


@dataclass(frozen=True)
class CacheUse:
    """How much of the prompts a column served from a prefix cache."""

    percent: int | None = None      # some were (reported by the server), rounded to a whole percent
    stated: str | None = None       # an imported result's own word for it (its prefix-cache setting)
    state: str | None = None        # whether the cache could hold the prompts (study/prompt_cache.py): cold, warm,
                                    # unknown; several joined by '+' where the column's cells differ


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
    detail: LoadDiff | None = None  # check "load": what makes the loads different


Cap = tuple[int, str] | None      # a rate's in-flight cap and how it held arrivals (queue, gate)


def load_shape(c: CellRow) -> tuple[str, float | None, Cap, str | None, float | None]:
    """What a cell's load is: (its dimension (judge/load_axes.py), its figure, the in-flight cap of a rate, arrival, burstiness);
    None where the cell does not tell (an imported file that does not say how it sent). A cap held
    arrivals as a queue (vLLM's and SGLang's, so any imported cap) unless the cell says gate."""
    s, key = c.summary, load_of(c)
    if key.dimension in ("concurrency", "users"):
        return (key.dimension, key.value, None, None, None)
    cap = (s.max_concurrency, (s.send.send_cap if s.send else None) or "queue") if s.max_concurrency else None
    return (key.dimension, c.request_rate, cap, s.arrival, s.burstiness or (1.0 if s.arrival else None))


def load_difference(a: CellRow, b: CellRow) -> LoadDiff | None:
    """Why two cells at the same (pair, load figure) are not the same load, or None when they are."""
    (mode_a, _, cap_a, arr_a, b_a), (mode_b, _, cap_b, arr_b, b_b) = load_shape(a), load_shape(b)
    if mode_a != mode_b:
        return "mode"
    if cap_a != cap_b:
        return "cap"
    told = None not in (arr_a, arr_b)
    return "arrival" if told and (arr_a, b_a) != (arr_b, b_b) else None


def paired(cells: list[CellRow | None]) -> bool:
    """Every cell present and all of the same load (so their figures may be set side by side)."""
    present = [c for c in cells if c is not None]
    return len(present) == len(cells) and all(load_difference(present[0], c) is None for c in present[1:])


def common_cells(cols: list[Column]) -> list[tuple[tuple[int, int], LoadKey]]:
    """The (pair, load) every column measured, a load matched within its own dimension (load_axes), and
    of the same load there (`paired`: the same arrival process, a cap held the same way)."""
    keys = [{(pair_of(c), load_of(c)) for c in col.cells()} for col in cols]
    common = sorted(set.intersection(*keys)) if keys else []
    return [(p, k) for p, k in common if paired([col.cell(p, k) for col in cols])]


def _same_figure(cols: list[Column]) -> list[tuple[tuple[int, int], float]]:
    """The (pair, load figure) every column measured, whatever the load's dimension ('4' of c=4 and 4/s)."""
    keys = [{(pair_of(c), x_of(c)) for c in col.cells()} for col in cols]
    return sorted(set.intersection(*keys)) if keys else []


def _differing(cols: list[Column], p: tuple[int, int], x: float) -> list[CellRow] | None:
    """The columns' cells at one (pair, load figure) whose loads differ (one per column), or None: at a load
    key they share, those cells when they are not the same load; with none shared, each column's first."""
    groups = [[c for c in col.cells() if pair_of(c) == p and x_of(c) == x] for col in cols]
    shared = set.intersection(*({load_of(c) for c in g} for g in groups))
    for k in sorted(shared):
        at = [col.cell(p, k) for col in cols]
        if not paired(at):
            return [c for c in at if c is not None]
    return None if shared else [g[0] for g in groups]


def load_issues(cols: list[Column]) -> list[Issue]:
    """Cells at the same (pair, load figure) whose loads differ (a rate beside a concurrency, another cap or
    arrival process): one issue per figure; such cells are never paired."""
    out = []
    for p, x in _same_figure(cols):
        cells = _differing(cols, p, x)
        why = next((d for c in cells[1:] if (d := load_difference(cells[0], c)) is not None), None) if cells else None
        if cells and why is not None:
            out.append(Issue("differs", "load", tuple(col.label for col in cols), tuple(load_text(c) for c in cells),
                             label_of(cells[0]), why))
    return out


def load_text(c: CellRow) -> str:
    """The load as the tools spell it: 'c=8', '8/s', '8/s max 4 in flight', '8/s constant', '8/s b=0.5'."""
    mode, x, cap, arrival, burst = load_shape(c)
    if mode in ("concurrency", "users"):
        return load_of(c).label
    head = "replay" if mode == "replay" else f"{x:g} sessions/s" if mode == "session_rate" else f"{x:g}/s"
    shape = [f"b={burst:g}" if burst not in (None, 1.0) else "", "constant" if arrival == "constant" else "",
             f"max {cap[0]} in flight" + (" (gate)" if cap[1] == "gate" else "") if cap else ""]
    return " ".join([head, *(w for w in shape if w)])


def _tokens(c: CellRow, which: str) -> float | None:
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


def _states(cells: list[CellRow]) -> str | None:
    """The prefix-cache states the cells recorded ('cold', 'cold+warm'); None where none did."""
    found = {r.summary.cache.state for c in cells for r in (c.repeats or (c,)) if r.summary.cache is not None}
    return "+".join(sorted(str(s) for s in found)) if found else None


def cache_state(col: Column, cells: list[CellRow]) -> CacheUse | None:
    cached = prompt = reported = 0
    for c in cells:
        a, b, n = col.run.cache.get(c.id, (0, 0, 0))
        cached, prompt, reported = cached + a, prompt + b, reported + n
    state = _states(cells)
    if reported and prompt and cached:
        return CacheUse(percent=int(f"{100 * cached / prompt:.0f}"), state=state)
    if (reported and prompt) or col.run.kind in OWN_KINDS:
        return CacheUse(state=state)    # reported as 0 cached, or fresh random prompts: the same state
    v = _workload(col).prefix_cache
    return CacheUse(stated=str(v)) if v else None


def session_shape(cells: list[CellRow]) -> str | None:
    """The session shapes of a column's common cells (SINGLE_TURN for cells that are not sessions)."""
    shapes = {session_shape_of(c) or SINGLE_TURN for c in cells}
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
    issues: list[Issue] = load_issues(cols)
    common = common_cells(cols)
    for which in ("input", "output"):
        for pair, x in common:
            cells = [col.cell(pair, x) for col in cols]
            vals = [_tokens(c, which) if c else None for c in cells]
            what: Check = "input_tokens" if which == "input" else "output_tokens"
            found = _compare(what, cols, vals, label_of(cells[0]) if cells[0] else "", True)
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
