"""A folded TokenLog against references (docs/metrics.md, "Large cells"): tokens per 10 ms step of arrival time,
counted whole where a window touches a step (`tokens_near`) and in proportion to the overlap at a window's
edges (`tokens_between`), none outside the steps or in an empty window; the gap at a fractional rank read from
the histogram within its stated error; the running moments exact where the gaps are (a constant gap's spread
is exactly 0)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.metrics import token_log
from tokenbench.metrics.token_log import SUB_BITS, TokenLog

STEP = 10_000_000                                  # 10 ms, as docs/metrics.md states it
BOUND = 2.0 ** -(SUB_BITS + 1)


def folded(requests: list[tuple[list[int], list[int]]], fold_at: int = 1) -> TokenLog:
    saved, token_log.FOLD_CHUNKS = token_log.FOLD_CHUNKS, fold_at
    try:
        log = TokenLog()
        for times, counts in requests:
            log.add(times, counts)
        log._fold()
        return log
    finally:
        token_log.FOLD_CHUNKS = saved


def _steps(tokens: list[tuple[int, int]]) -> tuple[int, dict[int, int]]:
    t0 = min(t for t, _ in tokens)
    per: dict[int, int] = {}
    for t, c in tokens:
        per[(t - t0) // STEP] = per.get((t - t0) // STEP, 0) + c
    return t0, per


def _between(tokens: list[tuple[int, int]], a: int, b: int) -> float:
    t0, per = _steps(tokens)
    total = 0.0
    for k, c in per.items():
        start = t0 + k * STEP
        overlap = (min(start + STEP, b) - max(start, a)) / STEP
        total += c * min(max(overlap, 0.0), 1.0)
    return total


def _near(tokens: list[tuple[int, int]], a: int, b: int) -> int:
    t0, per = _steps(tokens)
    return sum(c for k, c in per.items() if t0 + k * STEP <= b and t0 + (k + 1) * STEP > a)


requests = st.lists(st.lists(st.tuples(st.integers(0, 200_000_000), st.integers(1, 3)), min_size=1, max_size=6)
                    .map(sorted), min_size=1, max_size=6)


@settings(deadline=None)
@given(requests, st.integers(-20_000_000, 220_000_000), st.integers(0, 100_000_000))
def test_tokens_in_a_window_count_each_10_ms_step_in_proportion_to_its_overlap(reqs, a, width):
    reqs = sorted(reqs)                    # the first batch holds the earliest token: the steps start there
    log = folded([([t for t, _ in r], [c for _, c in r]) for r in reqs])
    tokens = [p for r in reqs for p in r]
    b = a + width
    assert log.tokens_between(a, b) == pytest.approx(_between(tokens, a, b), abs=1e-9)
    t0 = min(t for t, _ in tokens)
    assert log.tokens_near(a, b) == (_near(tokens, a, b) if b >= t0 else 0)


def test_a_window_outside_the_steps_or_empty_holds_no_token():
    log = folded([([100 * STEP, 100 * STEP + 5], [2, 3])])
    assert log.tokens_between(0, 99 * STEP) == 0.0 and log.tokens_between(200 * STEP, 300 * STEP) == 0.0
    assert log.tokens_between(100 * STEP + 4, 100 * STEP + 2) == 0.0
    assert log.tokens_between(100 * STEP, 101 * STEP) == 5.0
    assert log.tokens_between(100 * STEP + STEP // 2, 101 * STEP) == 2.5
    assert log.tokens_near(0, 99 * STEP) == 0 and log.tokens_near(100 * STEP + 9_999_999, 100 * STEP + 9_999_999) == 5


def test_a_later_batch_reaching_back_in_time_keeps_its_steps():
    saved, token_log.FOLD_CHUNKS = token_log.FOLD_CHUNKS, 2
    try:
        log = TokenLog()
        log.add([50 * STEP, 50 * STEP + 1], [1, 1])          # folded: steps from 50 x 10 ms
        log.add([20 * STEP + 3, 21 * STEP], [4, 1])            # earlier tokens, folded after
    finally:
        token_log.FOLD_CHUNKS = saved
    assert log.tokens_between(20 * STEP, 21 * STEP - 1) == pytest.approx(4 * (STEP - 1) / STEP)
    assert log.tokens_near(20 * STEP, 20 * STEP) == 4 and log.tokens_near(50 * STEP, 50 * STEP) == 2
    assert log.tokens_near(0, 10**12) == 7


@settings(deadline=None)
@given(st.lists(st.lists(st.integers(1, 10**9), min_size=2, max_size=12), min_size=1, max_size=8),
       st.floats(0.0, 1.0))
def test_the_gap_at_a_rank_is_read_from_the_histogram_within_its_error(gaps, share):
    reqs = [(np.cumsum([0, *g[1:]]).tolist(), [1] * len(g)) for g in gaps]
    exact = np.sort(np.concatenate([np.diff(t) for t, _ in reqs])) / 1e6
    log = folded(reqs, fold_at=3)
    n, at = log.gap_ranks()
    assert n == len(exact)
    pos = share * (n - 1)
    want = token_log.at_rank(exact, pos)
    assert abs(at(pos) - want) <= BOUND * want + 1e-12


def test_a_constant_gap_has_exactly_its_mean_and_no_spread_once_folded():
    reqs = [([k * 7_000_000 + i * 1_000_000 for k in range(5)], [1] * 5) for i in range(40)]
    log = folded(reqs, fold_at=7)
    got = log.itl()
    assert got["mean_itl_ms"] == 7.0 and got["std_itl_ms"] == 0.0
    assert got["min_itl_ms"] == 7.0 and got["max_itl_ms"] == 7.0 and got["p99_itl_ms"] == pytest.approx(7.0)
    assert log.moments[0] == 160


def test_one_folded_batch_has_exactly_its_own_mean():
    """Chunks read together share a stamp: gaps of 0 and 1 ns, a mean of a third of a ns, exactly numpy's."""
    log = folded([([0, 0, 0, 1], [1, 1, 1, 1])], fold_at=10)
    assert log.moments[1] == float(np.mean([0, 0, 1])) and log.itl()["mean_itl_ms"] == float(np.mean([0, 0, 1])) / 1e6


def test_a_rank_outside_the_samples_has_no_value():
    """Above the last rank there is no value (+inf), below the first none either (-inf): a percentile bound then
    reads as unbounded on that side, never as the nearest sample."""
    x = np.array([1.0, 2.0, 4.0])
    assert token_log.at_rank(x, -0.1) == -np.inf and token_log.at_rank(x, 2.1) == np.inf
    assert token_log.at_rank(x, 0.0) == 1.0 and token_log.at_rank(x, 2.0) == 4.0 and token_log.at_rank(x, 1.5) == 3.0
    n, at = folded([([0, 1_000_000, 3_000_000, 7_000_000], [1, 1, 1, 1])], fold_at=2).gap_ranks()   # the same once folded
    assert n == 3 and at(-0.1) == -np.inf and at(2.1) == np.inf and at(3.0) == np.inf
    assert at(0.0) == pytest.approx(1.0, rel=BOUND) and at(2.0) == pytest.approx(4.0, rel=BOUND)
