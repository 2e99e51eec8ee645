"""`--find-capacity`: per (workload, server config), the highest load that meets each SLO tier, with the
boundary's 95 % interval, the binding SLO and a sustain cell that confirms it (docs/metrics.md,
"Capacity search").

A generator that receives results (STYLE.md, practice 8): it yields a `Probe` (a load, the cell's role
and its replicate index) and is sent that cell's samples (metrics/capacity.CellSamples); it returns the
search's record. The runner (study/runner.StudyRunner) runs each probe as a cell on the one run path, or
finds it stored (a resume replays the stored cells through the same generator). Every tier is judged on
every cell, so several tiers are answered from one set of cells:

1. bracket: from the start load, double while some tier still passes everywhere tried, halve while some
   tier fails everywhere tried (bounded by capacity_max, and by 1 stream or start/64 requests/s);
2. refine: bisect between a tier's highest passing load and its lowest failing one until they are
   closer than the precision (closed loop: whole streams; rates rounded to 3 significant digits);
3. replicate: run more cells at those two loads (fresh prompts and arrivals, samples pooled) until the
   highest one that surely passes and the lowest one that surely fails are that close; a load still
   undecided after MAX_CELLS_AT_LOAD cells gives way to one a gap further out;
4. stop at convergence, or when the budget (less the sustain cell) is spent; then the sustain cell at
   the first tier's answer.
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
    judge,
)
from tokenbench.metrics.timeslices import drift
from tokenbench.spec.slo import Tier
from tokenbench.spec.study import StudySpec

MAX_CELLS_AT_LOAD = 4         # replicates at one load before the search steps a gap further out
RATE_FLOOR_SHARE = 1 / 64     # a rate search goes down to start / 64 requests/s
SUSTAIN_REQUESTS = 200        # the default sustain cell: this many requests at the rate measured at the answer
                              # (each half's p99 rests on 100, the floor below which a p99 is marked unreliable),
SUSTAIN_MIN_S, SUSTAIN_MAX_S = 60.0, 1800.0     # ... within these bounds (at least 6 timeslices of 10 s)


@dataclass(frozen=True)
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
        return self.dimension != "rate"

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
    repeat: int                          # cells already run at this load: 0 for the first
    duration_s: float | None = None      # the sustain cell's length


@dataclass
class _State:
    s: Settings
    cells: dict[float, list[CellSamples]] = field(default_factory=dict)
    tried: list[Tried] = field(default_factory=list)

    def add(self, probe: Probe, got: CellSamples) -> None:
        if probe.role != "sustain":
            self.cells.setdefault(probe.load, []).append(got)
        self.tried.append(Tried(key=got.key, repeat=got.repeat, role=probe.role, load=probe.load,
                                status=got.status, verdicts=[judge(t, [got]) for t in self.s.tiers]))

    def verdict(self, x: float, tier: Tier) -> LoadVerdict:
        return LoadVerdict(load=x, cells=len(self.cells[x]), verdicts=[judge(tier, self.cells[x])])

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
    low, high = bracket(passes)
    if high is None:
        top = max(passes)
        if top >= s.maximum:
            return _Step(0, None, "above_max")
        return _Step(0, _probe(st, min(s.maximum, _grid(s, top * 2)), "bracket"))
    if low is None:
        if high <= s.floor:
            return _Step(0, None, "below_min")
        return _Step(0, _probe(st, max(s.floor, _grid(s, high / 2)), "bracket"))
    if not narrow(s, low, high):
        mid = between(s, low, high)
        return _Step(1, _probe(st, mid, "refine")) if mid is not None else _settle(st, tier, low, high)
    return _settle(st, tier, low, high)


def _settle(st: _State, tier: Tier, low: float, high: float) -> _Step:
    """The point bracket is narrow: make its ends sure (replicates), or step out past an end that stays
    undecided; done when the sure ends are narrow, or when no cell can tell more."""
    s = st.s
    lo, hi = sure_ends(st, tier, low, high)
    if lo is not None and hi is not None and narrow(s, lo, hi):
        return _Step(2, None, "converged")
    for end, ok, out in ((low, lo == low, -1), (high, hi == high, +1)):
        if ok:
            continue
        if len(st.cells[end]) < MAX_CELLS_AT_LOAD:
            return _Step(2, _probe(st, end, "replicate"))
        if (lo if out < 0 else hi) is None:
            step = max(high - low, 1.0 if s.integer else 0.0) * 2
            x = max(s.floor, _grid(s, end + out * step)) if out < 0 else min(s.maximum, _grid(s, end + step))
            if x not in st.cells and x != end:
                return _Step(2, _probe(st, x, "bracket"))
    return _Step(2, None, "undecided")


def sure_ends(st: _State, tier: Tier, low: float, high: float) -> tuple[float | None, float | None]:
    """The highest load at or below `low` that surely passed, and the lowest at or above `high` that surely
    failed (each None where none did)."""
    lo = max((x for x in st.cells if x <= low and st.sure(x, tier) == "pass"), default=None)
    hi = min((x for x in st.cells if x >= high and st.sure(x, tier) == "fail"), default=None)
    return lo, hi


def _probe(st: _State, x: float, role: Role) -> Probe:
    return Probe(x, role, len(st.cells.get(x, [])))


# ---- the search ----

def search(s: Settings) -> Generator[Probe, CellSamples, SearchRecord]:
    st = _State(s)
    room = s.budget - (1 if s.sustains else 0)
    reasons: dict[str, Reason] = {}
    probe: Probe | None = Probe(_grid(s, s.first), "bracket", 0)
    while probe is not None and len(st.tried) < room:
        st.add(probe, (yield probe))
        steps = sorted(((_next(st, t), t.name) for t in s.tiers), key=lambda step: step[0].priority)
        reasons = {name: step.reason for step, name in steps if step.probe is None}
        probe = next((step.probe for step, _ in steps if step.probe is not None), None)
    answers = [answer(st, t, reasons.get(t.name, "budget")) for t in s.tiers]
    sustain = None
    first = answers[0].capacity
    if s.sustains and first is not None and len(st.tried) < s.budget:
        probe = Probe(first, "sustain", len(st.cells[first]), sustain_s(s, st.cells[first]))
        got = yield probe
        st.add(probe, got)
        sustain = _sustain(s, probe, got)
    return _record(st, answers, sustain)


def halted(s: Settings, seen: Sequence[tuple[Probe, CellSamples]], reason: Reason) -> SearchRecord:
    """The record of a search stopped from outside after the cells `seen` (tune: outranked, or out of time):
    the answers the search gives on those cells; a tier the search had finished keeps its own reason."""
    st = _State(s)
    for probe, got in seen:
        st.add(probe, got)
    if not st.cells:
        return SearchRecord(workload=s.workload, dimension=s.dimension, tiers=list(s.tiers), budget=s.budget,
                            precision=s.precision, tried=st.tried,
                            answers=[Answer(tier=t.name, limits=t.limits, reason=reason) for t in s.tiers])
    done = {t.name: step.reason for t in s.tiers if (step := _next(st, t)).probe is None}
    return _record(st, [answer(st, t, done.get(t.name, reason)) for t in s.tiers], None)


def _record(st: _State, answers: list[Answer], sustain: Sustain | None) -> SearchRecord:
    s = st.s
    loads = [LoadVerdict(load=x, cells=len(c), verdicts=[judge(t, c) for t in s.tiers])
             for x, c in sorted(st.cells.items())]
    return SearchRecord(workload=s.workload, dimension=s.dimension, tiers=list(s.tiers), budget=s.budget,
                        precision=s.precision, tried=st.tried, loads=loads, answers=answers, sustain=sustain)


def answer(st: _State, tier: Tier, reason: Reason) -> Answer:
    passes = st.passes(tier)
    low, high = bracket(passes)
    lo, hi = sure_ends(st, tier, low if low is not None else -math.inf, high if high is not None else math.inf)
    bind = st.verdict(high, tier).verdicts[0].binding if high is not None else None
    room = st.verdict(low, tier).verdicts[0].binding if low is not None else None
    odd = [x for x, ok in passes.items() if ok and high is not None and x > high]
    shaky = [lo is not None and st.verdict(lo, tier).verdicts[0].unreliable,
             hi is not None and st.verdict(hi, tier).verdicts[0].unreliable]
    return Answer(tier=tier.name, limits=tier.limits, capacity=low, fail_load=high, lo=lo, hi=hi, reason=reason,
                  binding=bind, headroom=room, nonmonotone=odd, lo_unreliable=shaky[0], hi_unreliable=shaky[1])


def sustain_s(s: Settings, cells: list[CellSamples]) -> float:
    """The sustain cell's length: as asked, else SUSTAIN_REQUESTS at the rate measured at the answer."""
    if s.sustain_s:
        return s.sustain_s
    rates = [c.request_rate for c in cells if c.request_rate]
    rate = sum(rates) / len(rates) if rates else 0.0
    want = SUSTAIN_REQUESTS / rate if rate else SUSTAIN_MIN_S
    return min(SUSTAIN_MAX_S, max(SUSTAIN_MIN_S, want))


