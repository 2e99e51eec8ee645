"""`--find-capacity`: per (workload, server config), the highest load that meets each SLO tier, with the
boundary's 95 % interval, the binding SLO and a sustain cell that confirms it (docs/metrics.md,
"Capacity search").

A generator that receives results (STYLE.md, practice 8): it yields a `Probe` (a load, the cell's role
and its replicate index) and is sent that cell's samples (metrics/capacity.CellSamples); it returns the
search's record. The runner's searches (study/searches.Searches) run each probe as a cell on the one run
path, or find it stored (a resume replays the stored cells through the same generator). Every tier is judged on
every cell, so several tiers are answered from one set of cells:

1. bracket: from the start load, double while some tier still passes everywhere tried, halve while some
   tier fails everywhere tried (bounded by capacity_max, and by 1 stream or start/64 requests/s);
2. refine: bisect between a tier's highest passing load and its lowest failing one until they are
   closer than the precision (closed loop: whole streams; rates rounded to 3 significant digits);
3. replicate: run more cells at those two loads (fresh prompts and arrivals, samples pooled) until the
   highest one that surely passes and the lowest one that surely fails are that close; a load still
   undecided after MAX_CELLS_AT_LOAD cells gives way to one a gap further out, and where there is none the
   search keeps replicating: the budget is spent to decide;
4. stop at convergence, or when the budget (less the sustain cell) is spent; then the sustain cell at
   the first tier's answer, judged against the cells that placed it there.

A cell the client's own delays may have moved (a figure a limit reads marked for the client, an invalid cell,
or sends that left their schedule for the client's lateness: `CellSamples.doubt`) is measured again at once
and replaced, never pooled with clean ones; after MAX_REMEASURE tries the load is the client's to answer for
(above the highest pass, it bounds the bracket as a fail would, and the answer names the client).
A load that passed above one that failed reopens the search: both are replicated until each is sure. Cells
near the boundary (refine, replicate) are sized to the limits' statistics (REQUESTS_FOR: a p99 needs 299).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

from tokenbench.metrics.capacity import (
    Answer,
    CellSamples,
    Dimension,
    LoadVerdict,
    Reason,
    Role,
    SearchRecord,
    Sustain,
    Tried,
    apart,
    judge,
)
from tokenbench.metrics.timeslices import drift
from tokenbench.spec.slo import Tier
from tokenbench.spec.study import StudySpec

MAX_CELLS_AT_LOAD = 4         # replicates at one load before the search steps a gap further out
MAX_REMEASURE = 4             # cells in doubt at one load (the client's delays) before the load is the client's
REQUESTS_FOR = {"p99": 299, "p95": 59, "p90": 29, "p50": 5}   # requests a percentile's largest value bounds at 95 %
                              # (0.99^299 < 0.05): cells near the boundary are at least this large
RATE_FLOOR_SHARE = 1 / 64     # a rate search goes down to start / 64 requests/s
SUSTAIN_REQUESTS = 200        # the default sustain cell: this many requests at the rate measured at the answer
                              # (each half's p99 rests on 100, the floor below which a p99 is marked unreliable),
SUSTAIN_MIN_S, SUSTAIN_MAX_S = 60.0, 1800.0     # ... within these bounds (at least 6 timeslices of 10 s)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What one search is asked (from the study spec: find_capacity, capacity_*, tiers, sustain_s)."""

    dimension: Dimension
    tiers: tuple[Tier, ...]
    start: float | None = None
    maximum: float = 256.0
    precision: float = 0.1
    budget: int = 24
    sustain_s: float | None = None      # None: the default length; 0: no sustain cell
    workload: str = ""

    @property
    def integer(self) -> bool:
        return self.dimension in ("concurrency", "users")

    @property
    def first(self) -> float:
        return self.start or 1.0

    @property
    def floor(self) -> float:
        return 1.0 if self.integer else self.first * RATE_FLOOR_SHARE

    @property
    def sustains(self) -> bool:
        return self.sustain_s != 0


@dataclass(frozen=True)
class Probe:
    load: float
    role: Role
    repeat: int                          # cells already run at this load (in doubt or not): 0 for the first
    duration_s: float | None = None      # the sustain cell's length
    requests: int | None = None          # at least this many requests (a cell near the boundary)


