"""The regression gate's judgement: a baseline's runs against a candidate's, per cell (matched as `compare`
matches them: lengths and load, judge/load_axes.py) and figure. Each side's runs are observations of one
random-effects model (metrics/noise.py) whose unit is a server launch (runs of one launch count once): the
between-run noise is learned from the sides' repeated launches (the baseline needs two at least), else taken
from the noise floor (judge/floors.py). The test of no change runs for every figure of every cell; Holm's
step-down holds the false-alarm rate over the whole gate at the alpha of this look (all of --alpha for one
look; its spent share in a sequential gate); equivalence within --min-effect says "no change". A verdict the
sides' facts cannot support is refused by the rule `compare` applies (judge/fingerprint.refusals: the
prefix-cache states differ, or a busier host could explain the worse side). docs/metrics.md, "Between-run noise
and the gate"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from tokenbench.judge import fingerprint as fp
from tokenbench.judge.cells import figure_state_of, label_of, load_of, pair_of, state_of
from tokenbench.judge.fairness import paired
from tokenbench.judge.floors import observed
from tokenbench.judge.intervals import FIGURES, Book, Floor
from tokenbench.judge.load_axes import LoadKey
from tokenbench.judge.status import usable
from tokenbench.judge.views import RunData
from tokenbench.metrics import noise
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.cell_summary import Metric
from tokenbench.store.rows import CellRow

# what a gate judges unless told (--figures): the figures of the one catalogue (judge/intervals.FIGURES) every
# request-level run has; goodput (an SLO's) and the job figures (an agents run's) by --figures
GATE_METRICS: tuple[Metric, ...] = tuple(m for m in FIGURES if m.name != "request_goodput"
                                         and not m.name.startswith("job"))
POWER = 0.8

Decision = Literal["regressed", "improved", "no change", "inconclusive", "refused"]
Unjudged = Literal["not_ok", "moved", "no_data"]      # a figure not judged: a run's cell not ok, moved, missing
Why = Unjudged | fp.ReasonCode                       # or the refusing reason's code (judge/fingerprint.py)
Outcome = Literal["pass", "regressed", "refused", "inconclusive"]
# the facts the gate states where the sides differ: another engine build is what it compares, the host and
# tokenbench's version are said beside it (the launches differ by design: the noise model holds them; the
# prefix-cache states refuse a verdict instead)
GATE_FACTS: tuple[fp.Fact, ...] = (*fp.BUILD, "tool", *fp.HOST)


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
    """A look of a sequential gate: the information fraction of every look so far (launches so far over the
    most the gate may measure), this one last. One look: (1.0,), all of alpha."""

    fractions: tuple[float, ...] = (1.0,)

    @property
    def number(self) -> int:
        return len(self.fractions)

    @property
    def now(self) -> float:
        return self.fractions[-1]

    def then(self, fraction: float) -> Look:
        return Look((*self.fractions, fraction))

    def level(self, alpha: float) -> float:
        """The two-sided nominal level a test is held to at this look for `alpha` over every look
        (noise.nominal_level: group-sequential boundaries of the spending function; one look: alpha)."""
        return noise.nominal_level(alpha, self.fractions)


@dataclass(frozen=True, kw_only=True)
class FigureResult:
    """One figure of one cell: its verdict, each side's figure per run, and the numbers it rests on."""

    cell: str
    pair: tuple[int, int]
    load: LoadKey
    metric: Metric
    decision: Decision
    base: tuple[float, ...] = ()
    cand: tuple[float, ...] = ()
    units: tuple[int, int] = (0, 0)        # each side's units: its launches (runs of one launch count once)
    left_out: tuple[int, int] = (0, 0)     # each side's runs left out: the client's delays moved the figure there
    why: Why | None = None                 # a refused verdict's reason
    reasons: tuple[fp.Reason, ...] = ()    # what the rule found (judge/fingerprint.refusals): refusing or said
    change: float | None = None            # candidate / baseline - 1 (the figure's own terms)
    lo: float | None = None                # its interval at the level the verdict used
    hi: float | None = None
    p: float | None = None                 # two-sided p of no change, and Holm's adjusted p among this look's
    p_holm: float | None = None            # (its decision also needs the look's boundary: Look.level)
    rejected: bool = False                 # the test of no change rejected it (Holm, at the look's boundary)
    detectable: float | None = None        # the smallest change this gate could see (at Policy.power)
    noise: noise.Noise | None = None
    look: int = 1                          # the look it was decided at

    @property
    def key(self) -> tuple[tuple[int, int], LoadKey, str]:
        return (self.pair, self.load, self.metric.key)

    @property
    def decided(self) -> bool:
        """Kept at later looks: regressed, improved or no change, or rejected then refused."""
        return self.rejected or self.decision in ("regressed", "improved", "no change")

    @property
    def host_unchecked(self) -> bool:
        """The host could not be checked for it (a side recorded no CPU shares): said, not refused."""
        return any(r.code == "host_unknown" for r in self.reasons)


