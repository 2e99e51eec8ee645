"""The runner: absolute schedule, warnings once, failures carried on, never blocks asyncio."""

from __future__ import annotations

import asyncio
import time

import pytest

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

    def available(self):
        return Availability(self._available, "" if self._available else "no such tool")

    def sample(self):
        self.calls += 1
        if self.busy_s:
            time.sleep(self.busy_s)
        if self.fail is not None:
            raise self.fail
        return [Sample(time.perf_counter_ns(), "host", "calls", float(self.calls))]


def test_next_index_follows_the_grid_and_skips_missed_ticks():
    assert next_index(t0_ns=0, interval_ns=100, k=0, now_ns=30) == 1
    assert next_index(t0_ns=0, interval_ns=100, k=4, now_ns=499) == 5
    assert next_index(t0_ns=0, interval_ns=100, k=0, now_ns=250) == 3   # ticks 1 and 2 missed
    assert next_index(t0_ns=1000, interval_ns=100, k=2, now_ns=1200) == 3


def test_ticks_are_due_on_an_absolute_grid_without_drift():
    interval_ns = 50 * MS
    monitor = Monitor([FakeSampler(busy_s=0.02)], interval_s=0.05, final_sample=False)
    with monitor:
        time.sleep(0.62)
    dues = [due for due, _ in monitor.ticks]
    assert len(dues) >= 8
    assert all((due - dues[0]) % interval_ns == 0 for due in dues)
    assert [b - a for a, b in zip(dues, dues[1:], strict=False)] == [interval_ns] * (len(dues) - 1)
    # cumulative sleep(interval) after 20 ms of work would start tick k 20*k ms late
    lateness = sorted(started - due for due, started in monitor.ticks)
    assert lateness[len(lateness) // 2] < 10 * MS and lateness[-1] < 40 * MS
    assert monitor.skipped_ticks == 0


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
        time.sleep(0.1)
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

    with Monitor([FakeSampler(busy_s=0.2)], interval_s=0.05):
        worst = asyncio.run(ticker())
    assert worst < 0.05


def test_a_scrape_the_server_pays_for_keeps_its_share_of_the_time():
    """A sampler marked on_server that takes 20 ms is not repeated for 20 ms / share; a host sampler on
    the same ticks is taken every tick; the final sample is never left out."""
    server, host = FakeSampler("server", busy_s=0.02), FakeSampler("host")
    server.on_server = True
    monitor = Monitor([server, host], interval_s=0.05, max_server_share=0.1)   # >= 200 ms between scrapes
    with monitor:
        time.sleep(1.0)
    assert host.calls >= 15
    assert 3 <= server.calls <= 7 and monitor.throttled["server"] >= 10
    assert server.calls + monitor.throttled["server"] == len(monitor.ticks) + 1