@dataclass
class _State:
    s: Settings
    cells: dict[float, list[CellSamples]] = field(default_factory=dict)
    doubted: dict[float, list[CellSamples]] = field(default_factory=dict)
    tried: list[Tried] = field(default_factory=list)

    def add(self, probe: Probe, got: CellSamples) -> None:
        if probe.role == "sustain":
            pass
        elif got.doubt is not None:
            self.doubted.setdefault(probe.load, []).append(got)
        else:
            self.cells.setdefault(probe.load, []).append(got)
        self.tried.append(Tried(key=got.key, repeat=got.repeat, role=probe.role, load=probe.load,
                                status=got.status, verdicts=[judge(t, [got]) for t in self.s.tiers],
                                doubt=got.doubt))

    def again(self, probe: Probe, got: CellSamples) -> Probe | None:
        """The same load measured again when the cell is in doubt, MAX_REMEASURE times at most."""
        if probe.role == "sustain" or got.doubt is None or len(self.doubted[probe.load]) >= MAX_REMEASURE:
            return None
        return Probe(probe.load, "remeasure", self.used(probe.load), requests=probe.requests)

    def used(self, x: float) -> int:
        """Cells run at load x, in doubt or not (the next one's repeat index: fresh prompts and arrivals)."""
        return len(self.cells.get(x, [])) + len(self.doubted.get(x, []))

    def client_loads(self) -> list[float]:
        """Loads tried where no clean cell could be measured (every one in doubt)."""
        return sorted(x for x in self.doubted if x not in self.cells)

    def verdict(self, x: float, tier: Tier) -> LoadVerdict:
        return LoadVerdict(load=x, cells=len(self.cells[x]), verdicts=[judge(tier, self.cells[x])],
                           doubted=len(self.doubted.get(x, [])))

    def passes(self, tier: Tier) -> dict[float, bool]:
        return {x: self.verdict(x, tier).verdicts[0].passes for x in sorted(self.cells)}

    def sure(self, x: float, tier: Tier) -> str | None:
        return self.verdict(x, tier).verdicts[0].sure


# ---- the bracket: the highest passing load below the lowest failing one ----

def bracket(passes: dict[float, bool]) -> tuple[float | None, float | None]:
    """(L, H): H the lowest load that failed, L the highest that passed below it (either may be None)."""
    fails = [x for x, ok in passes.items() if not ok]
    high = min(fails) if fails else None
    below = [x for x, ok in passes.items() if ok and (high is None or x < high)]
    return (max(below) if below else None), high


def narrow(s: Settings, lo: float, hi: float) -> bool:
    """Whether [lo, hi] is as narrow as asked: within precision x hi, or (whole streams) one apart."""
    return hi - lo <= s.precision * hi or (s.integer and hi - lo <= 1)


def between(s: Settings, lo: float, hi: float) -> float | None:
    """The load halfway, on the dimension's grid (None when the grid has nothing strictly between)."""
    if s.integer:
        mid = float(math.floor((lo + hi) / 2))
    else:
        mid = next((m for m in (_round(lo / 2 + hi / 2, d) for d in (3, 4, 6)) if lo < m < hi), lo)
    return mid if lo < mid < hi else None


def _round(x: float, digits: int) -> float:
    return float(f"{x:.{digits}g}")


def _grid(s: Settings, x: float) -> float:
    return float(max(1, math.floor(x))) if s.integer else _round(x, 3)


# ---- what to run next, for one tier ----

@dataclass(frozen=True)
class _Step:
    priority: int                        # 0 bracket, 1 refine, 2 replicate / step out
    probe: Probe | None = None           # None: this tier is done
    reason: Reason = "converged"


def _next(st: _State, tier: Tier) -> _Step:
    s, passes = st.s, st.passes(tier)
    if not passes:                                   # every cell so far in doubt: try the next load up
        x = _out(st, _grid(s, s.first), +1)
        return _Step(0, _probe(st, x, "bracket")) if x not in st.doubted else _Step(0, None, "client")
    low, high = bracket(passes)
    blocked = [x for x in st.client_loads() if low is None or x > low]
    if high is None and blocked:                     # no clean fail: the client's loads bound the bracket above
        return _toward(st, tier, low, min(blocked))
    if high is None:
        top = max(passes)
        if top >= s.maximum:
            return _Step(0, None, "above_max")
        return _Step(0, _probe(st, _out(st, min(s.maximum, _grid(s, top * 2)), +1), "bracket"))
    if low is None:
        if high <= s.floor:
            return _Step(0, None, "below_min")
        return _Step(0, _probe(st, _out(st, max(s.floor, _grid(s, high / 2)), -1), "bracket"))
    reopen = _reopen(st, tier, high, passes)
    if reopen is not None:
        return reopen
    if not narrow(s, low, high):
        mid = _open_mid(st, low, high)
        return _Step(1, _probe(st, mid, "refine", tier)) if mid is not None else _settle(st, tier, low, high)
    return _settle(st, tier, low, high)


def _open_mid(st: _State, low: float, high: float) -> float | None:
    """The load halfway between low and high, or, where no clean cell could be measured there (the
    client's), halfway across either half, the upper first; None when the grid has none left."""
    blocked = st.client_loads()
    mid = between(st.s, low, high)
    if mid is None or mid not in blocked:
        return mid
    for a, b in ((mid, high), (low, mid)):
        inner = between(st.s, a, b)
        if inner is not None and inner not in blocked:
            return inner
    return None


