"""metrics/noise.py at the edges a held-out mutation draw (seed 3) found untested: a p value that is not a
number is never made a rejection by Holm's adjustment; a look's density is carried on _GRID equal cells of the
continuation region, each point its cell's midpoint with its cell's probability (scipy's normal)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from tokenbench.metrics import noise as n


def test_holm_never_rejects_a_p_value_that_is_not_a_number():
    assert n.holm_adjusted([math.nan]) == [1.0]
    got = n.holm_adjusted([0.001, math.nan, 0.02])
    assert got[1] == 1.0 and got[0] == pytest.approx(0.003) and got[2] <= 1.0


@pytest.mark.parametrize(("start", "step", "bound"), [(0.0, 1.0, 2.0), (0.5, 0.25, 1.5), (-1.0, 2.0, 8.0)])
def test_a_looks_density_is_carried_on_grid_cells_with_their_probability(start, step, bound):
    points, mass = n._carry(np.array([start]), np.array([1.0]), step, bound)
    edges = np.linspace(-bound, bound, n._GRID + 1)
    assert len(points) == len(mass) == n._GRID
    assert points == pytest.approx((edges[1:] + edges[:-1]) / 2, abs=1e-12)
    want = np.diff(stats.norm.cdf(edges, loc=start, scale=math.sqrt(step)))
    assert mass == pytest.approx(want, abs=3e-7)                  # the erfc fit: below 1.2e-7 of each cdf