@dataclass(frozen=True, kw_only=True)
class GateResult:
    figures: list[FigureResult]
    policy: Policy
    look: Look
    alpha_look: float                      # the alpha this look tested at (Holm over its figures)
    base_runs: tuple[str, ...]
    cand_runs: tuple[str, ...]
    prints: tuple[fp.Fingerprint, fp.Fingerprint] | None = None    # each side's (fp.side_print)
    cells: list[str] = field(default_factory=list)

    @property
    def differences(self) -> list[fp.FactDiff]:
        """The facts (GATE_FACTS) whose values differ between the sides."""
        return [] if self.prints is None else fp.differences(*self.prints, GATE_FACTS)

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
    """A figure ready to test: each side's units (launches), the noise and the shift; or why it is not, and the
    summaries of the sides' cells the refusal rule reads."""

    result: FigureResult
    facts: tuple[list, list]
    shift: noise.Shift | None = None


def _cells(runs: Sequence[GateRun], pair, load) -> list[tuple[GateRun, CellRow]]:
    return [(r, c) for r in runs if (c := r.cell(pair, load)) is not None]


@dataclass(frozen=True)
class _Observed:
    """A side's observations of a figure, how many runs were left out (the client's delays moved the figure
    there), or why it is not judged."""

    runs: list[noise.RunFigure]
    left_out: int = 0
    why: Unjudged | None = None


def _side(cells: list[tuple[GateRun, CellRow]], metric: Metric, policy: Policy) -> _Observed:
    """The side's observations of a figure: not judged where a run's cell is not ok (a failure of the server
    is never averaged away); a run whose figure the client's own delays moved beyond its tolerance (marked
    `~`) is left out of it, a measurement that failed and not the server (unless --allow-client-lag), and the
    figure is not judged only where the client's delays moved it in every run of the side."""
    if not cells:
        return _Observed([], why="no_data")
    if not all(state_of(c).ok for _, c in cells):
        return _Observed([], why="not_ok")
    clean = [(r, c) for r, c in cells if usable(figure_state_of(c, metric.key), policy.allow_client_lag)]
    if not clean:
        return _Observed([], len(cells), "moved")
    found = [f for r, c in clean if (f := observed(r.run, c, metric, r.book)) is not None]
    return _Observed(found, len(cells) - len(clean), None if found else "no_data")


def _noise(units: tuple[list, list], at: tuple[GateRun, CellRow, Metric], ids: set[str], floor: Floor) -> noise.Noise:
    """From the sides' repeated launches when the baseline has two or more, else the floor of the baseline's run
    (its engine build, host and cell), learned from runs other than the gate's own (`ids`)."""
    b, c = units
    learned = noise.spread([b, c]) if len(b) >= 2 else None
    if learned is not None:
        return learned
    member, cell, metric = at
    return floor(member.run, cell, metric, ids)


def _item(sides: tuple[Sequence[GateRun], Sequence[GateRun]], pair, load, metric: Metric, policy: Policy,
          floor: Floor) -> _Item:
    base, cand = (_cells(s, pair, load) for s in sides)
    facts = (fp.summaries([c for _, c in base]), fp.summaries([c for _, c in cand]))
    head = FigureResult(cell=label_of((base or cand)[0][1]), pair=pair, load=load, metric=metric, decision="refused")
    cache = fp.cache_reason(*facts)          # whichever side is worse: refused before any test
    if cache is not None and cache.refuses:
        return _Item(replace(head, why=cache.code, reasons=(cache,)), facts)
    ob, oc = _side(base, metric, policy), _side(cand, metric, policy)
    b, c = ob.runs, oc.runs
    head = replace(head, base=tuple(f.value for f in b), cand=tuple(f.value for f in c),
                   left_out=(ob.left_out, oc.left_out))
    if ob.why or oc.why:
        return _Item(replace(head, why=ob.why or oc.why), facts)
    ub, uc = noise.units(b, c)
    owner, cell = base[0]
    n = _noise((ub, uc), (owner, cell, metric), {r.run.id for r in (*sides[0], *sides[1])}, floor)
    s = noise.shift(ub, uc, n)
    return _Item(replace(head, decision="inconclusive", units=(len(ub), len(uc)), change=s.change, p=s.p_value(),
                         noise=n), facts, s)


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
    """What a look decides at: the look, the gate's alpha, and how many figures of the gate's family (every
    figure ever tested) were not rejected before this look's first step of Holm."""

    look: Look
    alpha: float
    left: int

    def step(self, i: int) -> float:
        """The nominal level of Holm's i-th step (0: the smallest p): the look's boundary for alpha / (left - i)
        (Maurer and Bretz: Holm's weights, each figure's sequence of looks its own group-sequential test)."""
        return self.look.level(self.alpha / max(1, self.left - i))

    def equivalence(self) -> float:
        """The one-sided level of the two one-sided tests of no change: the look's boundary for 2 alpha, halved
        (one look: alpha, the 1 - 2 alpha interval inside the smallest effect)."""
        return self.look.level(min(2 * self.alpha, 1.0)) / 2


