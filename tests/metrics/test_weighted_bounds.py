"""The ITL percentile bounds cost memory by stalls, not by chunks: once the token log is folded, the gaps a
stall (or an upstream burst) touched are one weighted entry, and they fold to the same `Delays` (how many
samples may be off, the largest delay, each cause's total) as the gaps listed one by one
(metrics/health.py `Delays.weighted`; docs/metrics.md, "Large cells")."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.metrics.health import Delays
from tokenbench.metrics.tally import CAUSES

entries = st.lists(st.tuples(st.floats(0, 500, allow_nan=False), st.integers(0, len(CAUSES) - 1),
                             st.integers(0, 50)), max_size=40)


@settings(max_examples=100, deadline=None)
@given(entries=entries)
def test_weighted_entries_fold_as_the_gaps_listed_one_by_one(entries):
    delay = np.array([e[0] for e in entries], np.float64)
    cause = np.array([e[1] for e in entries], np.int64)
    weight = np.array([e[2] for e in entries], np.int64)
    weighted = Delays.weighted(delay, cause, weight)
    listed = Delays.of(np.repeat(delay, weight), np.repeat(cause, weight))
    assert (weighted.k, weighted.largest) == (listed.k, listed.largest)
    assert np.allclose(weighted.weights, listed.weights, rtol=1e-12, atol=0)
    if listed.cause is None:
        assert weighted.cause is None
    else:           # the same cause, or one whose total ties with it to the last bits of the sums
        assert listed.weights[CAUSES.index(weighted.cause)] >= listed.weights.max() * (1 - 1e-12)
