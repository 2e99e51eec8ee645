"""A series' history judged by value (judge/history.py): the band is a prediction interval for a new launch
from the earlier launches (geometric mean x exp(+- t s sqrt(1 + 1/k)), Student's t at k - 1, scipy), learned
from at least 3 launches and the most recent 30 runs, runs of one launch counted once; a point is within,
worse or better by its figure's direction; a moved figure or a failed cell is shown, not judged, and not
learned from."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import scipy.stats as st

from tokenbench.judge.history import band, track
from tokenbench.metrics import noise
from tokenbench.metrics.cell_summary import CellSummary, Metric
from tokenbench.metrics.summary_groups import FigureHealth, FigureMark, LaunchFacts
from tokenbench.store.rows import CellRow

TPOT, OUT = Metric("tpot", "mean"), Metric("output_throughput")


def test_the_band_is_a_prediction_interval_for_a_new_launch():
    values = [10.0, 10.4, 9.8, 10.1, 10.3]
    got = band([noise.RunFigure(v) for v in values], 0.05)
    logs = [math.log(v) for v in values]
    mean, s, k = sum(logs) / 5, st.tstd(logs), 5
    half = st.t.ppf(0.975, k - 1) * s * math.sqrt(1 + 1 / k)
    assert got is not None and (got.lo, got.hi) == (pytest.approx(math.exp(mean - half), rel=1e-12),
                                                    pytest.approx(math.exp(mean + half), rel=1e-12))
    assert got.center == pytest.approx(math.exp(mean)) and (got.noise.df, got.noise.units) == (4, 5)
    assert band([noise.RunFigure(v) for v in values[:2]], 0.05) is None              # two launches: none yet
    # runs of one launch count once: three launches of two runs each are three units, df 2
    paired = [noise.RunFigure(v, 0.0, f"L{k // 2}") for k, v in enumerate((10.0, 10.2, 9.9, 9.7, 10.5, 10.3))]
    assert band(paired, 0.05).noise.units == 3 and band(paired, 0.05).noise.df == 2
    # only the most recent 30 runs
    many = [noise.RunFigure(100.0 if k < 10 else 10.0 + (k % 3) * 0.1) for k in range(40)]
    assert band(many, 0.05).hi < 11


def cell(value: float, launch: str, *, status: str = "ok", moved: bool = False) -> CellRow:
    marks = {k: FigureMark(cause="host_contention", bound=5.0, tolerance=0.1)
             for k in ("mean_tpot_ms", "output_throughput")} if moved else None
    summary = CellSummary(mean_tpot_ms=value, output_throughput=1000 / value).with_(
        LaunchFacts(id=launch), FigureHealth(client_marks=marks) if moved else None)
    return CellRow(key="16:12/c=4", input_len=16, output_len=12, status=status, summary=summary, concurrency=4)


def run(k: int) -> SimpleNamespace:
    return SimpleNamespace(id=f"r{k}", created_at=f"2026-12-0{k}T00:00:00+00:00", spec={},
                           config=lambda name: SimpleNamespace(version="b1"))


def test_each_point_against_the_band_of_its_clean_predecessors():
    values = [10.0, 10.2, 9.9, 30.0, 10.1, 10.0, 13.0, 5.0]
    cells = [cell(v, f"L{k}", moved=(k == 3)) for k, v in enumerate(values)]
    cells[5] = cell(10.0, "L5", status="failed")
    points = track([(run(k), c) for k, c in enumerate(cells)], TPOT, 0.05)
    assert [p.state for p in points] == ["learning", "learning", "learning", "moved", "within", "not_ok",
                                         "worse", "better"]
    assert points[3].value == 30.0 and points[3].band is not None          # shown, with the band it would meet
    assert points[6].band == band([noise.RunFigure(v) for v in (10.0, 10.2, 9.9, 10.1)], 0.05)
    # a point outside its band is a measurement all the same: the next band learns from it too
    assert points[7].band == band([noise.RunFigure(v) for v in (10.0, 10.2, 9.9, 10.1, 13.0)], 0.05)
    # a throughput: higher is better
    tp = track([(run(k), c) for k, c in enumerate(cells)], OUT, 0.05)
    assert [p.state for p in tp][6:] == ["worse", "better"]               # 1000/13 is lower: worse
    assert points[0].version == "b1" and points[0].launch == "L0" and points[0].run == "r0"
