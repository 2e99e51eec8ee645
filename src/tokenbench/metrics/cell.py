"""A measured cell finished: `finish` is the one function that completes a cell's summary and gives its
verdict. Everything it needs arrives typed: what the client measured (`Measured`: the tally, the client's
health, the sends' slot waits, how far a stopped cell got, and the groups other stages made of it: the
workload's facts, a sessions cell's figures), what the server and the cell's monitor said (`ServerSide`:
the monitor's figures and samples, the server's counters, whether the server died), and what the verdict
tolerates (`VerdictPolicy`). It computes the figures from the tally (metrics/summary.py), the client's
health per figure (metrics/health.py), the server's counters group (metrics/server.py) and the verdict
(metrics/verdict.py), and puts the verdict's marks in the summary. Formulas: docs/metrics.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.health import Delivery, figure_health
from tokenbench.metrics.server import Readings, counters
from tokenbench.metrics.summary import of_tally, on_schedule, send_rates
from tokenbench.metrics.summary_groups import ClientHealth, FigureHealth, Group, Interruption, MonitorFigures
from tokenbench.metrics.tally import CellTally, SlotWaits
from tokenbench.metrics.verdict import Verdict, VerdictPolicy, cell_verdict, interrupted, server_gone
from tokenbench.spec.bench import Load


@dataclass(frozen=True, kw_only=True)
class Measured:
    """What a cell's measured phase left on the client: its tally, the load and the lengths it asked, the
    load runner's client health (with its stalls) and slot waits, the arrival seed, the requests planned,
    the measured window, and whether the user stopped it (`cut`: requests cut off by the stop);
    `groups`: what other stages made of it (the workload builder's facts, a sessions cell's figures)."""

    tally: CellTally
    load: Load
    lengths: tuple[int, int]             # input and output length asked (datasets: the means asked)
    health: ClientHealth
    slot_waits: SlotWaits = field(default_factory=SlotWaits)
    arrival_seed: int | None = None
    planned: int | None = None           # measured requests planned (None: a duration cell)
    window: tuple[int | None, int | None] = (None, None)   # the first measured send, the last measured byte
    stopped: bool = False                # stopped by the user (Ctrl-C)
    cut: int = 0                         # measured requests cut off by the stop
    groups: tuple[Group | None, ...] = ()
    delivery: Delivery = Delivery()      # the server's own account of its writes, a declared proxy


def _alive() -> str | None:
    return None


@dataclass(frozen=True)
class ServerSide:
    """What the server and the cell's monitor said (study/monitoring.py): the monitor's figures over the
    cell and its samples (t_ns, name, value: placed in the timeslices), the server's counters and settings,
    the groups made of what else the server said, and what became of the server (`death`, asked only of a cell that did not end ok; `ours`: this run
    deployed it, so a death is relaunched)."""

    monitor: MonitorFigures | None = None
    samples: tuple[tuple[int, str, float], ...] = ()
    readings: Readings = field(default_factory=Readings)
    groups: tuple[Group | None, ...] = ()    # the server's other groups (its request-time means, its spans' ledger)
    death: Callable[[], str | None] = _alive
    ours: bool = False


def finish(m: Measured, server: ServerSide, policy: VerdictPolicy) -> tuple[CellSummary, Verdict]:
    """The cell's summary (the tally's figures and every group) and its verdict, the marks in the summary."""
    summary = _figures(m, server)
    verdict = cell_verdict(m.tally.outcomes, summary, policy, m.planned)
    if m.stopped:
        summary = summary.with_(Interruption(planned=m.planned, cut=m.cut))
        verdict = interrupted(summary, m.tally.outcomes.n)
    elif verdict.status != "ok":
        verdict = server_gone(verdict, server.death(), server.ours)
    return _marked(summary, verdict), verdict


def _figures(m: Measured, server: ServerSide) -> CellSummary:
    """The tally's figures with the client's groups, the per-figure bounds and the server's groups."""
    t = m.tally
    summary = of_tally(t, m.load, *m.lengths)
    one_loop = (m.health.client_workers or 1) <= 1            # every stamp taken by the loop the stalls held
    rates = send_rates(t.send_times(), m.load, m.slot_waits, m.arrival_seed) if on_schedule(m.load) else None
    summary = summary.with_(m.health, rates, figure_health(summary, t, m.health.stalls, one_loop, m.delivery), *m.groups)
    fill, group = counters(server.readings, summary.cache_hit_rate)
    slices = summary.slices
    if slices is not None and server.monitor is not None:     # the monitor's samples per slice
        slices = slices.with_monitor(server.samples)
    return summary.model_copy(update=fill).with_(group, server.monitor, slices, *server.groups)


def _marked(summary: CellSummary, verdict: Verdict) -> CellSummary:
    """The summary with the verdict's marks (kept in the stored summary, read by the report)."""
    if verdict.marks:
        figures = summary.figures or FigureHealth()
        summary = summary.with_(figures.model_copy(update={"client_marks": dict(verdict.marks)}))
    gone = verdict.unreachable or verdict.died          # cut short: a resume (and a capacity search) measures it again
    return summary.model_copy(update={"server_unreachable": True}) if gone else summary
