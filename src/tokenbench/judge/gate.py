"""The regression gate's judgement: a baseline's runs against a candidate's, per cell (matched as `compare`
matches them: lengths and load, judge/load_axes.py) and figure. Each side's runs are observations of one
random-effects model (metrics/noise.py): the between-run noise is learned from the sides' repeated runs
(the baseline needs two at least), else taken from the noise floor (judge/floors.py). The test of no change
runs for every figure of every cell; Holm's step-down holds the false-alarm rate over the whole gate at the
alpha of this look (all of --alpha for one look; its spent share in a sequential gate); equivalence within
--min-effect says "no change". docs/metrics.md, "Between-run noise and the gate"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from tokenbench.judge.cells import figure_state_of, label_of, load_of, pair_of, state_of
from tokenbench.judge.comparable import Refusal, SideFacts, facts_of, fingerprints_differ, refusals
from tokenbench.judge.fairness import paired
from tokenbench.judge.floors import fingerprint, observed
from tokenbench.judge.intervals import Book, Floor
from tokenbench.judge.load_axes import LoadKey
from tokenbench.judge.status import usable
from tokenbench.judge.views import RunData
from tokenbench.metrics import noise
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.cell_summary import Metric
from tokenbench.store.rows import CellRow

GATE_METRICS: tuple[Metric, ...] = (
    Metric("output_throughput"), Metric("request_throughput"),
    *(Metric(n, s) for n in ("ttft", "tpot", "itl", "e2el") for s in ("mean", "p50", "p99")))
POWER = 0.8

Decision = Literal["regressed", "improved", "no change", "inconclusive", "refused"]
Why = Literal["cache", "host", "not_ok", "moved", "no_data"]
Outcome = Literal["pass", "regressed", "refused", "inconclusive"]


@dataclass(frozen=True)
class GateRun:
    """One run on one side of the gate: the stored run, the config of it judged, its intervals."""

    run: RunData
    config: str
    book: Book

    @classmethod
    def of(cls, run: RunData, config: str) -> GateRun:
        return cls(run, config, Book(run))

    def cell(self, pair: tuple[int, int], load: LoadKey) -> CellRow | None:
        return self.run.cell_at(self.config, pair, load)


@dataclass(frozen=True)
class Policy:
    """How the gate decides: the false-alarm rate over the gate, the smallest change that counts, the
    power its detectable effect is stated at, whether figures the client's delays moved are judged, and
    which figures."""

    alpha: float = 0.05
    min_effect: float = u.MIN_EFFECT
    power: float = POWER
    allow_client_lag: bool = False
    metrics: tuple[Metric, ...] = GATE_METRICS


@dataclass(frozen=True)
class Look:
    """A look of a sequential gate: its number and the information fractions (runs so far over the most the
    gate may run) before it and at it. One look: (1, 0, 1), all of alpha."""

    number: int = 1
    before: float = 0.0
    now: float = 1.0

    def alpha(self, total: float) -> float:
        return noise.look_alpha(total, self.before, self.now)


@dataclass(frozen=True)
class FigureResult:
    """One figure of one cell: its verdict, each side's figure per run, and the numbers it rests on."""

    cell: str
    pair: tuple[int, int]
    load: LoadKey
    metric: Metric
    decision: Decision
    base: tuple[float, ...] = ()
    cand: tuple[float, ...] = ()
    why: Why | None = None                 # a refused verdict's reason
    refusal: Refusal | None = None         # with its values, for a fact that differs
    change: float | None = None            # candidate / baseline - 1 (the figure's own terms)
    lo: float | None = None                # its interval at the level the verdict used
    hi: float | None = None
    p: float | None = None                 # two-sided p of no change, and Holm's adjusted p
    p_holm: float | None = None
    detectable: float | None = None        # the smallest change this gate could see (at Policy.power)
    noise: noise.Noise | None = None
    look: int = 1                          # the look it was decided at

    @property
    def key(self) -> tuple[tuple[int, int], LoadKey, str]:
        return (self.pair, self.load, self.metric.key)

    @property
    def decided(self) -> bool:
        return self.decision in ("regressed", "improved", "no change")