def _sustain(s: Settings, probe: Probe, got: CellSamples) -> Sustain:
    slices = got.slices
    return Sustain(key=got.key, repeat=got.repeat, load=probe.load, duration_s=probe.duration_s or 0.0,
                   status=got.status, verdicts=[judge(t, [got]) for t in s.tiers],
                   drift=drift(slices) if slices is not None else [], steady=slices.steady if slices else None)


# ---- from the study spec, and back in words for the console ----

def settings(spec: StudySpec, workload: str) -> Settings:
    return Settings(spec.find_capacity or "concurrency", tuple(spec.capacity_tiers()), spec.capacity_start,
                    spec.capacity_max, spec.capacity_precision, spec.capacity_budget, spec.sustain_s, workload)


STOPPED = ("outranked", "time", "budget")    # a search stopped before any load met the tier: only below its fail
UNRELIABLE = "◊"       # an end of the interval that is not a 95 % bound (metrics/capacity.Check.unreliable)
UNITS = {"concurrency": "streams", "rate": "requests/s", "users": "users"}
REASONS = {"converged": "converged", "budget": "cell budget spent", "above_max": "every load up to the limit met it",
           "below_min": "the lowest load tried missed it", "undecided": "the loads next to the boundary stayed "
           "undecided", "outranked": "stopped early: its boundary cannot reach the best config's",
           "time": "time budget spent"}


