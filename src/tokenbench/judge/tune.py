"""`tokenbench tune`'s judgement, as data: server configs ranked by their capacity under each SLO tier, with
the boundary's 95 % interval from each config's capacity search (metrics/capacity.Answer: `lo` the highest
load that surely met the tier, `hi` the lowest that surely missed it), a verdict per config, the gain of
the best over the baseline with its interval, the binding SLO, and the frontier of all configs. Also the
rules the tune runs by: a config is stopped early once its interval cannot reach another's (`outranked`),
and its search starts from the best boundary found so far (`warm_start`). Formulas: docs/metrics.md, "Tune".

- A config is *worse* when its boundary surely lies below another's: its lowest surely-failing load is at or
  below the other's highest surely-passing one (`hi_X <= lo_Y`: X's capacity < hi_X <= lo_Y <= Y's).
- The *best* is the highest capacity (ties: the surer low end, then the baseline, then the earlier config);
  every other config not worse is *indistinguishable* from it: the intervals cannot tell them apart.
- A config that did not start is *failed* (its cause: logs/launch.py); one the budget did not reach, *not_run*;
  when no config met the tier at any load tried there is no best, and every config searched is *unmet*.
- A config whose engine died after it started, in any launch, is *died* in every tier (the death and its
  cause: logs/launch.Death), and one whose last launch did not start is *failed*: neither is ever the best,
  whatever its search found, nor a rival another is stopped against or beaten by.
- The first tier's best is confirmed on a fresh launch: a sustain cell at its answer (`Confirmation`). One
  that missed the tier there is *unconfirmed* in that tier, and the next-ranked config is its best; one
  whose engine died there is *died*. The recommendation is the first tier's best.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from tokenbench.logs.launch import Death, LaunchFailure
from tokenbench.metrics.capacity import Answer, Reason, SearchRecord, Sustain, TierVerdict
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.slo import Tier
from tokenbench.store.rows import SearchRow

TuneVerdict = Literal["best", "indistinguishable", "worse", "unmet", "unconfirmed", "died", "failed", "not_run"]
VERDICTS: tuple[TuneVerdict, ...] = ("best", "indistinguishable", "worse", "unmet", "unconfirmed", "died", "failed",
                                     "not_run")
Outcome = Literal["confirmed", "missed", "in_doubt", "died"]


@dataclass(frozen=True)
class Entrant:
    """One server config of a tune: its name and flags (profile overrides), its search (None: not searched),
    why it did not start (None: it started, or was not tried) and each death of its engine after it started."""

    name: str
    overrides: dict[str, str] = field(default_factory=dict)
    record: SearchRecord | None = None
    launch: LaunchFailure | None = None
    note: str = ""                     # the stored config's message (why one was not run)
    deaths: tuple[Death, ...] = ()     # each time its engine started and then died

    def answer(self, tier: str) -> Answer | None:
        if self.record is None:
            return None
        return next((a for a in self.record.answers if a.tier == tier), None)

    @property
    def out(self) -> TuneVerdict | None:
        """Why it can be no tier's best whatever its search found: its engine died (in any launch), or its last
        launch did not start (None: it can be)."""
        if self.deaths:
            return "died"
        return "failed" if self.launch is not None and self.record is not None else None

    @property
    def confirmation(self) -> Confirmation | None:
        """Its confirmation: the sustain cell at its first tier's answer, or its engine's death there (None: not
        tried)."""
        died = next((d for d in self.deaths if d.sustain), None)
        if died is not None:
            return Confirmation(config=self.name, outcome="died", death=died)
        sustain = self.record.sustain if self.record is not None else None
        return None if sustain is None else confirmation(self.name, sustain)

    @property
    def cells(self) -> int:
        return len(self.record.tried) if self.record is not None else 0


@dataclass(frozen=True)
class Span:
    """Where a config's true capacity lies: [low, high] (high None: open, every load up to the maximum met
    it). Closed loop: whole streams, so at most one below the first sure failure."""

    low: float
    high: float | None


def span(a: Answer, integer: bool) -> Span:
    high = None if a.hi is None else (a.hi - 1 if integer else a.hi)
    return Span(a.lo or 0.0, None if high is None else max(high, a.lo or 0.0))


def score(a: Answer | None) -> float:
    """The capacity as ranked: none found (the lowest load missed) is 0."""
    return a.capacity if a is not None and a.capacity is not None else 0.0


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Confirmation(Frozen):
    """A config confirmed on a fresh launch: a sustain cell at its first tier's answer (`load`, `duration_s`
    long) and what came of it: *confirmed* (the tier met over the cell), *missed* (not met, or the cell
    failed), *in_doubt* (the client's own delays may have moved the cell: it neither confirms nor refutes),
    *died* (the engine died: `death`). `drifted` and `apart`: the cell's figures drifted over it, or read
    apart from the search's cells at that load (the limits named): said, not held against it."""

    config: str
    outcome: Outcome
    load: float | None = None
    duration_s: float | None = None
    verdict: TierVerdict | None = None
    death: Death | None = None
    drifted: bool = False
    apart: list[str] = []


def confirmation(config: str, s: Sustain) -> Confirmation:
    """What the sustain cell at a config's answer says of it."""
    return Confirmation(config=config, outcome=outcome(s), load=s.load, duration_s=s.duration_s,
                        verdict=s.verdicts[0] if s.verdicts else None, drifted=s.drifted, apart=s.apart)


def outcome(s: Sustain) -> Outcome:
    if s.verdicts and s.verdicts[0].passes and s.status == "ok":
        return "confirmed"
    return "in_doubt" if s.doubt is not None else "missed"


class Standing(Frozen):
    """One config under one tier: its verdict, its search's answer, and for a worse one the config whose sure
    pass lies at or above its sure failure."""

    config: str
    overrides: dict[str, str] = {}
    verdict: TuneVerdict
    answer: Answer | None = None
    beaten_by: str | None = None
    cells: int = 0
    launch: LaunchFailure | None = None
    note: str = ""
    deaths: list[Death] = []
    confirmation: Confirmation | None = None


class Gain(Frozen):
    """The best config's capacity over the baseline's, less 1, with its interval (None ends: open). Each end
    combines one end of each config's interval (two one-sided 97.5 % decisions): each holds with at least
    95 %, both together with at least 90 %."""

    value: float | None
    lo: float | None
    hi: float | None

    def holds(self, x: float) -> bool:
        return (self.lo is None or self.lo <= x + 1e-12) and (self.hi is None or x <= self.hi + 1e-12)


class Ranking(Frozen):
    """Every config under one tier, in the tune's order; the best, and its gain over the baseline."""

    tier: Tier
    standings: list[Standing]
    best: str | None
    gain: Gain | None

    def of(self, config: str) -> Standing:
        return next(s for s in self.standings if s.config == config)

    @property
    def best_answer(self) -> Answer | None:
        return self.of(self.best).answer if self.best is not None else None


class Recommendation(Frozen):
    """The recommended config ready to start: `tokenbench deploy up PROFILE --set KEY=VALUE ...` as argv, and
    the profile it was launched with (a file `deploy up` takes; None when it was not stored)."""

    config: str
    argv: list[str]
    profile: dict[str, Any] | None = None


Empty = Literal["none_started", "none_met", "none_held"]


class Tuning(Frozen):
    """The tune's judgement: a ranking per tier, the recommended config (the first tier's best), the baseline
    it is measured against, the frontier (configs no other one beats in one tier while matching it in the
    rest), the confirmations tried in the order they were (each config once: the first tier's best, then the
    next-ranked where one failed), and whether the tune confirms its answer (`confirm`; --no-confirm: not)."""

    baseline: str
    rankings: list[Ranking]
    frontier: list[str]
    integer: bool
    dimension: str = "concurrency"
    confirm: bool = True
    confirmations: list[Confirmation] = []
    recommendation: Recommendation | None = None

    @property
    def recommended(self) -> str | None:
        return self.rankings[0].best if self.rankings else None

    @property
    def confirmed(self) -> Confirmation | None:
        """The recommended config's confirmation (None: not run)."""
        return next((c for c in self.confirmations if c.config == self.recommended), None)

    @property
    def empty(self) -> Empty | None:
        """Why there is nothing to recommend (None: there is): no config started; none met the first tier at
        any load tried; or every one that met it died or missed it on its confirmation."""
        if self.recommended is not None:
            return None
        standings = self.rankings[0].standings if self.rankings else []
        if not any(s.answer is not None or s.deaths for s in standings):
            return "none_started" if any(s.verdict == "failed" for s in standings) else "none_met"
        return "none_held" if any(score(s.answer) > 0 or s.deaths for s in standings) else "none_met"

    def ranking(self, tier: str) -> Ranking:
        return next(r for r in self.rankings if r.tier.name == tier)


# ---- the verdicts ----

def beaten(x: Answer, answers: dict[str, Answer]) -> str | None:
    """The config whose sure pass is at or above x's sure failure (the highest such), or None."""
    if x.hi is None:
        return None
    above = [(a.lo, name) for name, a in answers.items() if a.lo is not None and x.hi <= a.lo]
    return max(above)[1] if above else None


def _key(order: Sequence[str], answers: dict[str, Answer], baseline: str):
    """The ranking's order: the highest capacity, then the surer low end, the baseline, the earlier config."""
    return lambda n: (score(answers[n]), answers[n].lo or 0.0, n == baseline, -order.index(n))


def _best(order: Sequence[str], answers: dict[str, Answer], baseline: str) -> str | None:
    """The highest capacity (None when no config met the tier at any load)."""
    if not any(score(a) > 0 for a in answers.values()):
        return None
    return max(answers, key=_key(order, answers, baseline))


def excluded(e: Entrant, first: bool) -> TuneVerdict | None:
    """Why the config cannot be the tier's best: its engine died, its last launch did not start, or (the first
    tier) it missed the tier on its confirmation (None: it can be)."""
    if e.out is not None:
        return e.out
    c = e.confirmation
    return "unconfirmed" if first and c is not None and c.outcome == "missed" else None


def _standing(e: Entrant, tier: str, best: str | None, answers: dict[str, Answer], first: bool) -> Standing:
    """The config's verdict under the tier; `answers`: those of the configs that can be its best."""
    a = e.answer(tier)
    common: dict[str, Any] = {"config": e.name, "overrides": e.overrides, "cells": e.cells, "launch": e.launch,
                              "deaths": list(e.deaths), "confirmation": e.confirmation if first else None}
    out = excluded(e, first)
    if a is None:
        return Standing(verdict=out or ("failed" if e.launch is not None else "not_run"), note=e.note, **common)
    if out is not None:
        return Standing(verdict=out, answer=a, **common)
    if e.name == best:
        return Standing(verdict="best", answer=a, **common)
    if best is None:
        return Standing(verdict="unmet", answer=a, **common)
    by = beaten(a, {n: x for n, x in answers.items() if n != e.name})
    return Standing(verdict="worse" if by else "indistinguishable", answer=a, beaten_by=by, **common)


def gain(best: Answer, base: Answer, integer: bool) -> Gain:
    """capacity(best) / capacity(baseline) - 1, its ends from the two configs' spans."""
    b, d = span(best, integer), span(base, integer)
    value = score(best) / score(base) - 1 if score(base) > 0 else None
    lo = b.low / d.high - 1 if d.high else None
    hi = b.high / d.low - 1 if b.high is not None and d.low > 0 else None
    return Gain(value=value, lo=lo, hi=hi)


def rank(tier: Tier, entrants: Sequence[Entrant], baseline: str, integer: bool, first: bool = True) -> Ranking:
    """The tier's verdicts over the configs that can be its best (`excluded` ones are listed, not ranked)."""
    answers = {e.name: a for e in entrants if (a := e.answer(tier.name)) is not None and excluded(e, first) is None}
    order = [e.name for e in entrants]
    best = _best(order, answers, baseline)
    standings = [_standing(e, tier.name, best, answers, first) for e in entrants]
    g = None
    if best is not None and baseline in answers:
        g = Gain(value=0.0, lo=0.0, hi=0.0) if best == baseline else gain(answers[best], answers[baseline], integer)
    return Ranking(tier=tier, standings=standings, best=best, gain=g)


def confirmations(entrants: Sequence[Entrant], tier: Tier, baseline: str) -> list[Confirmation]:
    """The confirmations tried, in the order the tune tries them: the first tier's ranking (the highest
    capacity first), each config once."""
    tried = {e.name: (e, c) for e in entrants if (c := e.confirmation) is not None and e.answer(tier.name) is not None}
    answers = {n: a for n, (e, _) in tried.items() if (a := e.answer(tier.name)) is not None}
    order = [e.name for e in entrants]
    return [tried[n][1] for n in sorted(answers, key=_key(order, answers, baseline), reverse=True)]


def frontier(entrants: Sequence[Entrant], tiers: Sequence[Tier]) -> list[str]:
    """Configs searched that no other one beats in one tier while matching it in the rest (capacities as ranked);
    a config whose engine died or whose last launch did not start is in no frontier."""
    scores = {e.name: [score(e.answer(t.name)) for t in tiers] for e in entrants
              if e.record is not None and e.out is None}

    def dominated(x: list[float]) -> bool:
        return any(all(a >= b for a, b in zip(y, x, strict=True)) and y != x for y in scores.values())
    return [name for name, x in scores.items() if not dominated(x)]


def judge(tiers: Sequence[Tier], entrants: Sequence[Entrant], baseline: str, confirm: bool = True,
          dimension: str | None = None) -> Tuning:
    dims = {e.record.dimension for e in entrants if e.record is not None}
    dim = dimension or next(iter(sorted(dims)), "concurrency")
    integer = "rate" not in dims
    rankings = [rank(t, entrants, baseline, integer, i == 0) for i, t in enumerate(tiers)]
    tried = confirmations(entrants, tiers[0], baseline) if tiers else []
    return Tuning(baseline=baseline, rankings=rankings, frontier=frontier(entrants, tiers), integer=integer,
                  dimension=dim, confirm=confirm, confirmations=tried)


class Config(Protocol):
    """A stored server config as the judgement reads it (store.rows.ConfigRow, judge.views.ConfigInfo)."""

    @property
    def name(self) -> str: ...
    @property
    def overrides(self) -> dict[str, Any]: ...
    @property
    def launch(self) -> LaunchFailure | None: ...
    @property
    def profile(self) -> Profile | None: ...
    @property
    def message(self) -> str: ...
    @property
    def deaths(self) -> tuple[Death, ...]: ...


def entrants(configs: Sequence[Config], searches: Sequence[SearchRow]) -> list[Entrant]:
    """The tune's configs in the stored order (the tune's own: it stores them all before it starts), each with
    its search and its launch failure."""
    found = {s.config: s.record for s in searches}
    return [Entrant(c.name, {k: str(v) for k, v in c.overrides.items()}, found.get(c.name), c.launch, c.message or "",
                    tuple(c.deaths)) for c in configs]


def baseline_of(spec: Mapping[str, Any]) -> str | None:
    """The baseline of a stored tune's spec (None: the run is not a tune)."""
    tune = spec.get("tune")
    return str(tune.get("baseline") or "default") if isinstance(tune, dict) else None


def recommendation(spec: Mapping[str, Any], config: Config) -> Recommendation:
    """`tokenbench deploy up` of the config: the study's profile with its overrides and the config's."""
    target = spec.get("target") or {}
    given = [*target.get("set", []), *(f"{k}={v}" for k, v in config.overrides.items())]
    sets = list({x.split("=", 1)[0]: x for x in given}.values())         # a key set twice: the last one holds
    argv = ["tokenbench", "deploy", "up", str(target.get("profile") or ""), *(w for x in sets for w in ("--set", x))]
    profile = config.profile.model_dump(mode="json", exclude_none=True) if config.profile is not None else None
    return Recommendation(config=config.name, argv=argv, profile=profile)


def _spec_tiers(spec: Mapping[str, Any]) -> tuple[list[Tier], str] | None:
    """A stored tune's tiers and search dimension from its spec (None: a spec this version cannot read)."""
    from pydantic import ValidationError

    from tokenbench.spec.study import StudySpec
    try:
        s = StudySpec.model_validate({k: v for k, v in spec.items() if k != "planned_cells"})   # the run's, not the spec's
    except ValidationError:
        return None
    return s.capacity_tiers(), s.find_capacity or "concurrency"


def confirms(spec: Mapping[str, Any]) -> bool:
    """Whether a stored tune confirms its answer (not --no-confirm)."""
    tune = spec.get("tune")
    return not (isinstance(tune, dict) and tune.get("no_confirm"))


def of_run(spec: Mapping[str, Any], configs: Sequence[Config], searches: Sequence[SearchRow]) -> Tuning | None:
    """The judgement of a stored tune (None for any other run, or a tune with nothing stored yet: no search,
    no config that failed to start), with the recommended config ready to start."""
    baseline = baseline_of(spec)
    tried = any(c.launch is not None or c.deaths for c in configs)
    if baseline is None or not (searches or tried):
        return None
    found = (searches[0].record.tiers, searches[0].record.dimension) if searches else _spec_tiers(spec)
    if found is None:
        return None
    tuning = judge(found[0], entrants(configs, searches), baseline, confirms(spec), found[1])
    best = next((c for c in configs if c.name == tuning.recommended), None)
    return tuning.model_copy(update={"recommendation": recommendation(spec, best)}) if best is not None else tuning


@dataclass(frozen=True)
class Undecided:
    """What a tier has left open: the configs the best cannot be told from, those of them (the best included)
    whose search ended before it converged (with why: the cell or time budget, the client's delays, loads left
    undecided), and the configs never searched for lack of cells or time."""

    rivals: list[str]
    short: list[tuple[str, Reason]]
    not_run: list[str]

    @property
    def budget(self) -> bool:
        """More cells or time may decide it."""
        return bool(self.not_run) or any(r in SHORT for _, r in self.short)


SHORT = ("budget", "time")                  # a search that ended for lack of cells or of time
FINAL = ("converged", "above_max", "below_min", "outranked", "died")     # ... or that ended with its answer


def undecided(r: Ranking) -> Undecided | None:
    """The tier's open question: the best not surely above a rival while a search among them ended before it
    converged, or configs not run; None when the tier is decided (or its contenders' answers are final)."""
    rivals = [s.config for s in r.standings if s.verdict == "indistinguishable"]
    short = [(s.config, s.answer.reason) for s in r.standings if s.verdict in ("best", "indistinguishable")
             and s.answer is not None and s.answer.reason not in FINAL]
    not_run = [s.config for s in r.standings if s.verdict == "not_run"]
    if not not_run and not (rivals and short):
        return None
    return Undecided(rivals if short else [], short if rivals else [], not_run)


# ---- the rules the tune runs by ----

def rivals(entrants: Sequence[Entrant], tiers: Sequence[Tier]) -> dict[str, float | None]:
    """Per tier, the highest load any config searched so far surely met (None: none surely met one); a config
    whose engine died, or whose last launch did not start, is no rival."""
    alive = [e for e in entrants if e.out is None]
    return {t.name: max((a.lo for e in alive if (a := e.answer(t.name)) is not None and a.lo is not None),
                        default=None) for t in tiers}


def outranked(answers: Sequence[Answer], rival: dict[str, float | None]) -> bool:
    """Whether a search's boundary can no longer reach the rivals' in any tier: in every tier its lowest
    surely-failing load is at or below the highest load another config surely met."""
    return bool(answers) and all(a.hi is not None and (r := rival.get(a.tier)) is not None and a.hi <= r
                                 for a in answers)


def warm_start(entrants: Sequence[Entrant], tier: Tier) -> float | None:
    """Where the next config's search starts: the highest load a config searched so far surely met under the
    first tier (a config that fails there is at once outranked in it), else the highest capacity found (None:
    nothing found yet: the spec's start)."""
    alive = [e for e in entrants if e.out is None]
    sure = [a.lo for e in alive if (a := e.answer(tier.name)) is not None and a.lo is not None]
    found = [a.capacity for e in alive if (a := e.answer(tier.name)) is not None and a.capacity is not None]
    return max(sure) if sure else max(found) if found else None
