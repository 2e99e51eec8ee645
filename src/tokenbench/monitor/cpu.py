"""Who used the host's CPUs while a cell ran: tokenbench's own processes (the client: the process that runs it and
the children it started for itself, not its caller's other children), the server's process tree where
tokenbench sees it, and everything else, read from the kernel's cumulative counters.

A `CpuSampler` reads, each time it is asked, every counter as seconds since some fixed point: the host's busy
and total CPU time (/proc/stat), the CPU time and the run delay (time runnable but waiting for a CPU,
/proc/PID/task/TID/schedstat) of the client's processes and of the server's, and the CPU pressure stall times
(/proc/pressure/cpu, where the kernel has PSI). `shares` reads each counter's increase over the cell's measured
window (interpolated at its edges between the readings around them: monitor/window.counter_increase) and
gives the window's `CpuShares`. Formulas: docs/metrics.md ("Who used the host's CPUs").

A process tree's counter only grows: a process or thread seen once keeps the time it had when last seen after
it has gone, and the root's reaped children (short-lived helpers: an accelerator tool the monitor runs) count
from their parent's children times, less the ones already counted while they lived.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tokenbench.metrics.summary_groups import CpuShares, ServerSeen
from tokenbench.monitor import window as win
from tokenbench.monitor.samplers import Availability
from tokenbench.monitor.samples import Sample
from tokenbench.monitor.window import CellWindow

PROC_STAT = "/proc/stat"
PRESSURE = "/proc/pressure/cpu"
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
SOURCE = "cpu"
# the counters a sampler gives, seconds each (cumulative): sample names
BUSY, TOTAL = "cpu_busy_s", "cpu_total_s"
CLIENT, CLIENT_WAIT = "cpu_client_s", "cpu_client_wait_s"
SERVER, SERVER_WAIT = "cpu_server_s", "cpu_server_wait_s"
PSI_SOME, PSI_FULL = "cpu_psi_some_s", "cpu_psi_full_s"
NAMES = (BUSY, TOTAL, CLIENT, CLIENT_WAIT, SERVER, SERVER_WAIT, PSI_SOME, PSI_FULL)


def host_times(path: str | Path = PROC_STAT) -> tuple[float, float] | None:
    """(busy, total) CPU seconds of all CPUs since boot (/proc/stat's first line: user nice system idle iowait
    irq softirq steal; guest time is inside user and nice already). Busy is all but idle and iowait: steal, the
    time a hypervisor gave to other guests, counts as busy (other work had it)."""
    try:
        with open(path) as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(fields) < 5:
        return None
    total = sum(fields)
    return (total - fields[3] - fields[4]) * TICK_S, total * TICK_S


def pressure(path: str | Path = PRESSURE) -> tuple[float, float | None] | None:
    """(some, full) stall seconds since boot from the CPU's pressure file; None where the kernel has no PSI.
    Lines: `some avg10=.. avg60=.. avg300=.. total=MICROSECONDS` (and `full ...` since Linux 5.13)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    totals: dict[str, float] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        found = [x.split("=", 1)[1] for x in rest.split() if x.startswith("total=")]
        if found and found[0].isdigit():
            totals[kind] = int(found[0]) / 1e6
    if "some" not in totals:
        return None
    return totals["some"], totals.get("full")


