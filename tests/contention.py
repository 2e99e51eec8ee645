"""Same-run references for timing assertions (docs/architecture.md, "Tests").

No test asserts a bare wall-clock bound: another process on the machine can delay any process by any
amount. What such a delay cost is measured in the same run instead: the time a process spent runnable
but not running, waiting for a CPU (its run delay: the second field of /proc/PID/task/TID/schedstat).
A timing bound is then `the quiet tolerance + what the processes involved waited while it was measured`:
as strict as before on a quiet machine, and never broken by a busy one.

How a wait moves a figure: a wait of W ms delays each request in flight at that moment by at most W, so
over N requests with at most C in flight a mean moves by at most W * min(C, N) / N, and any single
request (so any percentile) by at most W. A per-token mean over n - 1 gaps moves by at most that / (n - 1).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import psutil

from tokenbench.testing.reference_server import ReferenceProcess


def run_delay_ns(pid: int) -> int:
    """The run delay of a process's live threads so far (0 where the kernel does not report it)."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):      # a thread that ended meanwhile
            continue
    return total


class Waited:
    """How long the given processes (default: this one) have waited for a CPU since start(), in ms.
    A with-block starts it; `.ms` reads it (frozen at the end of the block).

    descendants=True adds every process this one starts meanwhile (client workers, a Ray cluster): they
    may exit before the end, so a thread reads them every `every_s` and keeps the last reading of each
    (what one waited in its last `every_s` before exiting is missed)."""

    def __init__(self, *pids: int, descendants: bool = False, every_s: float = 0.05) -> None:
        self.pids, self.descendants, self.every_s = pids or (os.getpid(),), descendants, every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.start()

    def start(self) -> Waited:
        self._from = {pid: run_delay_ns(pid) for pid in self._watched()}
        self._last = dict(self._from)
        self._frozen: float | None = None
        if self.descendants and (self._thread is None or not self._thread.is_alive()):
            self._stop.clear()
            self._thread = threading.Thread(target=self._follow, daemon=True)
            self._thread.start()
        return self

    def _watched(self) -> list[int]:
        extra = [p.pid for p in psutil.Process().children(recursive=True)] if self.descendants else []
        return [*self.pids, *extra]

    def _read(self) -> None:
        for pid in self._watched():
            self._last[pid] = max(self._last.get(pid, 0), run_delay_ns(pid))

    def _follow(self) -> None:
        while not self._stop.wait(self.every_s):
            self._read()

    @property
    def ms(self) -> float:
        if self._frozen is not None:
            return self._frozen
        self._read()
        return sum(max(0, last - self._from.get(pid, 0)) for pid, last in self._last.items()) / 1e6

    def stop(self) -> float:
        self._frozen = self.ms
        self._stop.set()
        return self._frozen

    def __enter__(self) -> Waited:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def mean_allowance_ms(waited_ms: float, in_flight: int, requests: int, gaps: int = 1) -> float:
    """How far the waits can have moved a mean over `requests` requests with at most `in_flight` in flight
    (of a per-gap figure such as TPOT: `gaps` = output tokens - 1)."""
    return waited_ms * min(in_flight, requests) / requests / max(gaps, 1)


class WatchedReference(ReferenceProcess):
    """The reference server with `.waited`: how long it and this process waited for a CPU from the moment
    it was ready until it was closed (or `.waited.start()` was called again)."""

    waited: Waited

    def __enter__(self) -> WatchedReference:
        super().__enter__()
        assert self.proc is not None
        self.waited = Waited(os.getpid(), self.proc.pid)
        return self

    def close(self) -> None:
        if getattr(self, "waited", None) is not None and self.proc is not None and self.proc.poll() is None:
            self.waited.stop()
        super().close()
