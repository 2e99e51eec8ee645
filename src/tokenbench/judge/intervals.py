"""95 % intervals and verdicts of a report's cells, from the stored per-request records (each cell's
reservoir; metrics/uncertainty.py does the arithmetic, in closed form; docs/metrics.md, "Intervals and verdicts").

A cell's samples are grouped by its ok repeats; a cell that is not ok gets no interval (its figures are
marked instead, judge/status.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal

from tokenbench.client.records import RequestRecord
from tokenbench.judge.cells import figure_state_of, launch_of, ok_repeats, value_of
from tokenbench.judge.status import usable
from tokenbench.judge.views import RunData
from tokenbench.metrics import noise
from tokenbench.metrics import request as rm
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.cell_summary import JOBS, LATENCIES, RATES, Metric
from tokenbench.spec.bench import SLO
from tokenbench.store.rows import CellRow

STATS: tuple[Literal["mean", "p50", "p90", "p99"], ...] = ("mean", "p50", "p90", "p99")


# the between-run noise floor of a figure of a cell of a run, not learned from the runs named (judge/floors.py)
Floor = Callable[[RunData, CellRow, Metric, Collection[str]], noise.Noise]


def default_floor(run: RunData, cell: CellRow, metric: Metric, exclude: Collection[str] = ()) -> noise.Noise:
    return noise.default_floor(metric.key)


@dataclass(frozen=True)
class Judging:
    """How `compare` judges its columns: with --allow-not-ok a cell that is not ok still shows its (marked)
    figures; --min-effect is the smallest difference a verdict calls one; with --allow-client-lag a figure
    the client's delays may have moved (marked `~`) still gets its interval and verdict, marked; `floor`:
    the between-run noise of a side measured once (learned from the database, else the default)."""

    allow_not_ok: bool = False
    min_effect: float = u.MIN_EFFECT
    allow_client_lag: bool = False
    floor: Floor = default_floor


# The figures a comparison judges, ONE catalogue: `compare`'s verdict tables (and the report's config comparison
# where it names none) and the regression gate read it; a figure a cell lacks (goodput without SLOs, the job
# figures of a cell without sessions) is skipped where it is judged. Job figures are statistics over a
# sessions or trajectories cell's complete jobs (docs/metrics.md, "Jobs").
FIGURES: tuple[Metric, ...] = (
    Metric("request_throughput"), Metric("output_throughput"), Metric("request_goodput"),
    *(Metric(n, s) for n in LATENCIES for s in ("mean", "p50", "p99")),
    Metric("job", "mean"), Metric("job", "p50"), Metric("job", "p95"), Metric("job_ttft", "p95"),
    Metric("job_tpot", "p95"))


def _latencies(recs: list[RequestRecord], name: str) -> list[float] | u.Clusters:
    """Per-request values; ITL's gaps stay grouped by request (resampled together: a request's gaps are
    correlated, and resampling single gaps would make the interval too narrow)."""
    ok = [r for r in recs if r.ok]
    if name == "itl":
        return u.Clusters.of([rm.itl_ms(r) for r in ok])
    fn: Callable = {"ttft": rm.ttft_ms, "tpot": rm.tpot_ms, "e2el": rm.e2el_ms}[name]
    return [v for r in ok if (v := fn(r)) is not None]


def _events(recs: list[RequestRecord], name: str, slo: SLO | None) -> list[tuple[int, float]] | None:
    ok = [r for r in recs if r.ok]
    if name == "output_throughput":
        return [(t, float(n)) for r in ok for t, n in zip(r.token_times_ns, r.token_counts, strict=False)]
    if name == "request_throughput":
        return [(r.end_ns, 1.0) for r in ok]
    if slo is None or slo.is_empty():
        return None
    return [(r.end_ns, 1.0) for r in ok if rm.meets_slo(r, slo)]


def samples(recs: list[RequestRecord], name: str, slo: SLO | None) -> list[float] | u.Clusters:
    """One repeat's samples of a metric: per-request values, or per-bin rates of its measured window."""
    if name not in RATES:
        return _latencies(recs, name)
    events = _events(recs, name, slo)
    if events is None or not recs:
        return []
    start, end = min(r.intended_ns for r in recs), max(r.end_ns for r in recs)
    return u.bins(events, start, end, u.bin_count(len(recs)))


