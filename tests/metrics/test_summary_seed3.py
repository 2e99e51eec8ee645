"""metrics/summary.py at the edges a held-out mutation draw (seed 3) found untested: the CV of the gaps between
sends is defined only over two gaps or more with a mean above 0; the mean of repeats keeps the first repeat's
order for the figures no field declares (an import's own keys), as it keeps that repeat's timeslices."""

from __future__ import annotations

import numpy as np
import pytest

from tokenbench.metrics import summary as sm
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.tally import SendTimes

MS, S = 1_000_000, 1_000_000_000


def _sends(intended: list[int], wrote: list[int]) -> SendTimes:
    return SendTimes(np.asarray(intended, np.int64), np.asarray(wrote, np.int64), np.zeros(len(intended), np.int64))


@pytest.mark.parametrize("times", [[0, S], [5 * S, 2 * S], [0, 0, 0], [7, 7, 7, 7]])
def test_a_gap_cv_needs_two_gaps_with_a_mean_above_0(times):
    got = sm.schedule_fidelity(_sends(times, times))
    assert got["send_gap_cv_scheduled"] is None and got["send_gap_cv_sent"] is None


def test_a_gap_cv_over_two_gaps_is_their_std_over_their_mean():
    got = sm.schedule_fidelity(_sends([0, S, 2 * S], [0, S, 4 * S]))
    assert got["send_gap_cv_scheduled"] == 0.0
    assert got["send_gap_cv_sent"] == pytest.approx(np.std([1.0, 3.0]) / 2.0)           # 1 / 2


def test_the_mean_of_repeats_keeps_the_first_repeats_order_of_undeclared_figures():
    a = CellSummary.from_dict({"completed": 4, "peer_x": 1.0, "peer_y": 10.0})
    b = CellSummary.from_dict({"completed": 6, "peer_y": 30.0, "peer_x": 3.0})
    got = sm.mean_of_repeats([a, b], [a, b])
    assert got.completed == 5 and list(got.undeclared.items()) == [("peer_x", 2.0), ("peer_y", 20.0)]
    back = sm.mean_of_repeats([b, a], [b, a])
    assert list(back.undeclared.items()) == [("peer_y", 20.0), ("peer_x", 2.0)]
