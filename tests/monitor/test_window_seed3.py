"""monitor/window.py at an edge a held-out mutation draw (seed 3) found untested: a counter's increase over the
window reads only the samples from the last one at or before the start to the first one at or after the end; a
fall after those (a driver reload past the window) does not void it."""

from __future__ import annotations

import pytest

from tokenbench.monitor import window as win
from tokenbench.monitor.window import CellWindow

S = 1_000_000_000


@pytest.mark.parametrize("later", [[(4 * S, 2.0)], [(4 * S, 2.0), (5 * S, 1.0)], [(4 * S, 50.0), (5 * S, 0.0)]])
def test_a_fall_after_the_first_sample_past_the_end_does_not_void_the_increase(later):
    series = [(0, 10.0), (1 * S, 20.0), (3 * S, 40.0), *later]
    assert win.counter_increase(series, CellWindow(1 * S, 2 * S)) == pytest.approx(10.0)    # 20 -> 30 (between 20, 40)
    assert win.counter_increase([(0, 10.0), (2 * S, 5.0), *later], CellWindow(1 * S, 2 * S)) is None  # within: void