class Book:
    """Intervals of one run's cells, computed once each (records are read from the store on demand)."""

    def __init__(self, run: RunData, read: Callable[[int], list[RequestRecord]] | None = None) -> None:
        self.run, self._read = run, read or run.reader or (lambda _cell_id: [])
        self._recs: dict[int, list[RequestRecord]] = {}
        self._ivs: dict[tuple[tuple[int, ...], str, str], u.Interval | None] = {}
        self._groups: dict[tuple[tuple[int, ...], str], list[list[float] | u.Clusters]] = {}
        self.slo = _slo(run)

    def records(self, cell: CellRow) -> list[RequestRecord]:
        if cell.id not in self._recs:
            self._recs[cell.id] = self._read(cell.id)
        return self._recs[cell.id]

    def interval(self, cell: CellRow, metric: Metric) -> u.Interval | None:
        """The figure's interval; a rate's is scaled onto the stored figure (tokens as the server counted
        them, not as chunks carried them)."""
        k = (_ids(cell), metric.name, metric.stat)
        if k not in self._ivs:
            iv = u.interval(self.groups(cell, metric), metric.stat, self._units(cell, metric))
            iv = None if iv is None else iv.scaled(self.scale(cell, metric))
            self._ivs[k] = iv if iv is None or _holds(iv, value_of(cell, metric)) else None
        return self._ivs[k]

    def scale(self, cell: CellRow, metric: Metric) -> float:
        stored = value_of(cell, metric) if metric.name in RATES else None
        value = u.point(self.groups(cell, metric), metric.stat) if stored else None
        return stored / value if stored and value else 1.0

    def _units(self, cell: CellRow, metric: Metric) -> int:
        """What a p99 is taken over (too few: unreliable): the requests, or a job figure's complete jobs."""
        if metric.name in JOBS:
            return sum(len(g) for g in self.groups(cell, metric))
        return int(sum(c.summary.completed or 0 for c in ok_repeats(cell)))

    def groups(self, cell: CellRow, metric: Metric) -> list[list[float] | u.Clusters]:
        """Each ok repeat's samples: per request or per bin from its records, a job figure's per complete job
        from its summary (JobFigures.each: in the order the jobs started)."""
        k = (_ids(cell), metric.name)
        if k not in self._groups:
            self._groups[k] = [g for c in ok_repeats(cell) if (g := self._samples(c, metric))]
        return self._groups[k]

    def _samples(self, c: CellRow, metric: Metric) -> list[float] | u.Clusters:
        if metric.name in JOBS:
            return c.summary.jobs.each(metric.name) if c.summary.jobs is not None else []
        return samples(self.records(c), metric.name, self.slo)


def _holds(iv: u.Interval, stated: float | None) -> bool:
    """The interval contains the figure the cell states (to 0.1 %): not so where the figure is an imported
    file's own, by a definition its records do not give (vLLM's TPOT to the stream's end, say)."""
    if stated is None or stated != stated:
        return True
    slack = 1e-3 * max(abs(stated), 1e-9)
    return iv.lo - slack <= stated <= iv.hi + slack


def _ids(cell: CellRow) -> tuple[int, ...]:
    """A merged cell shares its first repeat's id: key caches by the repeats it stands for."""
    return tuple(c.id for c in cell.repeats) or (cell.id,)


def _slo(run: RunData) -> SLO | None:
    raw = run.spec.get("slo") or (run.spec.get("bench") or {}).get("slo")
    try:
        return SLO(**raw) if isinstance(raw, dict) and raw else None
    except ValueError:
        return None


def launches(c: CellRow) -> list[str | None]:
    """The server launch of each of a cell's ok repeats (None: not recorded)."""
    return [launch_of(r) for r in ok_repeats(c)]


def units(c: CellRow) -> int:
    """How many independent units a cell's ok repeats are: their distinct launches (runs of one launch share
    what it drew, metrics/noise.by_launch), a repeat whose launch is not recorded one of its own."""
    ids = launches(c)
    return len({i for i in ids if i is not None}) + ids.count(None)


def one_launch(a: CellRow, b: CellRow) -> bool:
    """Both cells' ok repeats all ran on one and the same launch: what it drew cancels between them."""
    ids = {*launches(a), *launches(b)}
    return len(ids) == 1 and None not in ids


def between(sides: tuple[tuple[Book, CellRow], tuple[Book, CellRow]], metric: Metric,
            floor: Floor) -> u.Between:
    """The between-run noise a verdict adds: none where both sides' ok repeats span two launches or more
    (their intervals are then the between-repeat ones, `u.combine`); else each side measured on one launch adds
    its floor's tau^2, at the floor's degrees of freedom (the fewest of the two). Where both sides ran on one and
    the same launch, what it drew cancels between them: each repeat is a unit, and only a side measured once
    adds its floor."""
    (_, a), (_, b) = sides
    count: Callable[[CellRow], int] = (lambda c: len(ok_repeats(c))) if one_launch(a, b) else units
    single = [(book, c) for book, c in sides if count(c) < 2]
    if not single:
        return u.Between(source="repeats")
    runs = {book.run.id for book, _ in sides}
    floors = [floor(book.run, c, metric, runs) for book, c in single]
    worst = min(floors, key=lambda f: (f.df, f.source != "default"))
    return u.Between(sum(f.tau ** 2 for f in floors), min(f.df for f in floors), worst.source)


def verdict(a_book: Book, a: CellRow, b_book: Book, b: CellRow, metric: Metric,
            judging: Judging = Judging()) -> u.Comparison | None:
    """Is B faster than A on `metric`? None when either cell is not ok, either figure was marked moved
    (unless --allow-client-lag), or either has no samples. Its interval holds the between-run noise
    (`between`) beside each cell's own."""
    if not all(usable(figure_state_of(c, metric.key), judging.allow_client_lag) for c in (a, b)):
        return None
    ia, ib = a_book.interval(a, metric), b_book.interval(b, metric)
    if ia is None or ib is None:
        return None
    floor = max(u.drift(a_book.groups(a, metric), metric.stat), u.drift(b_book.groups(b, metric), metric.stat))
    noise_ = between(((a_book, a), (b_book, b)), metric, judging.floor)
    return u.verdict(ia, ib, metric.higher_is_better, judging.min_effect, floor, noise_)