def load_text(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def _answer_line(r: SearchRecord, a: Answer) -> str:
    head = f"capacity {r.workload} (tier {a.tier}: {', '.join(lim.text for lim in a.limits)}): "
    unit = UNITS[r.dimension]
    if a.capacity is None and a.reason in STOPPED and a.fail_load is not None:
        return head + f"below {load_text(a.fail_load)} {unit} ({REASONS[a.reason]})"
    if a.capacity is None:
        return head + f"none ({REASONS[a.reason]}: {load_text(a.fail_load)} {unit})"
    interval = (f"boundary in [{load_text(a.lo)}{UNRELIABLE * a.lo_unreliable}, "
                f"{load_text(a.hi)}{UNRELIABLE * a.hi_unreliable}] (95 %)")
    text = head + f"{load_text(a.capacity)} {unit}, {interval}, {REASONS[a.reason]}"
    b = a.binding
    if b is not None and b.value is not None:
        text += f"; binding {b.limit.text} at {load_text(a.fail_load)}: {b.value:.4g} ({b.margin:+.1%})"
    return text


def _sustain_line(r: SearchRecord, x: Sustain) -> str:
    moved = [f"{d.figure} {d.change:+.1%}" for d in x.drift if d.drifted]
    drifted = f"drifted ({', '.join(moved)})" if moved else "no drift"
    verdict = "holds" if x.holds else "does not hold"
    return (f"sustain {r.workload} at {load_text(x.load)} {UNITS[r.dimension]} for {x.duration_s:.0f} s: "
            f"{verdict} ({x.status}; {drifted})")


def describe(r: SearchRecord) -> list[str]:
    """The console's lines: one per tier, then the sustain cell's, and what ◊ means when it is shown."""
    out = [_answer_line(r, a) for a in r.answers]
    if any(a.lo_unreliable or a.hi_unreliable for a in r.answers):
        out.append(f"{UNRELIABLE} that end rests on a percentile from too few requests to be a 95 % bound (a p99 "
                   "needs 299 at that load: --num-prompts, --duration)")
    return out + ([_sustain_line(r, r.sustain)] if r.sustain is not None else [])