@dataclass(frozen=True)
class GateResult:
    figures: list[FigureResult]
    policy: Policy
    look: Look
    alpha_look: float                      # the alpha this look tested at (Holm over its figures)
    base_runs: tuple[str, ...]
    cand_runs: tuple[str, ...]
    fingerprints_differ: bool = False
    cells: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> Outcome:
        verdicts = {f.decision for f in self.figures}
        if "regressed" in verdicts:
            return "regressed"
        if "refused" in verdicts:
            return "refused"
        return "inconclusive" if "inconclusive" in verdicts or not self.figures else "pass"

    def count(self, decision: Decision) -> int:
        return sum(f.decision == decision for f in self.figures)

    def undecided(self) -> list[FigureResult]:
        return [f for f in self.figures if f.decision == "inconclusive"]


# one figure ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Item:
    """A figure ready to test: each side's runs, the noise and the shift; or its refusal."""

    result: FigureResult
    base: list[noise.RunFigure]
    cand: list[noise.RunFigure]
    shift: noise.Shift | None = None


def _side(runs: Sequence[GateRun], pair, load, metric: Metric, policy: Policy) -> tuple[list, Why | None]:
    """The side's observations of a figure, or why it is not judged: a run's cell is not ok (a failure is
    never averaged away), or the client's delays moved the figure in a run."""
    cells = [(r, c) for r in runs if (c := r.cell(pair, load)) is not None]
    if not cells:
        return [], "no_data"
    if not all(state_of(c).ok for _, c in cells):
        return [], "not_ok"
    if not all(usable(figure_state_of(c, metric.key), policy.allow_client_lag) for _, c in cells):
        return [], "moved"
    found = [f for r, c in cells if (f := observed(r.run, c, metric, r.book)) is not None]
    return found, None if found else "no_data"


def _noise(obs: tuple[list, list], at: tuple[GateRun, CellRow, Metric], ids: set[str], floor: Floor) -> noise.Noise:
    """From the sides' repeats when the baseline has two runs or more, else the floor of the baseline's run
    (its engine build, host and cell), learned from runs other than the gate's own (`ids`)."""
    b, c = obs
    learned = noise.spread([b, c]) if len(b) >= 2 else None
    if learned is not None:
        return learned
    member, cell, metric = at
    return floor(member.run, cell, metric, ids)


def _facts(runs: Sequence[GateRun], pair, load) -> list[SideFacts]:
    out = []
    for r in runs:
        c = r.cell(pair, load)
        if c is not None:
            out.append(facts_of(r.run, c, fingerprint(r.run.config(r.config))))
    return out


def _item(sides: tuple[Sequence[GateRun], Sequence[GateRun]], pair, load, metric: Metric, policy: Policy,
          floor: Floor) -> _Item:
    base, cand = sides
    first = next(cell for r in (*base, *cand) if (cell := r.cell(pair, load)) is not None)
    head = FigureResult(label_of(first), pair, load, metric, "refused")
    refused = refusals(_facts(base, pair, load), _facts(cand, pair, load))
    if refused:
        return _Item(replace(head, why=refused[0].reason, refusal=refused[0]), [], [])
    (b, why_b), (c, why_c) = (_side(s, pair, load, metric, policy) for s in (base, cand))
    head = replace(head, base=tuple(f.value for f in b), cand=tuple(f.value for f in c))
    if why_b or why_c:
        return _Item(replace(head, why=why_b or why_c), b, c)
    owner = next(r for r in base if r.cell(pair, load) is not None)
    n = _noise((b, c), (owner, owner.cell(pair, load) or first, metric), {r.run.id for r in (*base, *cand)}, floor)
    s = noise.shift(b, c, n)
    return _Item(replace(head, decision="inconclusive", change=s.change, p=s.p_value(), noise=n), b, c, s)


# the gate -----------------------------------------------------------------------------------------
def common(base: Sequence[GateRun], cand: Sequence[GateRun]) -> list[tuple[tuple[int, int], LoadKey]]:
    """The (pair, load) cells both sides measured (in any of their runs), of the same load shape."""
    def keys(runs: Sequence[GateRun]) -> set[tuple[tuple[int, int], LoadKey]]:
        return {(pair_of(c), load_of(c)) for r in runs for c in r.run.cells_of(r.config)}
    both = sorted(keys(base) & keys(cand))
    return [(p, x) for p, x in both
            if paired([next(c for r in side if (c := r.cell(p, x)) is not None) for side in (base, cand)])]


@dataclass(frozen=True)
class _Level:
    """The level a look decides at: its alpha, the figures Holm runs over, the look's number."""

    alpha: float
    m: int
    look: int