def _toward(st: _State, tier: Tier, low: float | None, blocked: float) -> _Step:
    """Nothing failed cleanly, but at `blocked` no clean cell could be measured (the client's delays): bisect
    toward it from the highest pass; once that is as narrow as asked the answer is the client's to give."""
    if low is None or narrow(st.s, low, blocked):
        return _Step(0, None, "client")
    mid = _open_mid(st, low, blocked)
    return _Step(1, _probe(st, mid, "refine", tier)) if mid is not None else _Step(0, None, "client")


def _out(st: _State, x: float, way: int) -> float:
    """A bracket load: x, or past it while every cell at x was in doubt (the client's), within the limits."""
    s = st.s
    while x in st.doubted and x not in st.cells and s.floor < x < s.maximum:
        x = min(s.maximum, _grid(s, x * 2)) if way > 0 else max(s.floor, _grid(s, x / 2))
    return x


def _reopen(st: _State, tier: Tier, high: float, passes: dict[float, bool]) -> _Step | None:
    """A load that passed above the lowest that failed: one of the two is wrong, whatever a single cell's
    interval says. Replicate the fail below, then each pass above, until each rests on two cells or more and
    is sure, or their cells run out."""
    above = [x for x, ok in passes.items() if ok and x > high]
    if not above:
        return None
    for x, want in [(high, "fail"), *((x, "pass") for x in above)]:
        n = len(st.cells[x])
        if (n < 2 or st.sure(x, tier) != want) and n < MAX_CELLS_AT_LOAD:
            return _Step(1, _probe(st, x, "replicate", tier))
    return None


def _settle(st: _State, tier: Tier, low: float, high: float) -> _Step:
    """The point bracket is narrow: make its ends sure (replicates), or step out past an end that stays
    undecided, or keep replicating it (the budget is spent to decide); done when the sure ends are narrow."""
    s = st.s
    lo, hi = sure_ends(st, tier, low, high)
    if lo is not None and hi is not None and narrow(s, lo, hi):
        return _Step(2, None, "converged")
    ends = [(end, out) for end, ok, out in ((low, lo == low, -1), (high, hi == high, +1)) if not ok]
    for end, out in ends:
        if len(st.cells[end]) < MAX_CELLS_AT_LOAD:
            return _Step(2, _probe(st, end, "replicate", tier))
        if (lo if out < 0 else hi) is None:
            step = max(high - low, 1.0 if s.integer else 0.0) * 2
            x = max(s.floor, _grid(s, end + out * step)) if out < 0 else min(s.maximum, _grid(s, end + step))
            if x not in st.cells and x not in st.doubted and x != end:
                return _Step(2, _probe(st, x, "bracket"))
    if ends:
        end = min(ends, key=lambda e: len(st.cells[e[0]]))[0]
        return _Step(3, _probe(st, end, "replicate", tier), "undecided")
    return _Step(2, None, "undecided")


def sure_ends(st: _State, tier: Tier, low: float, high: float) -> tuple[float | None, float | None]:
    """The highest load at or below `low` that surely passed, and the lowest at or above `high` that surely
    failed (each None where none did)."""
    lo = max((x for x in st.cells if x <= low and st.sure(x, tier) == "pass"), default=None)
    hi = min((x for x in st.cells if x >= high and st.sure(x, tier) == "fail"), default=None)
    return lo, hi


def _probe(st: _State, x: float, role: Role, tier: Tier | None = None) -> Probe:
    """The next cell at x; near the boundary (a tier given) sized to that tier's limits' statistics."""
    need = max((REQUESTS_FOR.get(lim.stat, 0) for lim in tier.limits), default=0) if tier is not None else 0
    return Probe(x, role, st.used(x), requests=need or None)


# ---- the search ----

def search(s: Settings) -> Generator[Probe, CellSamples, SearchRecord]:
    st = _State(s)
    room = s.budget - (1 if s.sustains else 0)
    reasons: dict[str, Reason] = {}
    probe: Probe | None = Probe(_grid(s, s.first), "bracket", 0)
    while probe is not None and len(st.tried) < room:
        got = yield probe
        st.add(probe, got)
        probe = st.again(probe, got) or _step(st, reasons)
    answers = [answer(st, t, reasons.get(t.name, "budget")) for t in s.tiers]
    sustain = None
    first = answers[0].capacity
    if s.sustains and first is not None and len(st.tried) < s.budget:
        probe = Probe(first, "sustain", st.used(first), sustain_s(s, st.cells[first]))
        got = yield probe
        st.add(probe, got)
        sustain = _sustain(s, probe, got, st)
    return _record(st, answers, sustain)


