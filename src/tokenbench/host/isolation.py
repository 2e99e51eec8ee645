"""Client and engine apart, where tokenbench runs both on this host (a local engine it deploys: the demo, a
sweep or bench with a profile): disjoint CPU sets, the client on a core of its own, and the client a higher
scheduling priority where the system permits it. Otherwise the two take each other's CPU and the client's
stamps measure the engine's load (docs/metrics.md, "Client health": host contention).

The plan (`plan`) is made once per run from the client options (`client.cpus`, `--client-cpus`): the
engine's side is handed to deploy/local.spawn as a `Placement`; the client's is applied to this process
while the study runs (`applied`; worker processes inherit it) and stored with the run's environment
(`Isolation.record`), so the report shows the sets and priorities."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from tokenbench.errors import UsageError
from tokenbench.spec.study import Client, cpu_set

if TYPE_CHECKING:                    # an engine's placement: only where tokenbench launches one
    from tokenbench.deploy.local import Placement

CLIENT_NICE = -5     # the client's niceness where permitted (root, CAP_SYS_NICE, or RLIMIT_NICE)
ENGINE_NICE = 5      # an engine that shares the client's CPUs yields to it


@dataclass(frozen=True, kw_only=True)
class Isolation:
    """Where the client and a local engine run, their niceness, and why (one line)."""

    client_cpus: frozenset[int] | None = None      # None: not pinned
    engine_cpus: frozenset[int] | None = None      # None: not pinned (or not tokenbench's engine)
    client_nice: int | None = None                 # None: unchanged
    engine_nice: int = 0
    note: str = ""
    notes: tuple[str, ...] = field(default=())     # what could not be done (not permitted, ...)
    local_engine: bool = False                     # tokenbench started the engine here (else nothing is known of it)

    @property
    def engine(self) -> Placement:
        from tokenbench.deploy.local import Placement
        return Placement(self.engine_cpus, self.engine_nice)

    def record(self) -> dict:
        """The run's environment entry (host/environment.py; the report's environment section)."""
        def cpus(s: frozenset[int] | None) -> str:
            return _ranges(s) if s is not None else "not pinned"
        return {"client_cpus": cpus(self.client_cpus), "engine_cpus": cpus(self.engine_cpus),
                "client_nice": self.client_nice if self.client_nice is not None else os.getpriority(os.PRIO_PROCESS, 0),
                "engine_nice": self.engine_nice, "note": "; ".join([self.note, *self.notes]),
                "local_engine": self.local_engine}


def _ranges(cpus: frozenset[int]) -> str:
    """{0, 1, 2, 5} -> '0-2,5'."""
    out: list[list[int]] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c != run[-1] + 1:
            out.append(run)
            run = []
        run.append(c)
    out += [run] if run else []
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in out)


def _may_raise_priority() -> bool:
    """Whether this process may lower its niceness by -CLIENT_NICE (tried, then put back)."""
    now = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, now + CLIENT_NICE)
    except OSError:
        return False
    os.setpriority(os.PRIO_PROCESS, 0, now)
    return True


def _asked(text: str, available: frozenset[int]) -> frozenset[int]:
    cpus = cpu_set(text)
    if not cpus <= available:
        raise UsageError(f"--client-cpus {text}: CPU(s) {_ranges(cpus - available)} are not available to this "
                         f"process (it may use {_ranges(available)})", "name CPUs among those, or leave it unset")
    return cpus


def plan(client: Client, local_engine: bool, available: frozenset[int] | None = None) -> Isolation:
    """The placement for a run: `local_engine` when tokenbench deploys the engine on this host."""
    return replace(_plan(client, local_engine, available), local_engine=local_engine)


def _plan(client: Client, local_engine: bool, available: frozenset[int] | None) -> Isolation:
    have = available if available is not None else frozenset(os.sched_getaffinity(0))
    if client.cpus == "all":
        return Isolation(note="not isolated: --client-cpus all")
    if client.cpus is None and not local_engine:
        return Isolation(note="client not pinned: the server is not one tokenbench deployed here")
    if client.cpus is None and len(have) < 2:
        return _priority(Isolation(note=f"not isolated: one CPU ({_ranges(have)}) for the client and the engine",
                                   engine_nice=ENGINE_NICE if local_engine else 0))
    mine = _asked(client.cpus, have) if client.cpus else frozenset(sorted(have)[-min(client.workers, len(have) - 1):])
    rest = have - mine
    if not local_engine:
        return _priority(Isolation(client_cpus=mine, note="client pinned; the server is not tokenbench's"))
    if not rest:
        return _priority(Isolation(client_cpus=mine, engine_nice=ENGINE_NICE,
                                   note="not isolated: the client's CPUs leave none for the engine: they share"))
    return _priority(Isolation(client_cpus=mine, engine_cpus=rest, note="client and engine on disjoint CPUs"))


def _priority(iso: Isolation) -> Isolation:
    if _may_raise_priority():
        return Isolation(client_cpus=iso.client_cpus, engine_cpus=iso.engine_cpus,
                         client_nice=os.getpriority(os.PRIO_PROCESS, 0) + CLIENT_NICE, engine_nice=iso.engine_nice,
                         note=iso.note)
    return Isolation(client_cpus=iso.client_cpus, engine_cpus=iso.engine_cpus, client_nice=None,
                     engine_nice=iso.engine_nice, note=iso.note,
                     notes=(f"client priority unchanged (raising it by {-CLIENT_NICE} is not permitted here)",))


@contextmanager
def applied(iso: Isolation) -> Iterator[None]:
    """This process (the client, and the workers it starts) on its CPUs and at its niceness for the block;
    both put back after."""
    cpus, nice = os.sched_getaffinity(0), os.getpriority(os.PRIO_PROCESS, 0)
    try:
        if iso.client_cpus:
            os.sched_setaffinity(0, iso.client_cpus)
        if iso.client_nice is not None:
            os.setpriority(os.PRIO_PROCESS, 0, iso.client_nice)
        yield
    finally:
        os.sched_setaffinity(0, cpus)
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError:
            pass
