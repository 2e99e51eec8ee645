"""judge/frontier.py at an edge a held-out mutation draw (seed 4) found untested: a point whose TPOT and output
throughput are both moved by marks takes TPOT's state, the first of the two, not the last."""

from __future__ import annotations

from tokenbench.judge import frontier as fr
from tokenbench.judge.cells import figure_state_of
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import FigureHealth, FigureMark
from tokenbench.store.rows import CellRow


def test_a_point_moved_on_tpot_and_throughput_takes_tpots_state():
    marks = {"mean_tpot_ms": FigureMark(cause="host_contention", bound=9.0, tolerance=1.0),
             "output_throughput": FigureMark(cause="client_cpu", bound=30.0, tolerance=2.0)}
    cell = CellRow(key="k", input_len=16, output_len=8, status="ok",
                   summary=CellSummary().with_(FigureHealth(client_marks=marks)), concurrency=4)
    p = fr.Point(owner="o", cell=cell, devices=1, per_user=fr.Estimate(1.0), per_device=fr.Estimate(1.0))
    tpot, out = figure_state_of(cell, "mean_tpot_ms"), figure_state_of(cell, "output_throughput")
    assert tpot != out and p.state == tpot and not p.ok
