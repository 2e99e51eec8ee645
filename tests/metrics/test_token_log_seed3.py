"""metrics/token_log.py at an edge a held-out mutation draw (seed 3) found untested: before any fold,
`tokens_near(a, b)` counts exactly the tokens that arrived in the closed interval [a, b], both ends included."""

from __future__ import annotations

import pytest

from tokenbench.metrics.token_log import TokenLog


@pytest.mark.parametrize(("a", "b", "want"), [(100, 300, 1 + 2 + 4), (101, 299, 2), (100, 100, 1), (300, 300, 4),
                                              (0, 99, 0), (301, 10_000, 8), (0, 10_000, 15)])
def test_tokens_near_before_a_fold_are_those_in_the_closed_interval(a, b, want):
    log = TokenLog()
    log.add([100, 200, 300], [1, 2, 4])
    log.add([400], [8])
    assert not log.folded and log.tokens_near(a, b) == want
    assert log.tokens_between(a, b) == want
