"""Capacity search, the pure part: a cell's requests judged against SLO tiers (each limit's statistic with
its 95 % interval, pooled over the cells run at one load), and the typed record of a search as it is
stored (store/db.py) and reported (report/capacity.py). The control flow that picks the loads is
study/capacity.py. Formulas: docs/metrics.md ("Capacity search").

A limit's check at a load: the statistic of every ok request of the cells run there, pooled (replicate
cells draw fresh prompts and arrivals from the same load), with its 95 % interval (uncertainty.within: t
for a mean, Woodruff for a percentile, clustered by request for ITL). It *passes* when the statistic is
within the limit, and *surely* passes when the whole interval is; it *surely* fails when the whole
interval is outside. A load where a cell failed fails, surely. The client's own delays can only make a
latency slower: a figure they may have moved passes as it reads, and it surely fails only when the
interval's near end, less the most those delays could have moved that figure (the cell's client bound,
metrics/health.py), is still outside the limit."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, computed_field

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import request as rm
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.summary_groups import TURN_FIGURE, JobFigures
from tokenbench.metrics.tally import CLIENT_CAUSES
from tokenbench.metrics.timeslices import Drift, Timeslices
from tokenbench.spec.bench import SLO
from tokenbench.spec.slo import JOB_METRICS, Limit, Tier

Role = Literal["bracket", "refine", "replicate", "sustain", "remeasure"]
Doubt = Literal["client", "schedule"]      # a cell the client's own delays may have moved (a judged figure marked
                                          # for the client, or an invalid cell), or whose sends left the schedule
Sure = Literal["pass", "fail"]
Samples = list[float] | u.Clusters


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)


class CellSamples(BaseModel):
    """What the search reads of one cell: its key and verdict, each limit metric's per-request samples, its
    request rate (requests/s completed) and timeslices (a sustain cell's drift)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    key: str
    repeat: int
    status: str
    values: dict[str, Samples] = {}
    request_rate: float | None = None
    slices: Timeslices | None = None
    bounds: dict[str, float] = {}    # figure (summary key, e.g. p99_ttft_ms) -> the most the client's delays
                                     # could have moved it (FigureHealth.client_bounds)
    marked: list[str] = []           # figures the verdict marked: moved beyond the tolerance (client_marks)
    doubt: Doubt | None = None       # the client's delays may have moved what the search judges: measured again
    causes: dict[str, str] = {}      # the marked figures' causes (client_marks)
    schedule_off: str | None = None  # why its sends left their schedule (send_schedule_off), if they did
    late_ms: float = 0.0             # its latest send's lateness (send_late_max_ms)

    def with_doubt(self, tiers: Sequence[Tier], closed: bool) -> CellSamples:
        """The cell with its doubt: an invalid cell, or a limit's figure marked for the client's own delays
        where they could have made it fail (it fails, and not by more than the figure's client bound), or
        (closed loop) marked at all: in doubt for the client. A limit that fails by no more than the latest
        send's lateness while the sends left their schedule for the client's: in doubt for the schedule.
        The client's delays only make a latency slower, and late sends of an open loop bunch its load
        (harsher, never gentler), so an open loop's pass stands as it reads, and so does a fail beyond what
        they could add; a closed loop held back by a stop let the server idle."""
        if self.status == "invalid":
            return self.model_copy(update={"doubt": "client"})
        checks = [c for tier in tiers for c in judge(tier, [self]).checks]
        for c in checks:
            figure = figure_key(c.limit)
            if self.causes.get(figure) in CLIENT_CAUSES and (closed or _flips(c, self.bounds.get(figure, 0.0))):
                return self.model_copy(update={"doubt": "client"})
        if self.schedule_off == "client" and any(_flips(c, self.late_ms) for c in checks):
            return self.model_copy(update={"doubt": "schedule"})
        return self

    def allowance(self, limit: Limit) -> float:
        """How much the client's delays could have raised the limit's statistic (ms); nothing for goodput's
        share (a count)."""
        return self.bounds.get(figure_key(limit), 0.0)

    def moved(self, limit: Limit) -> bool:
        return self.status == "invalid" or figure_key(limit) in self.marked


def _flips(c: Check, slack: float) -> bool:
    """Whether a check that fails would pass with its figure `slack` lower (a lower limit, e.g. goodput's
    share, is taken as possibly flipped)."""
    if c.passes or c.value is None:
        return False
    return not c.limit.upper or c.limit.holds(c.value - slack)


def figure_key(limit: Limit) -> str:
    """The summary's name of the limit's figure: `ttft:p99` -> p99_ttft_ms; a job limit's, the request figure
    its turns are made of (`job:p95` -> p95_e2el_ms), whose client bound and mark it is read with."""
    return f"{limit.stat}_{TURN_FIGURE.get(limit.metric, limit.metric)}_ms"


def samples_of(records: Iterable[RequestRecord], metrics: set[str], slo: SLO,
               jobs: JobFigures | None = None) -> dict[str, Samples]:
    """Per-request samples of each metric a limit reads: TTFT, TPOT, E2EL (ms) of ok requests; ITL's gaps
    grouped by request; goodput: 1 for a request meeting every per-request SLO, else 0 (failed ones too);
    a job limit's: each complete job's figure (a sessions cell's `jobs`: metrics/summary.job_figures)."""
    recs = [r for r in records if r.phase == "measure" and r.error_kind != "cancelled"]
    ok = [r for r in recs if r.ok]
    out: dict[str, Samples] = {}
    per = {"ttft": rm.ttft_ms, "tpot": rm.tpot_ms, "e2el": rm.e2el_ms}
    for name in metrics:
        if name in JOB_METRICS:
            out[name] = jobs.each(name) if jobs is not None else []
        elif name == "itl":
            out[name] = u.Clusters.of([rm.itl_ms(r) for r in ok])
        elif name == "goodput":
            out[name] = [1.0 if rm.meets_slo(r, slo) else 0.0 for r in recs]
        else:
            out[name] = [v for r in ok if (v := per[name](r)) is not None]
    return out


def pooled(parts: Sequence[Samples]) -> Samples:
    """Several cells' samples of one metric as one sample."""
    if parts and isinstance(parts[0], u.Clusters):
        clusters = [p for p in parts if isinstance(p, u.Clusters)]
        return u.Clusters(np.concatenate([c.values for c in clusters]), np.concatenate([c.sizes for c in clusters]))
    return [v for p in parts if not isinstance(p, u.Clusters) for v in p]


class Check(Frozen):
    """One limit at one load: the statistic, its 95 % interval and the samples it rests on. `unreliable`:
    a percentile whose interval reaches the largest or smallest value measured, or a p99 from fewer than
    100 requests (the `◊` of every report): that end is not a 95 % bound (a p99 needs 299 requests for
    the largest of them to be one)."""

    limit: Limit
    value: float | None = None
    lo: float | None = None
    hi: float | None = None
    n: int = 0
    unreliable: bool = False
    allowance: float = 0.0         # ms the client's stalls could have added (CellSamples.allowance)
    cells: int = 1                 # cells pooled (across_cells: their spread is in the interval)

    @property
    def passes(self) -> bool:
        return self.value is not None and self.limit.holds(self.value)

    @property
    def sure(self) -> Sure | None:
        if self.value is None or self.lo is None or self.hi is None:
            return "fail"
        inside, outside = (self.hi, self.lo - self.allowance) if self.limit.upper else (self.lo, self.hi)
        if self.limit.holds(inside):
            return None if self.unreliable and self.cells < 2 else "pass"   # one cell's ◊ end is no bound:
                                                                              # a second cell must show it
        return "fail" if not self.limit.holds(outside) else None

    @property
    def margin(self) -> float:
        """How far inside the limit (share of the bound; negative: outside; -inf without a value)."""
        return float("-inf") if self.value is None else self.limit.margin(self.value)


def check(limit: Limit, values: Samples | None, allowance: float = 0.0) -> Check:
    """The limit's statistic over the samples with its interval; a fail is sure only when even the interval's
    near end less `allowance` (the client's possible stall) is outside the limit."""
    if values is None or not len(values):
        return Check(limit=limit)
    stat = "mean" if limit.stat == "fraction" else limit.stat
    iv = u.within(values if isinstance(values, u.Clusters) else np.asarray(values, dtype=float), stat)
    few = stat == "p99" and len(values) < u.UNRELIABLE_N
    return Check(limit=limit, value=iv.value, lo=iv.lo, hi=iv.hi, n=len(values), unreliable=iv.unreliable or few,
                 allowance=allowance)


class TierVerdict(Frozen):
    """One tier at one load (one cell, or every cell run there pooled). A failed cell fails the tier; a
    figure the client's delays may have moved is judged as it reads, a fail sure only beyond what they
    could add (Check.allowance), and says so (`client`)."""

    tier: str
    ok: bool                       # no cell failed
    checks: list[Check]
    client: bool = False           # a figure judged was marked moved by the client: a fail may be the client's

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passes(self) -> bool:
        return self.ok and all(c.passes for c in self.checks)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def sure(self) -> Sure | None:
        if not self.ok or any(c.sure == "fail" for c in self.checks):
            return "fail"
        return "pass" if all(c.sure == "pass" for c in self.checks) else None

    @property
    def binding(self) -> Check | None:
        """The limit closest to failing (or failing most): the smallest margin."""
        return min(self.checks, key=lambda c: c.margin, default=None)

    @property
    def unreliable(self) -> bool:
        return any(c.unreliable for c in self.checks)


def across_cells(limit: Limit, cells: Sequence[CellSamples], pooled_check: Check) -> Check:
    """With two or more cells at a load, the pooled interval widened to hold the cells' own spread: the
    t-interval of the mean of each cell's statistic. Requests of one cell are not independent (one
    arrival pattern, one queue): a pooled interval alone is too narrow where a cell's pattern was lucky."""
    per = [c.value for cell in cells if limit.metric in cell.values
           if (c := check(limit, cell.values[limit.metric])).value is not None]
    if len(per) < 2 or pooled_check.lo is None or pooled_check.hi is None:
        return pooled_check
    half = u.t975(len(per) - 1) * float(np.std(per, ddof=1)) / math.sqrt(len(per))
    mid = float(np.mean(per))
    return pooled_check.model_copy(update={"lo": min(pooled_check.lo, max(mid - half, 0.0)),
                                           "hi": max(pooled_check.hi, mid + half), "cells": len(per)})


def judge(tier: Tier, cells: Sequence[CellSamples]) -> TierVerdict:
    """The tier's verdict over the cells run at one load: their samples pooled, the interval widened to
    the cells' own spread (across_cells)."""
    ok = bool(cells) and all(c.status in ("ok", "invalid") for c in cells)
    checks = [across_cells(limit, cells, check(
                  limit, pooled([c.values[limit.metric] for c in cells if limit.metric in c.values]) or None,
                  max((c.allowance(limit) for c in cells), default=0.0)))
              for limit in tier.limits]
    moved = any(c.moved(limit) for c in cells for limit in tier.limits)
    return TierVerdict(tier=tier.name, ok=ok, checks=checks, client=moved)


def apart(sustain: TierVerdict, search: TierVerdict) -> list[str]:
    """The limits whose sustain-cell interval and the search's interval at the same load do not meet: the
    sustain cell does not confirm what the search's cells read there."""
    out = []
    for a, b in zip(sustain.checks, search.checks, strict=True):
        if None in (a.lo, a.hi, b.lo, b.hi):
            continue
        if a.hi < b.lo - a.allowance or b.hi < a.lo - b.allowance:      # type: ignore[operator]
            out.append(a.limit.text)
    return out


def metrics_of(tiers: Sequence[Tier]) -> set[str]:
    return {limit.metric for tier in tiers for limit in tier.limits}


# ---- the stored record of a search ----

class Tried(Frozen):
    """One cell the search ran (or found stored, on a resume), its role and its own verdict per tier."""

    key: str
    repeat: int
    role: Role
    load: float
    status: str
    verdicts: list[TierVerdict]
    doubt: Doubt | None = None       # in doubt for the client's delays: measured again, not pooled


class LoadVerdict(Frozen):
    """Every cell run at one load (the sustain cell apart), pooled, per tier; `doubted`: cells measured there
    that the client's delays may have moved, replaced by another cell and never pooled."""

    load: float
    cells: int
    verdicts: list[TierVerdict]
    doubted: int = 0

    def of(self, tier: str) -> TierVerdict:
        return next(v for v in self.verdicts if v.tier == tier)


Reason = Literal["converged", "budget", "above_max", "below_min", "undecided", "client", "outranked", "time", "died"]
# outranked, time: stopped from outside (`tokenbench tune`): its boundary's interval could no longer reach the
# best config's, or the time budget was spent (study/capacity.halted); died: the engine died under load (the
# search as far as it got, study/searches.py)


class Answer(Frozen):
    """One tier's answer: the highest load that met it, the boundary's 95 % interval [lo, hi] (lo: the
    highest load that surely passed, hi: the lowest that surely failed; None where none did), why the
    search stopped, and the binding SLO: at the lowest failing load the limit that failed most, and at the
    capacity the limit closest to failing (its headroom)."""

    tier: str
    limits: list[Limit]
    capacity: float | None = None
    fail_load: float | None = None
    lo: float | None = None
    hi: float | None = None
    reason: Reason = "converged"
    binding: Check | None = None
    headroom: Check | None = None
    nonmonotone: list[float] = []          # loads that passed above a load that failed
    lo_unreliable: bool = False            # the decision at lo (hi) rests on an unreliable percentile: that
    hi_unreliable: bool = False            # end is not a 95 % bound (Check.unreliable)
    remeasured: int = 0                    # cells measured again because the client's delays may have moved them
    client_loads: list[float] = []         # loads no clean cell could be measured at (the client's delays)


class Sustain(Frozen):
    """The sustain cell at the first tier's answer: every tier judged on it, and its drift."""

    key: str
    repeat: int
    load: float
    duration_s: float
    status: str
    verdicts: list[TierVerdict]
    drift: list[Drift] = []
    steady: bool | None = None
    apart: list[str] = []                  # the first tier's limits whose sustain interval misses the interval of
                                           # the search's cells at that load: they do not confirm the boundary
    doubt: Doubt | None = None             # the client's delays may have moved the sustain cell

    @property
    def drifted(self) -> bool:
        return any(d.drifted for d in self.drift)

    @property
    def holds(self) -> bool:
        """The first tier still met at the answer over the sustain cell, in line with the cells that placed
        the boundary (their intervals meet), nothing drifted, and nothing the client did in doubt."""
        return (bool(self.verdicts) and self.verdicts[0].passes and not self.drifted and not self.apart
                and self.doubt is None)


Dimension = Literal["concurrency", "rate", "users", "session_rate"]


class SearchRecord(Frozen):
    """A capacity search of one workload on one server config: what it asked, every cell it tried, the
    pooled verdict at each load, the answers per tier and the sustain cell."""

    workload: str
    dimension: Dimension
    tiers: list[Tier]
    budget: int
    precision: float
    tried: list[Tried] = []
    loads: list[LoadVerdict] = []
    answers: list[Answer] = []
    sustain: Sustain | None = None

    def load(self, x: float) -> LoadVerdict | None:
        return next((v for v in self.loads if v.load == x), None)
