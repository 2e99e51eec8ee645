"""Self-observation: how late the event loop wakes up while a cell runs, and why (client health).

A timer every PROBE_PERIOD_NS records how late it fired. A wake later than PROBE_RESOLUTION_NS is a
stall (metrics/tally.Stall): the loop was held up from some moment after the previous wake until this one,
and what its thread did meanwhile tells the cause: the kernel's per-thread counters
(/proc/thread-self/schedstat: time on the CPU, time runnable but waiting for it), read at every wake
(about 2 us). Over the phase the probe also reads the thread's involuntary context switches and the
host's steal time. Formulas: docs/metrics.md ("Client health")."""

from __future__ import annotations

import asyncio
import os
import resource
import time

from tokenbench.metrics.request import percentile
from tokenbench.metrics.summary_groups import ClientHealth
from tokenbench.metrics.tally import PROBE_RESOLUTION_NS, Stall, Stalls, attribute

PROBE_PERIOD_NS = 10_000_000      # the probe's timer
CATCH_UP_MAX_NS = 5_000_000_000   # a catch-up is followed at most this long after the wake
SCHEDSTAT = "/proc/thread-self/schedstat"
MS = 1_000_000
PROC_STAT = "/proc/stat"


class ThreadClock:
    """The calling thread's time on the CPU and time runnable but waiting (ns); the wait is None where
    the kernel does not say (no schedstat)."""

    def __init__(self) -> None:
        try:
            self.fd: int | None = os.open(SCHEDSTAT, os.O_RDONLY)
        except OSError:
            self.fd = None

    def read(self) -> tuple[int, int | None]:
        if self.fd is not None:
            try:
                cpu, wait, _ = os.pread(self.fd, 128, 0).split()
                return int(cpu), int(wait)
            except (OSError, ValueError):
                self.close()
        return time.thread_time_ns(), None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def steal_ticks() -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs (/proc/stat), or None where it cannot be read."""
    try:
        with open(PROC_STAT) as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[7], sum(fields[:8])) if len(fields) >= 8 else None


def _whole_ms(t_ns: int) -> int:
    """The first whole millisecond of CLOCK_MONOTONIC at or after t_ns."""
    return -(-t_ns // MS) * MS


async def wake_at(due_ns: int) -> None:
    """Return at perf_counter_ns() >= due_ns, a whole millisecond, after one timer: uvloop's timers count
    whole milliseconds of the same clock (CLOCK_MONOTONIC) from a time read when they are set, so a timer
    set for the millisecond `due_ns` is due exactly then, never before. (`clock.sleep_until` takes any
    instant: its last half millisecond is spent in zero-length sleeps, a loop iteration each, which cost
    the probe 10 iterations per tick: 0.1-0.2 s of CPU over a 16 s cell at 64 streams.)"""
    while (now := time.perf_counter_ns()) < due_ns:
        await asyncio.sleep((due_ns // MS - now // MS) / 1000)


def _involuntary() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw


class LoopLagProbe:
    """Sleeps `period_ns` in a loop and records how much later than asked it woke up, each stall with
    its cause, and the phase's run delay, preemptions and steal."""

    def __init__(self, period_ns: int = PROBE_PERIOD_NS) -> None:
        self.period_ns = period_ns
        self.lags_ns: list[int] = []
        self.stalls = Stalls()
        self._task: asyncio.Task | None = None
        self._cpu0 = 0.0
        self._wall0 = 0
        self._clock: ThreadClock | None = None
        self._thread0: tuple[int, int | None] = (0, None)
        self._steal0: tuple[int, int] | None = None
        self._switches0 = 0

    async def _run(self, clock: ThreadClock) -> None:
        seen, (cpu, wait), proc = time.perf_counter_ns(), clock.read(), time.process_time_ns()
        due = _whole_ms(seen + self.period_ns)
        while True:
            await wake_at(due)
            now = time.perf_counter_ns()
            (cpu_now, wait_now), proc_now = clock.read(), time.process_time_ns()
            lag = now - due
            self.lags_ns.append(lag)
            if lag > PROBE_RESOLUTION_NS:
                waited = None if wait is None or wait_now is None else wait_now - wait
                others = max(0, (proc_now - proc) - (cpu_now - cpu))
                self.stalls.add(Stall(after_ns=seen, due_ns=due, woke_ns=now,
                                         cause=attribute(lag, cpu_now - cpu, waited, others)))
                self._follow(len(self.stalls) - 1, now)
            seen, cpu, wait, proc = now, cpu_now, wait_now, proc_now
            due = max(due + self.period_ns, _whole_ms(now))

    def _follow(self, i: int, woke: int) -> None:
        """Follow stall i's catch-up: one callback per loop iteration after the wake, until an iteration takes
        at most PROBE_RESOLUTION_NS (every socket that had data waiting was read in the ones before it, and
        what arrived meanwhile waited no longer than that); its end is the stall's `caught`."""
        loop = asyncio.get_running_loop()
        last = woke

        def tick() -> None:
            nonlocal last
            now = time.perf_counter_ns()
            if now - last <= PROBE_RESOLUTION_NS or now - woke > CATCH_UP_MAX_NS:
                self.stalls.caught_up(i, now)
                return
            last = now
            loop.call_soon(tick)

        loop.call_soon(tick)

    def start(self) -> None:
        """Start probing (on the running loop's thread: the counters read are this thread's)."""
        self._clock = ThreadClock()
        self._cpu0, self._wall0 = time.process_time(), time.perf_counter_ns()
        self._thread0, self._steal0, self._switches0 = self._clock.read(), steal_ticks(), _involuntary()
        self._task = asyncio.get_running_loop().create_task(self._run(self._clock))

    def stop(self) -> ClientHealth:
        if self._task:
            self._task.cancel()
        wall_ns = time.perf_counter_ns() - self._wall0 or 1
        lags = sorted(x / 1e6 for x in self.lags_ns)
        return ClientHealth(loop_lag_p50_ms=percentile(lags, 50) if lags else None,
                            loop_lag_p99_ms=percentile(lags, 99) if lags else None,
                            loop_lag_max_ms=lags[-1] if lags else None,
                            client_cpu_percent=100.0 * (time.process_time() - self._cpu0) / (wall_ns / 1e9),
                            **self._evidence(wall_ns))

    def _evidence(self, wall_ns: int) -> dict:
        """The stalls, their time by cause, and the phase's run delay, preemptions and steal."""
        by_cause: dict[str, float] = {}
        for s in self.stalls:
            by_cause[s.cause] = by_cause.get(s.cause, 0.0) + s.lag_ns / 1e6
        out: dict = {"stalls": self.stalls, "stall_count": len(self.stalls), "stall_ms": by_cause,
                     "client_involuntary_switches": _involuntary() - self._switches0}
        if self._clock is not None:
            _, wait = self._clock.read()
            if wait is not None and self._thread0[1] is not None:
                out["client_wait_percent"] = 100.0 * (wait - self._thread0[1]) / wall_ns
            self._clock.close()
        steal = steal_ticks()
        if steal is not None and self._steal0 is not None and steal[1] > self._steal0[1]:
            out["host_steal_percent"] = 100.0 * (steal[0] - self._steal0[0]) / (steal[1] - self._steal0[1])
        return out
