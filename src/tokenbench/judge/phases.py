"""Which phase of the requests' time moved between two cells (`compare`): each phase's mean with its 95 % interval
from the per-request phases of each cell's stored records (metrics/server.phases_of), the difference B - A with its
interval (Welch: the two standard errors in quadrature, t at Welch-Satterthwaite's degrees of freedom), and whether it moved:
its interval excludes 0 and it is at least `min_effect` of the time it is part of (A's mean TTFT for the phases
before the first token, A's mean time to the last token for the others). Data, not sentences (report/phases.py
says them); formulas: docs/metrics.md, "Where the time went".

Cells are paired as `compare` pairs them (the same lengths and load); two columns that each traced exactly one cell
of a pair are paired across their loads too (run A at concurrency 1 against run B at 4: what grew with the load)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tokenbench.client.records import RequestRecord
from tokenbench.judge.cells import pair_of, state_of
from tokenbench.judge.fairness import Column, common_cells
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.server import phases_of
from tokenbench.metrics.summary_groups import LAST_PHASES, PHASES, TTFT_PHASES, PhaseName
from tokenbench.store.rows import CellRow


@dataclass(frozen=True, kw_only=True)
class PhaseChange:
    """One phase of two cells: each mean's interval, B - A with its interval (ms), and whether it moved."""

    phase: PhaseName
    a: u.Interval
    b: u.Interval
    delta: float
    lo: float
    hi: float
    moved: bool


def phase_values(records: list[RequestRecord], phase: PhaseName) -> list[float]:
    """A cell's per-request values of one phase (ms): its measured ok requests joined to a span."""
    out = []
    for r in records:
        p = phases_of(r) if r.phase == "measure" and r.ok else None
        v = p.get(phase) if p is not None else None
        if v is not None:
            out.append(v / 1e6)
    return out


def _mean(values: list[float]) -> u.Interval | None:
    return u.within(np.asarray(values, dtype=float), "mean") if values else None


def change(phase: PhaseName, a: list[float], b: list[float], scale_ms: float, min_effect: float) -> PhaseChange | None:
    """B - A of one phase's mean; None when either cell has no value of it."""
    ia, ib = _mean(a), _mean(b)
    if ia is None or ib is None:
        return None
    delta = ib.value - ia.value
    half = math.hypot(ia.se, ib.se) * u.t975(_welch_df(ia, ib)) if ia.df and ib.df else math.inf
    lo, hi = delta - half, delta + half
    return PhaseChange(phase=phase, a=ia, b=ib, delta=delta, lo=lo, hi=hi,
                       moved=(lo > 0 or hi < 0) and abs(delta) >= min_effect * scale_ms)


def _welch_df(a: u.Interval, b: u.Interval) -> int:
    """Welch-Satterthwaite's degrees of freedom of a difference of two means (their standard errors and own df),
    rounded down, in exact arithmetic on the two variances: where the formula gives a whole number (a side whose
    values are all equal, say no queue in any request, leaves exactly the other side's) floating point can
    leave it a hair below, and rounding down would lose a degree."""
    va, vb = Fraction(a.se) ** 2, Fraction(b.se) ** 2
    if not va and not vb:
        return max(1, min(a.df, b.df))
    return max(1, math.floor((va + vb) ** 2 / (va**2 / a.df + vb**2 / b.df)))


def _scale(cell: CellRow, phase: PhaseName) -> float:
    """The time a phase is part of in cell A: its mean client TTFT, or its mean time to the last token."""
    b = cell.summary.phases
    if b is None:
        return 0.0
    if phase in TTFT_PHASES:
        return b.client_ttft_mean_ms or 0.0
    return sum(b.stat(p) or 0.0 for p in LAST_PHASES)


def changes(a: CellRow, a_recs: list[RequestRecord], b_recs: list[RequestRecord], min_effect: float
            ) -> list[PhaseChange]:
    """Every phase's change from cell A to cell B, in the order of PHASES."""
    out = [change(p, phase_values(a_recs, p), phase_values(b_recs, p), _scale(a, p), min_effect) for p in PHASES]
    return [c for c in out if c is not None]


def grew(found: list[PhaseChange]) -> PhaseChange | None:
    """The phase that grew most among those that moved up; None when none did."""
    up = [c for c in found if c.moved and c.delta > 0]
    return max(up, key=lambda c: c.delta) if up else None


def _traced(col: Column) -> list[CellRow]:
    return [c for c in col.cells() if c.summary.phases is not None and c.summary.phases.joined and state_of(c).ok]


def pairs(base: Column, other: Column) -> list[tuple[CellRow, CellRow]]:
    """The cells of two columns whose phases compare: the common cells both traced, else per length pair the one
    traced cell of each (their loads may differ)."""
    common = [(a, b) for p, k in common_cells([base, other])
              if (a := base.cell(p, k)) is not None and (b := other.cell(p, k)) is not None
              and a in _traced(base) and b in _traced(other)]
    if common:
        return common
    out = []
    for pair in sorted({pair_of(c) for c in _traced(base)} & {pair_of(c) for c in _traced(other)}):
        a_cells = [c for c in _traced(base) if pair_of(c) == pair]
        b_cells = [c for c in _traced(other) if pair_of(c) == pair]
        if len(a_cells) == 1 and len(b_cells) == 1:
            out.append((a_cells[0], b_cells[0]))
    return out
