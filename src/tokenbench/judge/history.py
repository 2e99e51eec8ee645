"""A series: the runs given one name (`--series NAME`, stored in the run's spec) are a history. For each server
config, cell (lengths and load) and figure: each run's figure in time order, the noise band learned from the
series' earlier launches, and the point's state: within the band, outside it (worse or better), or no band yet
(fewer than MIN_RUNS earlier launches). The band is the gate's model (metrics/noise.py): runs of one launch
count once (`noise.by_launch`), the most recent MAX_RUNS earlier runs, their spread on the log scale; a point is
judged as a new launch against their mean, a prediction interval at `alpha`:

    mean +- t_{1 - alpha/2, df} * s * sqrt(1 + 1/k)        (k earlier launches, s their spread, df = k - 1)

A figure the client's delays moved (marked `~`) or a cell that is not ok is shown, not judged, and is not
learned from. docs/metrics.md, "A series: history and its noise band"."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tokenbench.judge.cells import figure_state_of, label_of, launch_of, load_of, ok_repeats, pair_of, value_of
from tokenbench.judge.floors import MAX_RUNS, MIN_RUNS
from tokenbench.judge.gate import GATE_METRICS
from tokenbench.judge.load_axes import LoadKey
from tokenbench.judge.status import usable
from tokenbench.judge.views import RunData, load_run
from tokenbench.metrics import noise
from tokenbench.metrics.cell_summary import Metric
from tokenbench.store.db import RunFilter, Store
from tokenbench.store.rows import CellRow

State = Literal["within", "worse", "better", "learning", "moved", "not_ok"]
ALPHA = 0.05


@dataclass(frozen=True)
class Band:
    """The band a point is judged against: its ends on the figure's scale, the earlier launches' geometric
    mean, and the noise it was learned as (their spread, degrees of freedom, how many)."""

    lo: float
    hi: float
    center: float
    noise: noise.Noise


@dataclass(frozen=True, kw_only=True)
class Point:
    """One run's figure of a cell: the run, when it started, the engine version it measured, its value (None:
    not measured), the band learned before it and its state."""

    run: str
    when: str
    version: str
    value: float | None
    state: State
    band: Band | None = None
    launch: str | None = None


@dataclass(frozen=True)
class Track:
    """A cell's figure over the series' runs, oldest first."""

    config: str
    cell: str
    key: tuple[tuple[int, int], LoadKey]
    metric: Metric
    points: tuple[Point, ...]

    def outside(self) -> list[Point]:
        return [p for p in self.points if p.state in ("worse", "better")]


@dataclass(frozen=True)
class History:
    """A series' tracks, the runs it holds (oldest first) and the level its bands are drawn at."""

    series: str
    runs: tuple[str, ...]
    tracks: list[Track]
    alpha: float = ALPHA


def runs_of(store: Store, series: str, until: str | None = None) -> list[RunData]:
    """The series' runs, oldest first (up to the run `until`, itself included)."""
    rows = store.runs(RunFilter(series=series))
    ids = [r.id for r in rows]
    if until is not None and until in ids:
        ids = ids[: ids.index(until) + 1]
    return [load_run(store, i, requests=False) for i in ids]


def band(earlier: Sequence[noise.RunFigure], alpha: float) -> Band | None:
    """The prediction band for a new launch from the earlier points (the most recent MAX_RUNS, their runs of one
    launch counted once); None below MIN_RUNS launches."""
    units = noise.by_launch(list(earlier)[-MAX_RUNS:])
    learned = noise.spread([units], "learned") if len(units) >= MIN_RUNS else None
    if learned is None:
        return None
    center = sum(u.log for u in units) / len(units)
    half = noise.t_quantile(1 - alpha / 2, learned.df) * learned.tau * math.sqrt(1 + 1 / len(units))
    return Band(math.exp(center - half), math.exp(center + half), math.exp(center), learned)


def _state(value: float, b: Band | None, metric: Metric) -> State:
    if b is None:
        return "learning"
    if b.lo <= value <= b.hi:
        return "within"
    higher = value > b.hi
    return "better" if higher == metric.higher_is_better else "worse"


def _judged(cell: CellRow, metric: Metric, allow_client_lag: bool) -> tuple[float | None, State | None]:
    """The cell's figure and, where it is not judged, why (not ok, moved by the client's delays)."""
    value = value_of(cell, metric)
    if not ok_repeats(cell):
        return value, "not_ok"
    if not usable(figure_state_of(cell, metric.key), allow_client_lag):
        return value, "moved"
    return (value, None) if value is not None and value > 0 else (None, "not_ok")


def track(members: Sequence[tuple[RunData, CellRow]], metric: Metric, alpha: float) -> tuple[Point, ...]:
    """Each run's point, judged against the band its clean predecessors give."""
    learned: list[noise.RunFigure] = []
    out = []
    for run, cell in members:
        value, why = _judged(cell, metric, bool(run.spec.get("allow_client_lag")))
        b = band(learned, alpha)
        state: State = why or _state(value or 0.0, b, metric)
        version = run.config(cell.config).version or "-"
        out.append(Point(run=run.id, when=run.created_at, version=version, value=value, state=state,
                         band=b, launch=launch_of(cell)))
        if why is None and value is not None:
            learned.append(noise.RunFigure(value, 0.0, launch_of(cell)))
    return tuple(out)


def history(series: str, runs: Sequence[RunData], metrics: Sequence[Metric] = GATE_METRICS, alpha: float = ALPHA,
            cells: set[tuple[str, tuple[tuple[int, int], LoadKey]]] | None = None) -> History:
    """Every (config, cell) any run of the series measured (or those in `cells`), each figure's track."""
    found: dict[tuple[str, tuple[tuple[int, int], LoadKey]], list[tuple[RunData, CellRow]]] = {}
    for run in runs:
        for config in run.config_names():
            for c in run.cells_of(config):
                key = (config, (pair_of(c), load_of(c)))
                if cells is None or key in cells:
                    found.setdefault(key, []).append((run, c))
    tracks = [Track(config, label_of(members[0][1]), key, m, track(members, m, alpha))
              for (config, key), members in sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][1]))
              for m in metrics]
    return History(series, tuple(r.id for r in runs), tracks, alpha)


def of_run(store: Store, run: RunData, metrics: Sequence[Metric]) -> History | None:
    """The history of the run's series up to the run, on the run's own cells; None for a run of no series."""
    series = run.spec.get("series")
    if not isinstance(series, str) or not series:
        return None
    cells = {(config, (pair_of(c), load_of(c))) for config in run.config_names() for c in run.cells_of(config)}
    return history(series, runs_of(store, series, until=run.id), metrics, cells=cells)
