"""Run samplers in a background thread on an absolute schedule: tick k is due at t0 + k * interval.

The thread never touches the caller's asyncio loop; samplers are synchronous and short. A sampler
that is unavailable is reported once through `on_warning` and left out; one that fails is reported
on its first failure, retried on every tick, and its failure count is reported at `stop()`.
`on_warning` is called from the monitor thread.

A sampler marked `on_server` (a /metrics scrape: the server renders the text) is taken at most so often
that it occupies `max_server_share` of the time: a scrape that took d is not repeated before d / share
has passed (16 ms on vLLM-CPU -> at most every 3.2 s at the default 0.5 %), so the monitor cannot slow
the server it measures; the ticks it sat out are counted in `throttled`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from types import TracebackType

from tokenbench.errors import TokenbenchError, UsageError
from tokenbench.monitor.samplers import Sampler
from tokenbench.monitor.samples import Sample

Warn = Callable[[str], None]
MAX_SERVER_SHARE = 0.005     # of wall time, for samplers whose work the server does


def next_index(t0_ns: int, interval_ns: int, k: int, now_ns: int) -> int:
    """The next tick after tick k: k + 1, or the first tick still due if the sampling overran."""
    first_future = (now_ns - t0_ns) // interval_ns + 1
    return max(k + 1, first_future)


class Monitor:
    def __init__(self, samplers: Iterable[Sampler], interval_s: float = 1.0, on_warning: Warn = print,
                 final_sample: bool = True, clock: Callable[[], int] = time.perf_counter_ns,
                 max_server_share: float = MAX_SERVER_SHARE) -> None:
        if not interval_s > 0:
            raise UsageError(f"monitor interval must be positive, got {interval_s}", "use e.g. --interval 1")
        self.samplers = list(samplers)
        self.interval_ns = int(interval_s * 1e9)
        self.on_warning = on_warning
        self.final_sample = final_sample
        self.clock = clock
        self.ticks: list[tuple[int, int]] = []   # (due_ns, started_ns) of every tick
        self.skipped_ticks = 0
        self.max_server_share = max_server_share
        self.throttled: dict[str, int] = {}          # sampler -> ticks left out to keep the server's share
        self._not_before: dict[str, int] = {}
        self._samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._active: list[Sampler] = []
        self._failures: dict[str, int] = {}
        self._error: BaseException | None = None

    def start(self) -> Monitor:
        if self._thread is not None:
            raise UsageError("the monitor is already running", "call stop() before starting it again")
        self._active = [sampler for sampler in self.samplers if self._usable(sampler)]
        self._stop.clear()
        t0 = self.clock()
        self.ticks.append((t0, t0))
        try:        # the first tick in the caller's thread: a reading lies before whatever it starts next (a
            self._tick()        # cell's first send), however late a busy host schedules the monitor's thread
        except Exception as exc:  # handed to the caller by stop(), as the thread's are
            self._error = exc
        self._thread = threading.Thread(target=self._run, args=(t0,), name="tokenbench-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        """Stop the thread (after one last tick), report repeated failures, return all samples."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()
        for name, count in self._failures.items():
            if count > 1:
                self.on_warning(f"monitor: {name} failed {count} times in total")
        self._failures.clear()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self.snapshot()

    def sample_now(self) -> None:
        """One read of the samplers whose work the server does (its /metrics), now, from the caller's
        thread and outside the throttle: at a phase boundary, so a counter's increase can start there."""
        for sampler in [s for s in self._active if getattr(s, "on_server", False)]:
            try:
                samples = sampler.sample()
            except TokenbenchError as exc:
                self._failed(sampler.name, exc)
                continue
            with self._lock:
                self._samples.extend(samples)

    def snapshot(self) -> list[Sample]:
        with self._lock:
            return list(self._samples)

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _usable(self, sampler: Sampler) -> bool:
        availability = sampler.available()
        if not availability:
            self.on_warning(f"monitor: {sampler.name} unavailable ({availability.reason}); continuing without it")
        return bool(availability)

    def _run(self, t0: int) -> None:
        try:
            self._loop(t0)
            if self.final_sample:
                self._tick(final=True)
        except BaseException as exc:  # handed to the caller by stop(), not swallowed
            self._error = exc

    def _loop(self, t0: int) -> None:
        """Tick k is due at t0 + k x interval; tick 0 was start()'s."""
        k = next_index(t0, self.interval_ns, 0, self.clock())
        self.skipped_ticks += k - 1
        while True:
            due = t0 + k * self.interval_ns
            if self._stop.wait(max(0, due - self.clock()) / 1e9):
                return
            self.ticks.append((due, self.clock()))
            self._tick()
            following = next_index(t0, self.interval_ns, k, self.clock())
            self.skipped_ticks += following - k - 1
            k = following

    def _tick(self, final: bool = False) -> None:
        for sampler in self._active:
            on_server = getattr(sampler, "on_server", False)
            start = self.clock()
            if on_server and not final and start < self._not_before.get(sampler.name, start):
                self.throttled[sampler.name] = self.throttled.get(sampler.name, 0) + 1
                continue
            try:
                samples = sampler.sample()
            except TokenbenchError as exc:
                self._failed(sampler.name, exc)
                continue
            except OSError as exc:          # e.g. /proc unreadable for want of descriptors: a gap, not a lost cell
                self._failed(sampler.name, TokenbenchError(f"{exc.filename or sampler.name}: {exc.strerror or exc}"))
                continue
            finally:
                if on_server:
                    self._not_before[sampler.name] = start + int((self.clock() - start) / self.max_server_share)
            with self._lock:
                self._samples.extend(samples)

    def _failed(self, name: str, exc: TokenbenchError) -> None:
        self._failures[name] = self._failures.get(name, 0) + 1
        if self._failures[name] == 1:
            self.on_warning(f"monitor: {name} failed: {exc.one_line()}; still trying every tick")
