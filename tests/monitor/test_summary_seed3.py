"""monitor/summary.py at an edge a held-out mutation draw (seed 3) found untested: a cumulative counter that
stays put between two samples rose by 0 there (only a fall is a restart, counted from 0)."""

from __future__ import annotations

import pytest

from tokenbench.monitor.samples import Sample
from tokenbench.monitor.summary import summarize

S = 1_000_000_000


@pytest.mark.parametrize(("values", "want"), [([5, 5, 8], 3), ([5, 8, 8], 3), ([4, 4, 4], 0), ([5, 2, 2, 6], 2 + 4),
                                              ([0, 0, 3], 3)])
def test_a_counter_that_stays_put_rose_by_0_and_one_that_fell_restarted(values, want):
    samples = [Sample(t * S, "server", "preemptions", float(v), {"engine": "vllm"}) for t, v in enumerate(values)]
    assert summarize(samples).server_preemptions == want
