"""The runner: absolute schedule, warnings once, failures carried on, never blocks asyncio.

How late a tick may start is judged against what this process waited for a CPU meanwhile
(tests/contention.py): a busy machine delays the sampling thread, and nothing here can prevent that."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.contention import Waited
from tokenbench.errors import MeasurementError, UsageError
from tokenbench.monitor.runner import Monitor, next_index
from tokenbench.monitor.samplers import Availability
from tokenbench.monitor.samples import Sample

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test

MS = 1_000_000


class FakeSampler:
    def __init__(self, name="fake", busy_s=0.0, available=True, fail=None):
        self.name = name
        self.busy_s = busy_s
        self._available = available
        self.fail = fail
        self.calls = 0
        self.spans: list[tuple[int, int]] = []       # (start, end) of every sample() call

    def available(self):
        return Availability(self._available, "" if self._available else "no such tool")

    def sample(self):
        self.calls += 1
        start = time.perf_counter_ns()
        if self.busy_s:
            time.sleep(self.busy_s)
        self.spans.append((start, time.perf_counter_ns()))
        if self.fail is not None:
            raise self.fail
        return [Sample(time.perf_counter_ns(), "host", "calls", float(self.calls))]


def until(done, timeout_s: float = 30.0) -> None:
    """Wait for a condition (the deadline only stops a broken test; it is no bound on timing)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_next_index_follows_the_grid_and_skips_missed_ticks():
    assert next_index(t0_ns=0, interval_ns=100, k=0, now_ns=30) == 1
    assert next_index(t0_ns=0, interval_ns=100, k=4, now_ns=499) == 5
    assert next_index(t0_ns=0, interval_ns=100, k=0, now_ns=250) == 3   # ticks 1 and 2 missed
    assert next_index(t0_ns=1000, interval_ns=100, k=2, now_ns=1200) == 3


def test_ticks_are_due_on_an_absolute_grid_without_drift():
    interval_ns = 50 * MS
    monitor = Monitor([FakeSampler(busy_s=0.02)], interval_s=0.05, final_sample=False)
    with Waited() as waited, monitor:
        time.sleep(0.62)
    dues = [due for due, _ in monitor.ticks]
    assert len(dues) + monitor.skipped_ticks >= 8
    assert all((due - dues[0]) % interval_ns == 0 for due in dues)
    # consecutive on the grid, but for ticks skipped because the thread ran late
    assert (dues[-1] - dues[0]) // interval_ns == len(dues) - 1 + monitor.skipped_ticks
    # cumulative sleep(interval) after 20 ms of work would start tick k 20*k ms late
    lateness = sorted(started - due for due, started in monitor.ticks)
    slack = waited.ms * MS
    assert lateness[len(lateness) // 2] < 10 * MS + slack and lateness[-1] < 40 * MS + slack
    # a tick is skipped only when the thread ran 30 ms behind (50 ms ticks, 20 ms of work): only a wait
    # for a CPU makes it (10 ms: the lateness a quiet machine shows)
    assert monitor.skipped_ticks == 0 or waited.ms >= 30 - 10


def test_a_sampler_slower_than_the_interval_skips_ticks_but_stays_on_the_grid():
    monitor = Monitor([FakeSampler(busy_s=0.12)], interval_s=0.05, final_sample=False)
    with monitor:
        time.sleep(0.5)
    dues = [due for due, _ in monitor.ticks]
    assert monitor.skipped_ticks >= 3
    assert all((due - dues[0]) % (50 * MS) == 0 for due in dues)


def test_stop_returns_all_samples_including_a_final_one():
    sampler = FakeSampler()
    monitor = Monitor([sampler], interval_s=0.05)
    monitor.start()
    time.sleep(0.12)
    during = monitor.snapshot()
    samples = monitor.stop()
    assert len(samples) == len(monitor.ticks) + 1 == sampler.calls
    assert samples[: len(during)] == during
    assert [s.t_ns for s in samples] == sorted(s.t_ns for s in samples)


def test_unavailable_sampler_is_reported_once_and_left_out():
    warnings: list[str] = []
    missing = FakeSampler("npu-smi", available=False)
    with Monitor([missing, FakeSampler()], interval_s=0.02, on_warning=warnings.append):
        time.sleep(0.1)
    assert warnings == ["monitor: npu-smi unavailable (no such tool); continuing without it"]
    assert missing.calls == 0


def test_failing_sampler_is_reported_once_retried_and_counted():
    warnings: list[str] = []
    failing = FakeSampler("nvidia-smi", fail=MeasurementError("nvidia-smi exited with 9", "run it by hand"))
    monitor = Monitor([failing, FakeSampler()], interval_s=0.02, on_warning=warnings.append)
    with monitor:
        until(lambda: failing.calls >= 3)
    assert failing.calls >= 3
    assert warnings[0] == ("monitor: nvidia-smi failed: nvidia-smi exited with 9 -- run it by hand; "
                           "still trying every tick")
    assert warnings[1:] == [f"monitor: nvidia-smi failed {failing.calls} times in total"]
    assert {s.name for s in monitor.snapshot()} == {"calls"}


def test_an_unexpected_error_in_the_thread_reaches_the_caller():
    monitor = Monitor([FakeSampler(fail=RuntimeError("bug in a sampler"))], interval_s=0.02)
    monitor.start()
    time.sleep(0.05)
    with pytest.raises(RuntimeError, match="bug in a sampler"):
        monitor.stop()


def test_bad_use_is_a_usage_error():
    with pytest.raises(UsageError, match="interval must be positive"):
        Monitor([], interval_s=0)
    monitor = Monitor([], interval_s=0.05).start()
    with pytest.raises(UsageError, match="already running"):
        monitor.start()
    assert monitor.stop() == []


def test_the_asyncio_loop_keeps_its_pace_while_sampling_blocks():
    async def ticker() -> float:
        worst = 0.0
        for _ in range(30):
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            worst = max(worst, time.perf_counter() - before - 0.01)
        return worst

    with Waited() as waited, Monitor([FakeSampler(busy_s=0.2)], interval_s=0.05):
        worst = asyncio.run(ticker())
    assert worst < 0.05 + waited.ms / 1e3               # blocking would show 0.2 s


def test_a_scrape_the_server_pays_for_keeps_its_share_of_the_time():
    """A sampler marked on_server that takes 20 ms is not repeated for 20 ms / share; a host sampler on
    the same ticks is taken every tick; the final sample is never left out."""
    server, host = FakeSampler("server", busy_s=0.02), FakeSampler("host")
    server.on_server = True
    monitor = Monitor([server, host], interval_s=0.05, max_server_share=0.1)   # >= 200 ms between scrapes
    with Waited() as waited, monitor:
        until(lambda: server.calls >= 3 and monitor.throttled.get("server", 0) >= 6)
    assert host.calls == len(monitor.ticks) + 1
    # each scrape but the final one waits 10 x as long as the one before it took (share 0.1), and is
    # taken at the first tick after that (the runner times a scrape a little longer than the sampler
    # does: a wait for a CPU between the two clocks can lengthen it, and the next tick start, by that wait)
    scrapes, slack = server.spans[:-1], waited.ms * MS + 5 * MS
    for a, b in zip(scrapes, scrapes[1:], strict=False):
        assert 200 * MS <= 10 * (a[1] - a[0]) <= b[0] - a[0] <= 10 * (a[1] - a[0] + slack) + 50 * MS + slack
    assert server.calls + monitor.throttled["server"] == len(monitor.ticks) + 1
