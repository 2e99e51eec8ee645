"""What the field does to a client, on demand: stop its process now and then (SIGSTOP/SIGCONT, as a VM
pause, a swap storm or a debugger does), or keep its core busy (another process pinned there). Used by the
tests and bench/ scripts that check the client's marks against the reference server's send log
(testing/truth.py). Every stop is kept with its times (perf_counter_ns: the clock both processes stamp with),
so a check can say which stamps a stop could have delayed."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class Pattern:
    """When to stop: `count` stops (None: until the process ends), each `stop_s` long, or drawn uniformly
    from [stop_s, stop_max_s]; the first `first_s` after the start, then one every `every_s` (start to
    start), or after a gap drawn from [every_s, every_max_s]."""

    stop_s: float
    every_s: float
    first_s: float = 0.0
    count: int | None = None
    stop_max_s: float | None = None
    every_max_s: float | None = None
    seed: int = 0

    def times(self) -> Iterator[tuple[float, float]]:
        """(offset of the stop from the start, its length) in seconds, in order."""
        rng = random.Random(self.seed)
        at, n = self.first_s, 0
        while self.count is None or n < self.count:
            length = rng.uniform(self.stop_s, self.stop_max_s) if self.stop_max_s else self.stop_s
            yield at, length
            at += rng.uniform(self.every_s, self.every_max_s) if self.every_max_s else self.every_s
            n += 1


@dataclass
class Stopper:
    """Stops process `pid` as `pattern` says, from a thread (`start()`, `join()`); `stops_ns`: each stop's
    (SIGSTOP sent, SIGCONT sent)."""

    pid: int
    pattern: Pattern
    stops_ns: list[tuple[int, int]] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _quit: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Stopper:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[tuple[int, int]]:
        self._quit.set()
        if self._thread is not None:
            self._thread.join()
        return self.stops_ns

    def _run(self) -> None:
        t0 = time.monotonic()
        for at, length in self.pattern.times():
            if self._quit.wait(max(0.0, t0 + at - time.monotonic())) or not self._pause(length):
                return

    def _pause(self, length: float) -> bool:
        try:
            os.kill(self.pid, signal.SIGSTOP)
            began = time.perf_counter_ns()
            time.sleep(length)
        except ProcessLookupError:
            return False
        finally:
            _cont(self.pid)
        self.stops_ns.append((began, time.perf_counter_ns()))
        return True


def _cont(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def stop_when(proc: subprocess.Popen, ready: Callable[[], bool], length_s: float,
              poll_s: float = 0.05) -> tuple[int, int] | None:
    """Wait until `ready()` is true (polled), then stop the process for `length_s`; the stop's times, or None
    when the process ended first."""
    while not ready():
        if proc.poll() is not None:
            return None
        time.sleep(poll_s)
    pid = proc.pid
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return None
    began = time.perf_counter_ns()
    time.sleep(length_s)
    _cont(pid)
    return began, time.perf_counter_ns()


@contextmanager
def busy(cpu: int) -> Iterator[subprocess.Popen]:
    """A process that keeps `cpu` busy (a Python busy loop pinned there) for the with-block."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    try:
        yield hog
    finally:
        hog.kill()
        hog.wait()


def client_and_server_cpus() -> tuple[int | None, int | None]:
    """(server CPU, client CPU): the first and last this process may use; (None, None) on one CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[-1]) if len(cpus) > 1 else (None, None)