def _decide(item: _Item, s: noise.Shift, holm: tuple[bool, float], level: _Level, policy: Policy) -> FigureResult:
    """The verdict (noise.decide: equivalence by two one-sided tests at the look's one-sided boundary for
    alpha), with the interval and detectable change at Holm's strictest level this look (Bonferroni's,
    alpha / left); refused where the refusal rule finds a busier host could explain the worse side (the
    candidate for a regression, the baseline for an improvement; either for no change or none found)."""
    rejected, p_holm = holm
    head = item.result
    strictest = level.step(0)
    decided = noise.decide(s, head.metric.higher_is_better, rejected, level.equivalence(), policy.min_effect)
    lo, hi = s.interval(strictest)
    worse: fp.Side | None = {"regressed": "b", "improved": "a"}.get(decided)  # type: ignore[assignment]
    reasons = fp.refusals(*item.facts, worse)
    refusing = next((r for r in reasons if r.refuses), None)
    return replace(head, decision="refused" if refusing else decided, why=refusing.code if refusing else None,
                   reasons=reasons, lo=lo, hi=hi, p_holm=p_holm, rejected=rejected,
                   detectable=s.detectable(strictest, policy.power), look=level.look.number)


def judge(sides: tuple[Sequence[GateRun], Sequence[GateRun]], policy: Policy, floor: Floor,
          look: Look = Look(), earlier: Sequence[FigureResult] = ()) -> GateResult:
    """Every figure of every common cell: refused (with its reason), or tested, Holm's step-down over the gate's
    family at this look's boundaries (`_Level`); a figure decided at an earlier look keeps that decision."""
    base, cand = sides
    kept = {f.key: f for f in earlier if f.decided}
    cells = common(base, cand)
    items = [_item(sides, p, x, m, policy, floor) for p, x in cells for m in policy.metrics
             if (p, x, m.key) not in kept]
    tested = [(i, i.shift) for i in items if i.shift is not None]
    family = {i.result.key for i, _ in tested} | {f.key for f in earlier if f.p is not None}
    level = _Level(look, policy.alpha, len(family) - sum(f.rejected for f in earlier))
    p_values = [i.result.p or 0.0 for i, _ in tested]
    holm = zip(noise.step_down(p_values, [level.step(k) for k in range(len(p_values))]),
               noise.holm_adjusted(p_values), strict=True)
    judged = {id(i): _decide(i, s, h, level, policy) for (i, s), h in zip(tested, holm, strict=True)}
    figures = [*kept.values(), *(judged.get(id(i), i.result) for i in items)]
    return GateResult(figures=_ordered(figures, policy), policy=policy, look=look,
                      alpha_look=look.level(policy.alpha),
                      base_runs=tuple(r.run.id for r in base), cand_runs=tuple(r.run.id for r in cand),
                      prints=(_print(base), _print(cand)),
                      cells=[label_of(c) for p, x in cells if (c := _first(base, p, x)) is not None])


def _print(runs: Sequence[GateRun]) -> fp.Fingerprint:
    """A side's fingerprint: each fact's distinct values over its runs."""
    return fp.side_print([fp.Fingerprint.of(r.run, r.run.config(r.config)) for r in runs])


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
            "reasons": [reason_dict(r) for r in f.reasons],
            "baseline": list(f.base), "candidate": list(f.cand), "launches": list(f.units),
            "left_out_moved": list(f.left_out), "change": f.change,
            "lo": f.lo, "hi": f.hi, "p": f.p, "p_holm": f.p_holm, "detectable": f.detectable, "look": f.look,
            "noise": None if f.noise is None else {"tau": f.noise.tau, "df": f.noise.df, "source": f.noise.source,
                                                   "units": f.noise.units}}


def reason_dict(r: fp.Reason) -> dict:
    """A reason of the refusal rule: its code, whether it refuses, each side's value (baseline, candidate), the
    limit crossed and, for the cache, each side's share served from it."""
    return {"code": r.code, "refuses": r.refuses, "side": {"a": "baseline", "b": "candidate"}.get(r.side or ""),
            "baseline": r.a, "candidate": r.b, "limit": r.limit, "cache_share": list(r.shares)}


def result_dict(r: GateResult) -> dict:
    """The gate's JSON: its outcome, how it decided (the false-alarm rate over the gate, how it was split
    over figures and looks), the runs of each side and every figure."""
    p = r.policy
    return {"outcome": r.outcome, "alpha": p.alpha, "alpha_this_look": r.alpha_look, "look": r.look.number,
            "information_fraction": r.look.now, "information_fractions": list(r.look.fractions), "min_effect": p.min_effect, "power": p.power,
            "multiplicity": "holm over every figure x cell the gate tested (a rejected one frees its share)",
            "sequential": "alpha spending, Lan-DeMets O'Brien-Fleming type, group-sequential boundaries",
            "equivalence": "two one-sided tests at the look's one-sided boundary, margin min_effect on the ratio",
            "unit": "a server launch: runs of one launch count once",
            "baseline": list(r.base_runs), "candidate": list(r.cand_runs),
            "differences": [{"fact": d.fact, "baseline": d.a, "candidate": d.b} for d in r.differences],
            "cells": r.cells,
            "counts": {v: r.count(v) for v in ("regressed", "improved", "no change", "inconclusive", "refused")},
            "figures": [figure_dict(f) for f in r.figures]}