def _schedstat_waits(pid: int) -> dict[int, float]:
    """Each thread's run delay (s) of a process (/proc/PID/task/TID/schedstat: cpu_ns wait_ns slices)."""
    out: dict[int, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return out


@dataclass
class _Seen:
    """A process of the tree as last read: its start, own CPU time and its reaped children's."""

    started: float
    own: float = 0.0
    reaped: float = 0.0
    direct: bool = False        # a child of the root
    counted: bool = True        # its own time is the tree's (False: the excluded subtree's root)


def children_of(pid: int, proc: str = "/proc") -> list[int] | None:
    """The children of `pid`, read from its threads' children lists (/proc/PID/task/TID/children: a few small
    reads, where psutil's `children` reads the stat file of every process on the host, each read giving up the
    GIL, on the event loop's thread at a cell's edges); None where the kernel keeps no such list (built without
    CONFIG_PROC_CHILDREN). A process that has gone has none."""
    if not os.path.exists(f"{proc}/self/task/{os.getpid()}/children"):
        return None
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:                   # ended since it was listed
        return []
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"{proc}/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except (OSError, ValueError):     # the thread ended
            continue
    return out


def _children(p: psutil.Process) -> list[psutil.Process]:
    pids = children_of(p.pid)
    if pids is None:
        return p.children()
    procs = []
    for pid in dict.fromkeys(pids):
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:          # ended since it was listed
            continue
    return procs


def _below(kids: list[psutil.Process]) -> list[psutil.Process]:
    """`kids` and all below them."""
    out: list[psutil.Process] = []
    todo = list(kids)
    while todo:
        at = todo.pop()
        out.append(at)
        todo += _children(at)
    return out


def tokenbench_child(p: psutil.Process) -> bool:
    """A child tokenbench started for itself: what multiprocessing started (a --workers process, its resource
    tracker), a tokenbench module (`-m tokenbench.…`: the OTLP receiver), an accelerator tool the monitor runs
    (`*-smi`); not the other children the process that runs tokenbench may have (a library caller's servers)."""
    try:
        args = p.cmdline()
    except psutil.Error:
        return False
    return (any(a.startswith(("from multiprocessing.", "tokenbench.")) for a in args)
            or bool(args) and os.path.basename(args[0]).endswith("-smi"))


@dataclass
class ProcessTree:
    """The CPU time and run delay of a process and its descendants (less the subtree of `exclude`, and the
    children `member` does not keep, with theirs), as counters that only grow (module doc)."""

    root: int
    exclude: int | None = None
    member: Callable[[psutil.Process], bool] | None = None     # which of the root's children are the tree's
    seen: dict[int, _Seen] = field(default_factory=dict, init=False)
    waits: dict[int, float] = field(default_factory=dict, init=False)   # thread id -> its run delay when last read
    gone_own: float = field(default=0.0, init=False)      # own time of the processes seen and gone since
    gone_direct: float = field(default=0.0, init=False)   # own + reaped time of the root's children seen and gone
    reaped0: float | None = field(default=None, init=False)   # the root's reaped children's time when first read
    reaped_now: float = field(default=0.0, init=False)
    cpu_s: float = field(default=0.0, init=False)
    wait_s: float = field(default=0.0, init=False)

    def read(self) -> tuple[float, float] | None:
        """(cpu, wait) seconds so far; None once the root has gone."""
        try:
            root = psutil.Process(self.root)
            kids = _children(root)
        except psutil.Error:
            return None
        outside = [c for c in kids if self.member is not None and not self.member(c)]
        procs = [root, *outside, *_below([c for c in kids if c not in outside])]
        live = self._walk(root, procs, {c.pid for c in outside})
        self._forget({pid for pid in self.seen if pid not in live})
        extra = max(0.0, self.reaped_now - (self.reaped0 or 0.0) - self.gone_direct)
        own = sum(s.own for s in self.seen.values() if s.counted)
        self.cpu_s = max(self.cpu_s, self.gone_own + own + extra)
        self.wait_s = max(self.wait_s, sum(self.waits.values()))
        return self.cpu_s, self.wait_s

    def _walk(self, root: psutil.Process, procs: list[psutil.Process], outside: set[int]) -> set[int]:
        """Read each process; `outside`: the root's children that are not the tree's (kept as the excluded
        subtree's root is, so their time is not counted twice once they are reaped)."""
        excluded = self._excluded(procs) | outside
        live: set[int] = set()
        for p in procs:
            try:
                times, started = p.cpu_times(), p.create_time()
                direct = p.pid != root.pid and p.ppid() == root.pid
            except psutil.Error:          # ended since it was listed
                continue
            if p.pid in excluded and not (direct and (p.pid == self.exclude or p.pid in outside)):
                continue
            known = self.seen.get(p.pid)
            if known is not None and known.started != started:      # the pid is another process now
                self._forget({p.pid})
            own, reaped = times.user + times.system, times.children_user + times.children_system
            self.seen[p.pid] = _Seen(started, own, reaped, direct, p.pid not in excluded)
            live.add(p.pid)
            if p.pid == root.pid:
                self.reaped0 = reaped if self.reaped0 is None else self.reaped0
                self.reaped_now = reaped
            if p.pid not in excluded:
                for tid, wait in _schedstat_waits(p.pid).items():
                    self.waits[tid] = max(self.waits.get(tid, 0.0), wait)
        return live

    def _excluded(self, procs: list[psutil.Process]) -> set[int]:
        """The pids of the excluded subtree among `procs`."""
        if self.exclude is None:
            return set()
        parents: dict[int, int] = {}
        for p in procs:
            try:
                parents[p.pid] = p.ppid()
            except psutil.Error:
                continue
        out = set()
        for pid in parents:
            at = pid
            while at in parents and at != self.exclude:
                at = parents[at]
            if at == self.exclude:
                out.add(pid)
        return out

    def _forget(self, pids: Iterable[int]) -> None:
        for pid in pids:
            gone = self.seen.pop(pid)
            self.gone_own += gone.own if gone.counted else 0.0
            self.gone_direct += gone.own + gone.reaped if gone.direct else 0.0


class CpuSampler:
    """The host's, the client's and the server's CPU counters, and the CPU pressure stalls, read now (module
    doc); `server_pid` None: the server's processes are not seen here (`seen` says why). Safe to call from the
    monitor's thread and the cell's at once."""

    name = "cpu"

    def __init__(self, server_pid: int | None = None, seen: ServerSeen | None = None,
                 clock: Callable[[], int] = time.perf_counter_ns, client_pid: int | None = None,
                 proc_stat: str | Path = PROC_STAT, pressure_file: str | Path = PRESSURE) -> None:
        self.seen: ServerSeen | None = seen
        self.clock = clock
        self.proc_stat, self.pressure_file = proc_stat, pressure_file
        own = client_pid or os.getpid()
        self.client = ProcessTree(own, exclude=server_pid,
                                  member=tokenbench_child if client_pid is None else None)
        self.server = ProcessTree(server_pid) if server_pid is not None else None
        self._lock = threading.Lock()

    def available(self) -> Availability:
        if host_times(self.proc_stat) is None:
            return Availability(False, f"{self.proc_stat} cannot be read")
        return Availability(True)

    def sample(self) -> list[Sample]:
        with self._lock:
            start = self.clock()
            values = self._values()
            t_ns = (start + self.clock()) // 2
        return [Sample(t_ns, SOURCE, name, value) for name, value in values.items() if value is not None]

    def _values(self) -> dict[str, float | None]:
        host, psi = host_times(self.proc_stat), pressure(self.pressure_file)
        client = self.client.read()
        server = self.server.read() if self.server is not None else None
        return {BUSY: host[0] if host else None, TOTAL: host[1] if host else None,
                CLIENT: client[0] if client else None, CLIENT_WAIT: client[1] if client else None,
                SERVER: server[0] if server else None, SERVER_WAIT: server[1] if server else None,
                PSI_SOME: psi[0] if psi else None, PSI_FULL: psi[1] if psi else None}


def _increase(samples: list[Sample], name: str, w: CellWindow) -> float | None:
    series = [(s.t_ns, s.value) for s in samples if s.name == name]
    return win.counter_increase(series, w) if series else None


def _pct(seconds: float | None, wall: float) -> float | None:
    return None if seconds is None else 100.0 * seconds / wall


def shares(samples: Iterable[Sample], w: CellWindow, seen: ServerSeen | None = None) -> CpuShares | None:
    """The window's CPU shares (% of one core) from a sampler's readings; None without a window or without host
    readings around both of its edges. `seen`: how the server's processes were found (or why not)."""
    mine = sorted((s for s in samples if s.source == SOURCE and s.name in NAMES), key=lambda s: s.t_ns)
    wall = w.seconds
    if not wall:
        return None
    up = {name: _increase(mine, name, w) for name in NAMES}
    busy, total = up[BUSY], up[TOTAL]
    if busy is None or total is None:
        return None
    client, server = up[CLIENT], up[SERVER]
    other = None if client is None or server is None else max(0.0, busy - client - server)
    return CpuShares(window_s=wall, count=round(total / wall), host_pct=_pct(busy, wall),
                     client_pct=_pct(client, wall), client_wait_pct=_pct(up[CLIENT_WAIT], wall),
                     server_pct=_pct(server, wall), server_wait_pct=_pct(up[SERVER_WAIT], wall),
                     server_seen=seen, other_pct=_pct(other, wall),
                     psi_some_pct=_pct(up[PSI_SOME], wall), psi_full_pct=_pct(up[PSI_FULL], wall))
