"""What held the client's event loop up while a cell ran: each stall the loop-lag probe saw (load/lag.py),
with the evidence of its cause the client can read about itself. The figures' bounds are computed from
these (metrics/figure_bounds.py). Formulas: docs/metrics.md ("Client health").

A cause is one of:
- `client_cpu`: the loop's thread was on the CPU the whole time: its own work held it (client overloaded);
- `host_contention`: it was runnable but not running: other processes had the CPU (the kernel's run delay,
  /proc/thread-self/schedstat);
- `client_stopped`: neither running nor waiting for a CPU: the process was stopped (SIGSTOP, a debugger,
  a frozen cgroup) or blocked in a system call or a page fault;
- `client_delay`: late, cause unknown (the kernel's run delay could not be read);
- `buffering`: not the client at all: reads that carried several token chunks while its loop was quiet
  (the server or a proxy held the stream).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

Cause = Literal["client_cpu", "host_contention", "client_stopped", "client_delay", "buffering"]
CLIENT_CAUSES: tuple[Cause, ...] = ("client_cpu", "host_contention", "client_stopped", "client_delay")
CAUSES: tuple[Cause, ...] = (*CLIENT_CAUSES, "buffering")

PROBE_PERIOD_NS = 10_000_000      # the probe's timer
PROBE_RESOLUTION_NS = 2_000_000   # an idle loop's timer still wakes up this late (epoll timeouts are whole ms,
                                  # a VM's timer jitter adds about 1 ms: p99 2.1-2.4 ms on an idle 2-core VM
                                  # while calibrate's delivery error stayed under 0.4 ms); a later wake is a stall


CATCH_UP_MAX_NS = 5_000_000_000  # a catch-up is followed at most this long after the wake


class Stall(BaseModel):
    """One wake of the probe later than PROBE_RESOLUTION_NS: the loop could not run at `due_ns`; it was
    last seen running at `after_ns` (the probe's previous wake), ran again at `woke_ns`, and had caught up
    with what waited for it at `caught_ns` (the end of the first loop iteration after the wake that took
    at most PROBE_RESOLUTION_NS: every socket that had data was read by then; None: at the wake)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    after_ns: int
    due_ns: int
    woke_ns: int
    cause: Cause
    worker: int = 0
    caught_ns: int | None = None

    @property
    def lag_ns(self) -> int:
        return self.woke_ns - self.due_ns

    @property
    def caught(self) -> int:
        return self.woke_ns if self.caught_ns is None else max(self.caught_ns, self.woke_ns)


def attribute(lag_ns: int, cpu_ns: int, wait_ns: int | None, others_ns: int = 0) -> Cause:
    """The cause of a stall of `lag_ns` from what the loop's thread did since the probe's previous wake:
    `cpu_ns` on the CPU, `wait_ns` runnable but waiting for it (None: unknown), while the process's other
    threads ran `others_ns`. The rest of the stall (lag - cpu - wait) the thread was off the CPU and not
    waiting for it: blocked by the process's own work when its other threads ran for at least a quarter
    of that (one holding the GIL blocks the loop), else stopped or blocked in a system call."""
    if wait_ns is None:
        return "client_cpu" if 2 * (cpu_ns + others_ns) >= lag_ns else "client_delay"
    off = max(0, lag_ns - cpu_ns - wait_ns)
    held = 4 * others_ns >= off
    own = cpu_ns + (off if held else 0)
    best = max(wait_ns, own, 0 if held else off)
    return "host_contention" if best == wait_ns else "client_cpu" if best == own else "client_stopped"


class Stalls:
    """Every stall of a phase, compact (35 bytes each: a stall a second for an hour is 100 KB), picklable (it
    comes back from worker processes and Ray actors with their health)."""

    def __init__(self) -> None:
        self.after, self.due, self.woke, self.caught = array("q"), array("q"), array("q"), array("q")
        self.cause, self.worker = array("b"), array("h")

    @classmethod
    def of(cls, stalls: Iterable[Stall]) -> Stalls:
        out = cls()
        for s in stalls:
            out.add(s)
        return out

    def add(self, s: Stall) -> None:
        self.after.append(s.after_ns)
        self.due.append(s.due_ns)
        self.woke.append(s.woke_ns)
        self.caught.append(s.caught)
        self.cause.append(CAUSES.index(s.cause))
        self.worker.append(s.worker)

    def caught_up(self, i: int, at_ns: int) -> None:
        """Stall i's catch-up ended at `at_ns` (the probe follows it after the wake)."""
        self.caught[i] = max(self.caught[i], at_ns)

    def __len__(self) -> int:
        return len(self.due)

    def __iter__(self) -> Iterator[Stall]:
        for a, d, w, c, k, u in zip(self.after, self.due, self.woke, self.cause, self.worker, self.caught, strict=True):
            yield Stall(after_ns=a, due_ns=d, woke_ns=w, cause=CAUSES[c], worker=k, caught_ns=u)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stalls) and list(self) == list(other)

    def arrays(self) -> dict[str, np.ndarray]:
        """after, due, woke, caught (ns), cause (index into CAUSES), as int64 arrays sorted by due."""
        cols = {k: np.array(getattr(self, k), np.int64) for k in ("after", "due", "woke", "caught", "cause")}
        order = np.argsort(cols["due"], kind="stable")
        return {k: v[order] for k, v in cols.items()}

    def merged(self, others: list[Stalls]) -> Stalls:
        """Several workers' stalls as one, each tagged with its worker (this one is worker 0)."""
        out = Stalls()
        for i, part in enumerate([self, *others]):
            for name in ("after", "due", "woke", "caught", "cause"):
                getattr(out, name).extend(getattr(part, name))
            out.worker.extend([i] * len(part))
        return out

    def shifted(self, offset_ns: int) -> Stalls:
        """The same stalls on a clock `offset_ns` behind (a Ray actor's, on the driver's)."""
        out = Stalls()
        out.after, out.due, out.woke, out.caught = (array("q", [t - offset_ns for t in col])
                                                    for col in (self.after, self.due, self.woke, self.caught))
        out.cause, out.worker = array("b", self.cause), array("h", self.worker)
        return out
