"""A folded TokenLog keeps its stated bounds against the exact figures of the same chunks: ITL mean,
std, min and max exact (to float rounding), percentiles within 2**-(SUB_BITS+1) relative, steady-window
tokens off by at most the tokens of the two edge steps; and its memory stops growing with the chunks."""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.metrics import token_log
from tokenbench.metrics.request import describe
from tokenbench.metrics.token_log import STEP_NS, SUB_BITS, TokenLog, bucket_bounds, bucket_of

BOUND = 2.0 ** -(SUB_BITS + 1)


def requests(seed: int, n: int):
    rng = np.random.default_rng(seed)
    out, t = [], 0
    for _ in range(n):
        k = int(rng.integers(1, 40))
        start = t + int(rng.integers(0, 50_000_000))
        gaps = rng.lognormal(16, 1.2, k - 1).astype(np.int64)        # around 9 ms, heavy-tailed
        times = [start, *(start + np.cumsum(gaps)).tolist()]
        out.append((times, [int(c) for c in rng.integers(1, 4, k)]))
        t = start + 1_000_000
    return out


def exact_gaps(reqs):
    return np.concatenate([np.diff(np.array(times)) for times, _ in reqs if len(times) > 1])


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(50, 400), st.sampled_from([64, 500, 3000]))
def test_folded_figures_keep_their_bounds(seed, n, fold_at):
    reqs = requests(seed, n)
    random.Random(seed).shuffle(reqs)                   # records come as requests finish, not as they began
    saved, token_log.FOLD_CHUNKS = token_log.FOLD_CHUNKS, fold_at
    try:
        log = TokenLog()
        for times, counts in reqs:
            log.add(times, counts)
        got = log.itl()
    finally:
        token_log.FOLD_CHUNKS = saved
    want = describe(exact_gaps(reqs) / 1e6, "itl")
    assert got.keys() == want.keys()
    for k, v in want.items():
        tol = BOUND * abs(v) if k.split("_")[0] in ("median", "p50", "p90", "p95", "p99") else 1e-9 * abs(v)
        assert abs(got[k] - v) <= tol + 1e-12, k
    t = np.concatenate([np.array(x) for x, _ in reqs])
    c = np.concatenate([np.array(y) for _, y in reqs])
    a, b = int(np.percentile(t, 20)), int(np.percentile(t, 80))
    exact = int(c[(t >= a) & (t <= b)].sum())
    edges = int(c[((t >= a - STEP_NS) & (t < a + STEP_NS)) | ((t > b - STEP_NS) & (t <= b + STEP_NS))].sum())
    assert abs(log.tokens_between(a, b) - exact) <= edges


def test_an_unfolded_log_is_exact():
    reqs = requests(1, 30)
    log = TokenLog()
    for times, counts in reqs:
        log.add(times, counts)
    assert not log.folded and log.itl() == describe(exact_gaps(reqs) / 1e6, "itl")


def test_memory_stops_growing_once_folded(monkeypatch):
    monkeypatch.setattr(token_log, "FOLD_CHUNKS", 1000)
    log = TokenLog()
    for times, counts in requests(2, 3000):
        log.add(times, counts)
        assert len(log.t) < 1000 + 40
    assert log.folded and log.hist.nbytes == token_log.BUCKETS * 8


@pytest.mark.parametrize("v", [0, 1, 511, 512, 1023, 1024, 2047, 2048, 10**6, 10**9 + 7, 2**40 - 1, 2**53 + 1])
def test_every_value_lies_in_its_bucket_of_stated_width(v):
    lo, hi = bucket_bounds(bucket_of(np.array([v])))
    assert lo[0] <= v <= hi[0] and hi[0] - lo[0] <= lo[0] * 2.0 ** -SUB_BITS    # below 512: exact