def halted(s: Settings, seen: Sequence[tuple[Probe, CellSamples]], reason: Reason) -> SearchRecord:
    """The record of a search stopped from outside after the cells `seen` (tune: outranked, or out of time):
    the answers the search gives on those cells; a tier the search had finished keeps its own reason."""
    st = _State(s)
    for probe, got in seen:
        st.add(probe, got)
    if not st.cells:
        return _record(st, [Answer(tier=t.name, limits=t.limits, reason=reason) for t in s.tiers], None)
    done = {t.name: step.reason for t in s.tiers if (step := _next(st, t)).probe is None}
    return _record(st, [answer(st, t, done.get(t.name, reason)) for t in s.tiers], None)


def _record(st: _State, answers: list[Answer], sustain: Sustain | None) -> SearchRecord:
    s = st.s
    loads = [LoadVerdict(load=x, cells=len(st.cells.get(x, [])), verdicts=[judge(t, st.cells.get(x, [])) for t in s.tiers],
                         doubted=len(st.doubted.get(x, []))) for x in sorted({*st.cells, *st.doubted})]
    return SearchRecord(workload=s.workload, dimension=s.dimension, tiers=list(s.tiers), budget=s.budget,
                        precision=s.precision, tried=st.tried, loads=loads, answers=answers, sustain=sustain)


def _step(st: _State, reasons: dict[str, Reason]) -> Probe | None:
    """The next cell any tier needs (the most urgent first); `reasons` gets why each finished tier stopped."""
    steps = sorted(((_next(st, t), t.name) for t in st.s.tiers), key=lambda step: step[0].priority)
    reasons.clear()
    reasons.update({name: step.reason for step, name in steps if step.probe is None})
    return next((step.probe for step, _ in steps if step.probe is not None), None)


def answer(st: _State, tier: Tier, reason: Reason) -> Answer:
    passes = st.passes(tier)
    low, high = bracket(passes)
    lo, hi = sure_ends(st, tier, low if low is not None else -math.inf, high if high is not None else math.inf)
    bind = st.verdict(high, tier).verdicts[0].binding if high is not None else None
    room = st.verdict(low, tier).verdicts[0].binding if low is not None else None
    odd = [x for x, ok in passes.items() if ok and high is not None and x > high]
    shaky = [lo is not None and st.verdict(lo, tier).verdicts[0].unreliable,
             hi is not None and st.verdict(hi, tier).verdicts[0].unreliable]
    blocked = st.client_loads()
    if blocked and _between(blocked, low, high) and reason != "converged":
        reason = "client"
    return Answer(tier=tier.name, limits=tier.limits, capacity=low, fail_load=high, lo=lo, hi=hi, reason=reason,
                  binding=bind, headroom=room, nonmonotone=odd, lo_unreliable=shaky[0], hi_unreliable=shaky[1],
                  remeasured=sum(len(v) for v in st.doubted.values()), client_loads=blocked)


def _between(loads: list[float], low: float | None, high: float | None) -> bool:
    """Whether a load lies where the answer is open: between its passing and failing loads (or past either
    where that is missing)."""
    return any((low is None or x > low) and (high is None or x < high) for x in loads)


def sustain_s(s: Settings, cells: list[CellSamples]) -> float:
    """The sustain cell's length: as asked, else SUSTAIN_REQUESTS at the rate measured at the answer."""
    if s.sustain_s:
        return s.sustain_s
    rates = [c.request_rate for c in cells if c.request_rate]
    rate = sum(rates) / len(rates) if rates else 0.0
    want = SUSTAIN_REQUESTS / rate if rate else SUSTAIN_MIN_S
    return min(SUSTAIN_MAX_S, max(SUSTAIN_MIN_S, want))


def _sustain(s: Settings, probe: Probe, got: CellSamples, st: _State) -> Sustain:
    """The sustain cell, judged on its own and against the search's cells at the same load (the boundary it
    confirms)."""
    slices = got.slices
    own = [judge(t, [got]) for t in s.tiers]
    search = judge(s.tiers[0], st.cells[probe.load])
    return Sustain(key=got.key, repeat=got.repeat, load=probe.load, duration_s=probe.duration_s or 0.0,
                   status=got.status, verdicts=own, drift=drift(slices) if slices is not None else [],
                   steady=slices.steady if slices else None, apart=apart(own[0], search), doubt=got.doubt)


# ---- from the study spec, and back in words for the console ----

def settings(spec: StudySpec, workload: str) -> Settings:
    return Settings(dimension=spec.find_capacity or "concurrency", tiers=tuple(spec.capacity_tiers()),
                    start=spec.capacity_start, maximum=spec.capacity_max, precision=spec.capacity_precision,
                    budget=spec.capacity_budget, sustain_s=spec.sustain_s, workload=workload)
