"""Open-loop fidelity per request (docs/metrics.md, "Send rates"): each send against its own intended time,
the lateness figures, the gaps' shape sent against scheduled, and the verdict that the sends left the
schedule; tiny ns fixtures."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tokenbench.metrics.summary import schedule_fidelity, send_rates
from tokenbench.metrics.tally import SendTimes, SlotWaits
from tokenbench.spec.bench import Load

MS = 1_000_000


def sends(late_ms: list[float], gap_ms: float = 50.0) -> SendTimes:
    intended = np.arange(len(late_ms), dtype=np.int64) * int(gap_ms * MS)
    wrote = intended + (np.array(late_ms) * MS).astype(np.int64)
    return SendTimes(intended, wrote, np.zeros(len(late_ms), np.int64))


def test_a_schedule_kept_to_within_a_millisecond_is_kept():
    rng = random.Random(1)
    r = send_rates(sends([rng.uniform(0.1, 0.9) for _ in range(200)]), Load(request_rate=20, arrival="constant",
                   num_prompts=200), SlotWaits())
    assert r is not None and r.send_schedule_off is None and r.send_late_share == 0.0
    assert r.send_late_tolerance_ms == pytest.approx(2.5) and r.send_late_max_ms < 1.0
    assert r.send_gap_cv_scheduled == pytest.approx(0.0) and r.send_gap_cv_sent < 0.05


def test_sends_held_back_by_stops_leave_the_schedule_though_the_rate_holds():
    """A stop of 80-150 ms every 20 sends: the sends due meanwhile go out together after it; the mean rate is
    still the asked one, the schedule is not."""
    late = [0.3] * 200
    for start in range(10, 200, 20):
        stop = 80 + 7 * ((start // 20) % 10)
        for k in range(start, start + 3):
            late[k] = stop - (k - start) * 50 if stop > (k - start) * 50 else 0.3
    r = send_rates(sends(late), Load(request_rate=20, arrival="constant", num_prompts=200), SlotWaits())
    assert r is not None and r.send_rate_off is None                      # the rate alone looks fine
    assert r.send_schedule_off == "client" and r.send_late_max_ms == pytest.approx(143, abs=1)
    assert r.send_late_p99_ms > r.send_late_tolerance_ms and r.send_gap_cv_sent > 0.3


def test_a_poisson_schedule_is_judged_against_its_own_gaps():
    """Poisson gaps have a CV near 1 as scheduled: sent on time, they keep it; the tolerance follows the mean gap."""
    rng = np.random.default_rng(3)
    intended = np.cumsum(rng.exponential(10 * MS, 500)).astype(np.int64)
    t = SendTimes(intended, intended + 200_000, np.zeros(500, np.int64))
    f = schedule_fidelity(t)
    assert f["send_gap_cv_scheduled"] == pytest.approx(f["send_gap_cv_sent"], abs=1e-3)
    assert f["send_late_tolerance_ms"] == pytest.approx(1.0)             # 5 % of 10 ms is under the 1 ms floor
