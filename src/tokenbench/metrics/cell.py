"""A measured cell finished: `finish` is the one function that completes a cell's summary and gives its
verdict. Everything it needs arrives typed: what the load runner measured (`Measured`: the tally, the
client's health, the sends' slot waits, how far a stopped cell got) with the groups other stages made (the
workload's facts, a sessions cell's figures), and what the verdict tolerates (`VerdictPolicy`). It computes
the figures from the tally (metrics/summary.py), the client's health per figure (metrics/health.py), the
verdict (metrics/verdict.py), and puts the verdict's marks in the summary. Formulas: docs/metrics.md."""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.health import figure_health
from tokenbench.metrics.summary import of_tally, send_rates
from tokenbench.metrics.summary_groups import ClientHealth, FigureHealth, Group, Interruption
from tokenbench.metrics.tally import CellTally, SlotWaits
from tokenbench.metrics.verdict import Verdict, VerdictPolicy, cell_verdict, interrupted
from tokenbench.spec.bench import Load


@dataclass(frozen=True)
class Measured:
    """What a cell's measured phase left: its tally, the load and the lengths it asked, the load runner's
    client health (with its stalls) and slot waits, the arrival seed, the requests planned, and whether
    the user stopped it (`cut`: requests cut off by the stop); `groups`: what other stages made of it
    (the workload builder's facts, a sessions cell's figures), placed in the summary as they are."""

    tally: CellTally
    load: Load
    lengths: tuple[int, int]             # input and output length asked (datasets: the means asked)
    health: ClientHealth
    slot_waits: SlotWaits
    arrival_seed: int | None = None
    planned: int | None = None           # measured requests planned (None: a duration cell)
    stopped: bool = False                # stopped by the user (Ctrl-C)
    cut: int = 0                         # measured requests cut off by the stop
    groups: tuple[Group | None, ...] = ()


def finish(m: Measured, policy: VerdictPolicy) -> tuple[CellSummary, Verdict]:
    """The cell's summary (the tally's figures and every group) and its verdict, the marks in the summary."""
    t = m.tally
    summary = of_tally(t, m.load, *m.lengths)
    one_loop = (m.health.client_workers or 1) <= 1            # every stamp taken by the loop the stalls held
    rates = send_rates(t.send_times(), m.load, m.slot_waits, m.arrival_seed)    # open loop: rates sent
    summary = summary.with_(m.health, rates, figure_health(summary, t, m.health.stalls, one_loop), *m.groups)
    verdict = cell_verdict(t.outcomes, summary, policy, m.planned)
    if m.stopped:
        summary = summary.with_(Interruption(planned=m.planned, cut=m.cut))
        verdict = interrupted(summary, t.outcomes.n)
    return _marked(summary, verdict), verdict


def _marked(summary: CellSummary, verdict: Verdict) -> CellSummary:
    """The summary with the verdict's marks (kept in the stored summary, read by the report)."""
    if verdict.marks:
        figures = summary.figures or FigureHealth()
        summary = summary.with_(figures.model_copy(update={"client_marks": dict(verdict.marks)}))
    return summary.model_copy(update={"server_unreachable": True}) if verdict.unreachable else summary
