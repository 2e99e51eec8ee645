"""judge/intervals.py at an edge a held-out mutation draw (seed 3) found untested: an interval holds the stated
figure to 0.1 % of it, and a figure at (or within 1e-9 of) 0 to 0.1 % of 1e-9, 1e-12, and no further."""

from __future__ import annotations

import pytest

from tokenbench.judge.intervals import _holds
from tokenbench.metrics.uncertainty import Interval


@pytest.mark.parametrize(("stated", "lo", "hi", "holds"), [
    (0.0, 0.95e-12, 1.0, True), (0.0, 1.05e-12, 1.0, False), (0.0, -1.0, -1.05e-12, False),
    (0.0, -1.0, -0.95e-12, True), (5e-10, 5e-10 + 0.95e-12, 1.0, True), (5e-10, 5e-10 + 1.05e-12, 1.0, False),
    (100.0, 100.09, 200.0, True), (100.0, 100.11, 200.0, False), (100.0, 50.0, 99.89, False),
    (None, 1.0, 2.0, True), (float("nan"), 1.0, 2.0, True)])
def test_an_interval_holds_the_stated_figure_to_0_1_percent_of_at_least_1e_9(stated, lo, hi, holds):
    assert _holds(Interval(value=(lo + hi) / 2, lo=lo, hi=hi, n=10), stated) is holds