def _decide(head: FigureResult, s: noise.Shift, holm: tuple[bool, float], level: _Level, policy: Policy
            ) -> FigureResult:
    """The verdict (noise.decide), with the interval and detectable change at Holm's strictest level
    alpha / m (Bonferroni's)."""
    rejected, p_holm = holm
    decided = noise.decide(s, head.metric.higher_is_better, rejected, level.alpha, policy.min_effect)
    lo, hi = s.interval(level.alpha / level.m)
    return replace(head, decision=decided, lo=lo, hi=hi, p_holm=p_holm,
                   detectable=s.detectable(level.alpha / level.m, policy.power), look=level.look)


def judge(sides: tuple[Sequence[GateRun], Sequence[GateRun]], policy: Policy, floor: Floor,
          look: Look = Look(), earlier: Sequence[FigureResult] = ()) -> GateResult:
    """Every figure of every common cell: refused (with its reason), or tested, Holm over the tested ones at
    this look's alpha; a figure decided at an earlier look keeps that decision."""
    base, cand = sides
    kept = {f.key: f for f in earlier if f.decided}
    cells = common(base, cand)
    items = [_item(sides, p, x, m, policy, floor) for p, x in cells for m in policy.metrics
             if (p, x, m.key) not in kept]
    tested = [(i, i.shift) for i in items if i.shift is not None]
    level = _Level(look.alpha(policy.alpha), len(tested), look.number)
    p_values = [i.result.p or 0.0 for i, _ in tested]
    holm = zip(noise.holm(p_values, level.alpha), noise.holm_adjusted(p_values), strict=True)
    judged = {id(i): _decide(i.result, s, h, level, policy) for (i, s), h in zip(tested, holm, strict=True)}
    figures = [*kept.values(), *(judged.get(id(i), i.result) for i in items)]
    differ = any(fingerprints_differ(_facts(base, p, x), _facts(cand, p, x)) for p, x in cells)
    return GateResult(_ordered(figures, policy), policy, look, level.alpha, tuple(r.run.id for r in base),
                      tuple(r.run.id for r in cand), differ,
                      [label_of(c) for p, x in cells if (c := _first(base, p, x)) is not None])


def _first(runs: Sequence[GateRun], pair, load) -> CellRow | None:
    return next((c for r in runs if (c := r.cell(pair, load)) is not None), None)


def _ordered(figures: list[FigureResult], policy: Policy) -> list[FigureResult]:
    rank = {m.key: i for i, m in enumerate(policy.metrics)}
    return sorted(figures, key=lambda f: (f.pair, f.load, rank.get(f.metric.key, len(rank))))


# the JSON form --------------------------------------------------------------------------------------
def figure_dict(f: FigureResult) -> dict:
    return {"cell": f.cell, "input_len": f.pair[0], "output_len": f.pair[1], "load": f.load.label,
            "figure": f.metric.key, "metric": f.metric.name, "stat": f.metric.stat,
            "higher_is_better": f.metric.higher_is_better, "decision": f.decision, "why": f.why,
            "refusal": None if f.refusal is None else {"reason": f.refusal.reason, "baseline": list(f.refusal.values[0]),
                                                       "candidate": list(f.refusal.values[1])},
            "baseline": list(f.base), "candidate": list(f.cand), "change": f.change, "lo": f.lo, "hi": f.hi,
            "p": f.p, "p_holm": f.p_holm, "detectable": f.detectable, "look": f.look,
            "noise": None if f.noise is None else {"tau": f.noise.tau, "df": f.noise.df, "source": f.noise.source,
                                                   "runs": f.noise.runs}}


def result_dict(r: GateResult) -> dict:
    """The gate's JSON: its outcome, how it decided (the false-alarm rate over the gate, how it was split
    over figures and looks), the runs of each side and every figure."""
    p = r.policy
    return {"outcome": r.outcome, "alpha": p.alpha, "alpha_this_look": r.alpha_look, "look": r.look.number,
            "information_fraction": r.look.now, "min_effect": p.min_effect, "power": p.power,
            "multiplicity": "holm over every judged figure x cell of the look",
            "sequential": "alpha spending, Lan-DeMets O'Brien-Fleming type, union bound over looks",
            "equivalence": "two one-sided tests at the look's alpha, margin min_effect on the ratio",
            "baseline": list(r.base_runs), "candidate": list(r.cand_runs),
            "fingerprints_differ": r.fingerprints_differ, "cells": r.cells,
            "counts": {v: r.count(v) for v in ("regressed", "improved", "no change", "inconclusive", "refused")},
            "figures": [figure_dict(f) for f in r.figures]}
