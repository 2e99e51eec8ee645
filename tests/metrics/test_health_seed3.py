"""metrics/health.py at an edge a held-out mutation draw (seed 3) found untested: a request read whole in one
burst (no pace) is a stall's when the stall held the loop at least half the time since the request's read before,
exactly half included."""

from __future__ import annotations

import numpy as np
import pytest

from tokenbench.metrics import health


@pytest.mark.parametrize(("stall_start", "stalls"), [(50, True), (49, True), (51, False), (100, False)])
def test_a_whole_request_is_the_stalls_from_half_its_wait_held(stall_start, stalls):
    # one stall due at 60 ns, its window ends at 1000: the burst at 100 may be late by 100 - stall_start;
    # the request's read before was at 0, so the stall held 100 - stall_start of its 100 ns wait
    win = health.Windows(np.array([stall_start]), np.array([60]), np.array([1000]), np.array([0]))
    burst = {k: np.array([v], np.int64) for k, v in (("stamp", 100), ("prev", 0), ("pace", 0), ("chunks", 5))}
    assert health._stalled(burst, win).tolist() == [stalls]
