"""The monitor around one cell: accelerator, server /metrics and host samplers on the requests' clock, and
what they and the server said once the measured phase is over (`CellMonitor.read`: the monitor's figures over
the measured window, its samples, the server's counters and request-time means over the measured phase, its
spans joined to the cell's requests where they are traced, and what became of the server), handed to
metrics/cell.finish as the cell's server side."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokenbench.client.records import RequestRecord
from tokenbench.deploy.address import on_this_host
from tokenbench.deploy.engines import has_adapter, metric_names, speculative
from tokenbench.metrics.cell import Measured, ServerSide
from tokenbench.metrics.server import (
    Acceptance,
    Readings,
    acceptance_from_counters,
    acceptance_from_gauges,
    hits_from_counters,
    server_means,
)
from tokenbench.metrics.summary_groups import CacheState, CpuShares, Group, MonitorFigures
from tokenbench.monitor.counters import CounterWindow, Rule, window
from tokenbench.monitor.cpu import SOURCE as CPU_SOURCE
from tokenbench.monitor.cpu import CpuSampler
from tokenbench.monitor.cpu import shares as cpu_shares
from tokenbench.monitor.runner import Monitor
from tokenbench.monitor.samplers import HostSampler, NpuSmiSampler, NvidiaSmiSampler, PrometheusSampler
from tokenbench.monitor.samples import Sample
from tokenbench.monitor.summary import queue_cross_check, summarize
from tokenbench.monitor.window import CellWindow
from tokenbench.spec.bench import SYNTHETIC_KINDS, Workload
from tokenbench.study.server_process import ServerProcess
from tokenbench.study.servers import Server

if TYPE_CHECKING:
    from tokenbench.study.traces import Joined, Traces


@dataclass(frozen=True)
class Watched:
    """What the monitor of one cell watches: the server, the cell's workload, whether the cell is over the
    KV capacity (the `*` mark), the run's traces when the cell's requests carry a traceparent, the server's
    process (whose CPU is the server's: study/server_process.py), and what the runner knew of the server before the
    cell (its prefix cache's state, its launch: groups handed on as the server's side)."""

    server: Server
    wl: Workload
    star: bool = False
    traces: Traces | None = None
    process: ServerProcess = ServerProcess("not_found")
    known: tuple[Group | None, ...] = ()


class CellMonitor:
    """The monitor of one cell, and the cell's Watch (load/cell.Watch): `warmed` when the warmup ends, `read`
    when the measured phase is over; `joined` is then the server's spans joined to the cell's requests."""

    def __init__(self, monitor: Monitor, watched: Watched, devices: frozenset[int] | None = None,
                 cpu: CpuSampler | None = None) -> None:
        self.monitor, self.watched = monitor, watched
        self.devices = devices          # the server's accelerator ids (its profile's), None: every one seen
        self.samples: list = []
        self.joined: Joined | None = None
        self.cpu = cpu                  # the CPU counters (monitor/cpu.py), read at the cell's edges too
        self.cpu_edges: list[Sample] = []
        self.edge()

    def edge(self) -> None:
        """Read the CPU counters now (the cell's start, the warmup's end, the measured phase's end), so the
        window's shares need no monitor tick near its edges."""
        if self.cpu is not None:
            self.cpu_edges += self.cpu.sample()

    def cpu_shares(self, window: CellWindow) -> CpuShares | None:
        """Who used the host's CPUs over the measured window (monitor/cpu.py)."""
        seen = self.watched.process.seen
        return cpu_shares([*self.samples, *self.cpu_edges], window, seen) if self.cpu is not None else None

    def summary(self, window: CellWindow, star: bool = False) -> MonitorFigures:
        """Monitor figures for the cell over its measured `window` (stored prefixed `monitor_`), the
        `*`-versus-queue cross-check, and why the host has no energy figure where it has none."""
        figures = summarize([s for s in self.samples if s.source != CPU_SOURCE], window)
        hosts = [s for s in self.monitor.samplers if isinstance(s, HostSampler)]
        note = hosts[0].rapl.note if hosts and figures.host_energy_j is None else None
        return figures.checked(queue_cross_check(star, figures), note)

    def window(self, measured: Measured) -> CellWindow:
        """The cell's measured window (first measured send to last measured byte) and what its figures divide
        by: the output tokens and the requests completed."""
        started_ns, ended_ns = measured.window
        return CellWindow(started_ns, ended_ns, self.monitor.interval_ns / 1e9, measured.tally.output_tokens(),
                          measured.tally.completed(), self.devices)

    def rows(self) -> list[tuple]:
        """The samples stored with the cell: the monitor's, and the CPU counters' edge readings when it ran."""
        edges = self.cpu_edges if self.monitor.samplers else []
        return [(s.t_ns, s.source, s.name, s.value, json.dumps(s.labels))
                for s in sorted([*self.samples, *edges], key=lambda s: s.t_ns)]

    def warmed(self) -> None:
        """Scrape the server's /metrics now (when the warmup ends), so the measured phase's counters
        count from there; read the CPU counters."""
        self.monitor.sample_now()
        self.edge()

    async def read(self, measured: Measured, records: Iterable[RequestRecord]) -> ServerSide:
        """What the monitor and the server said once the cell's measured phase is over (the monitor stops; a
        traced cell's spans are awaited and joined to its records)."""
        w = self.watched
        self.edge()
        self.samples = self.monitor.stop()
        started_ns = measured.window[0]
        found = readings(self, started_ns, w.wl, w.server)
        window = self.window(measured)
        groups: list[Group | None] = [server_means(self.histograms(started_ns)), self.cpu_shares(window),
                                      *_with_hits(w.known, found)]
        if w.traces is not None:
            self.joined = await w.traces.join(records, measured.stopped)
            groups.append(self.joined.ledger)
        return ServerSide(self.summary(window, w.star),
                          tuple((x.t_ns, x.name, x.value) for x in self.samples if x.source != CPU_SOURCE),
                          found, tuple(groups), w.server.death, w.server.deployment is not None)

    def counters(self, start_ns: int | None) -> CounterWindow:
        """The server's counters from the last scrape at or before `start_ns` (the first measured send) to
        the last one, read with the first engine's names that the scrapes carry."""
        for spec in metric_names().values():
            found = window(self.samples, spec.get("counters", {}), spec.get("gauges", {}), start_ns)
            if found.increases or found.gauges:
                return found
        return CounterWindow(None, None)

    def histograms(self, start_ns: int | None) -> dict[str, float]:
        """The increases of the server's request-time histograms (`{role}_sum`, `{role}_count`) over the same
        window, read with the first engine's names that the scrapes carry; {} when none."""
        for spec in metric_names().values():
            rules = {f"{role}_{part}": _part(rule, part) for role, rule in spec.get("histograms", {}).items()
                     for part in ("sum", "count")}
            found = window(self.samples, rules, {}, start_ns) if rules else CounterWindow(None, None)
            if found.increases:
                return found.increases
        return {}


def _with_hits(known: tuple[Group | None, ...], found: Readings) -> list[Group | None]:
    """The runner's groups, the prefix-cache state with the hit rate the server's counters measured beside it."""
    rate = found.hits.rate if found.hits is not None else None
    return [g.model_copy(update={"hit_rate": rate}) if isinstance(g, CacheState) and rate is not None else g
            for g in known]


def _part(rule: Rule, part: str) -> Rule:
    """The rule of a histogram's `_sum` or `_count` series."""
    if isinstance(rule, str):
        return f"{rule}_{part}"
    return {**rule, "metric": f"{rule['metric']}_{part}"}


def _acceptance(found: CounterWindow) -> Acceptance | None:
    return (acceptance_from_counters(found.get("spec_drafts"), found.get("spec_draft_tokens"),
                                      found.get("spec_accepted_tokens"))
            or acceptance_from_gauges(found.gauges.get("spec_accept_rate"), found.gauges.get("spec_accept_length")))


def _window_keys(found: CounterWindow, start_ns: int | None) -> dict[str, float | None]:
    if found.from_ns is None or found.to_ns is None:
        return {}
    lead = (start_ns - found.from_ns) / 1e9 if start_ns is not None else None
    return {"server_counters_window_s": (found.to_ns - found.from_ns) / 1e9, "server_counters_lead_s": lead}


def random_prompts_reason(wl: Workload, setting: str) -> str | None:
    """Why a cell's speculative figures are not what text gets: its prompts are random ids (or words)."""
    if wl.kind not in SYNTHETIC_KINDS:
        return None
    what = "random words" if wl.api == "chat" else "random token ids"
    return (f"speculative decoding ({setting}) fed {what}: acceptance on them, so TPOT and throughput, is not "
            "what text gets; use --dataset-name text")


def readings(mon: CellMonitor, started_ns: int | None, wl: Workload, server: Server) -> Readings:
    """What the server's counters say about the measured phase (speculative acceptance, prefix-cache hits),
    its speculative decoding, and the random-prompt mark of a speculative server's cell (docs/metrics.md)."""
    found = mon.counters(started_ns)
    acceptance = _acceptance(found)
    hits = hits_from_counters(found.get("prefix_queries"), found.get("prefix_hits"))
    setting = speculative(server.profile) or server.facts.speculative or ("on" if acceptance else None)
    reason = random_prompts_reason(wl, setting) if setting else None
    return Readings(hits, acceptance, setting, reason, _window_keys(found, started_ns))


_warned: set[str] = set()


def _warn_once(log):
    def warn(message: str) -> None:
        if message not in _warned:
            _warned.add(message)
            log(message)
    return warn


def remote(server: Server) -> bool:
    """A server tokenbench did not deploy whose address is not this host's: the accelerators the monitor
    would see here are not the server's."""
    return server.profile is None and not on_this_host(server.base_url)


def samplers_for(server, cpu: CpuSampler | None = None) -> list:
    engine = server.facts.engine if has_adapter(server.facts.engine) else "auto"
    accel = server.profile.accelerator if server.profile else None
    out = [PrometheusSampler(server.base_url, metric_names(), engine), HostSampler(), *([cpu] if cpu else [])]
    if remote(server):
        return out
    if accel in (None, "ascend"):
        out.append(NpuSmiSampler())
    if accel in (None, "nvidia"):
        out.append(NvidiaSmiSampler())
    return out


def served_devices(server: Server) -> frozenset[int] | None:
    """The accelerators a deployed profile's server runs on; None for a server tokenbench did not deploy (a
    --base-url: every device the monitor sees counts, and docs/monitoring.md says so)."""
    p = server.profile
    return frozenset(p.device_ids()) if p is not None and p.accelerator in ("nvidia", "ascend") else None


def cpu_sampler(process: ServerProcess) -> CpuSampler | None:
    """The CPU counters of a cell (the server's tree where its process is seen here); None where the host has
    no /proc/stat to read them from."""
    sampler = CpuSampler(process.tree, process.seen)
    return sampler if sampler.available() else None


@contextlib.contextmanager
def cell_monitor(watched: Watched, interval_s: float, log=print) -> Iterator[CellMonitor]:
    """The cell's monitor; with `interval_s` 0 none: no sampler runs and the cell has no monitor samples."""
    on, server = interval_s > 0, watched.server
    cpu = cpu_sampler(watched.process)
    mon = Monitor(samplers_for(server, cpu) if on else [], interval_s=interval_s if on else 1.0,
                  on_warning=_warn_once(log))
    cm = CellMonitor(mon, watched, served_devices(server), cpu)
    if on and remote(server):
        _warn_once(log)(f"monitor: {server.base_url} is not on this host: its accelerators are not sampled (no "
                        "utilisation, power or energy; run tokenbench on the server's host for them)")
    if on:
        mon.start()
    try:
        yield cm
    finally:
        cm.samples = mon.stop()
