"""The ITL percentile bounds cost memory by stalls, not by chunks: once the token log is folded, every gap a
stall (or a buffered read) touched is one weighted entry, and the bound is the one the same gaps listed one
by one give (metrics/health.py `GapDelays`, `rank_bound`)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.metrics.health import rank_bound
from tokenbench.metrics.tally import CAUSES
from tokenbench.metrics.token_log import at_rank

entries = st.lists(st.tuples(st.floats(0, 500, allow_nan=False), st.integers(0, len(CAUSES) - 1),
                             st.integers(0, 50)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(entries=entries, n=st.integers(1, 500), q=st.sampled_from([50, 90, 95, 99]), seed=st.integers(0, 99))
def test_weighted_entries_bound_a_percentile_as_the_gaps_listed_one_by_one(entries, n, q, seed):
    ranks = np.sort(np.random.default_rng(seed).exponential(20.0, n))
    delay = np.array([e[0] for e in entries], np.float64)
    cause = np.array([e[1] for e in entries], np.int64)
    weight = np.array([e[2] for e in entries], np.int64)
    weighted = rank_bound(n, lambda p: at_rank(ranks, p), q, delay, cause, weight)
    listed = rank_bound(n, lambda p: at_rank(ranks, p), q, np.repeat(delay, weight), np.repeat(cause, weight))
    assert weighted.bound == listed.bound
    if listed.cause is not None:
        totals = np.bincount(np.repeat(cause, weight), weights=np.repeat(delay, weight), minlength=len(CAUSES))
        assert totals[CAUSES.index(weighted.cause)] >= totals.max() * (1 - 1e-9)
    else:
        assert weighted.cause is None
