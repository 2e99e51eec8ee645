"""metrics/tally.py at the edges a held-out mutation draw (seed 3) found untested: a sessions cell counts the
requests sent after its window ended (stored as `outside_requests`) from 0, and they count for their job only;
a stall's off-CPU rest is the process's own work when its other threads ran exactly a quarter of it, and not
when they ran less."""

from __future__ import annotations

import pytest

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import tally as ta

MS = 1_000_000


def _rec(i: int) -> RequestRecord:
    sent = i * 1000 * MS
    return RequestRecord(index=i, phase="measure", input_len=16, output_len=2, intended_ns=sent, sent_ns=sent,
                         end_ns=sent + 30 * MS, status=200, token_times_ns=[sent + 10 * MS, sent + 20 * MS],
                         token_counts=[1, 1], session_id=f"s{i // 2}", turn=i % 2)


@pytest.mark.parametrize("outside", [0, 1, 3])
def test_requests_sent_after_the_window_are_counted_from_0_and_for_their_job_only(outside):
    t = ta.CellTally(sessions=True)
    for i in range(4):
        t.add(_rec(i))
    for i in range(4, 4 + outside):
        t.add(_rec(i), in_window=False)
    assert t.outside == outside and len(t) == 4
    assert sum(len(turns) for turns in t.jobs.jobs.values()) == 4 + outside


@pytest.mark.parametrize(("others_ms", "cause"), [(2.5, "client_cpu"), (2.0, "client_stopped"), (3.0, "client_cpu")])
def test_a_stalls_rest_is_the_processs_own_work_from_a_quarter_of_it_run_by_other_threads(others_ms, cause):
    # lag 11 ms, 1 ms on the CPU, no wait: a rest of 10 ms, held by the process when others ran 2.5 ms or more
    assert ta.attribute(11 * MS, 1 * MS, 0, int(others_ms * MS)) == cause
