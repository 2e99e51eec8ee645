"""Monitor samplers around one cell: accelerator, server /metrics and host, on the requests' clock."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from tokenbench.deploy.engines import has_adapter, metric_names
from tokenbench.errors import TargetError
from tokenbench.metrics.server_cache import ServerCache
from tokenbench.metrics.summary_groups import MonitorFigures
from tokenbench.monitor.counters import window
from tokenbench.monitor.runner import Monitor
from tokenbench.monitor.samplers import HostSampler, NpuSmiSampler, NvidiaSmiSampler, PrometheusSampler
from tokenbench.monitor.summary import queue_cross_check, summarize


class CellMonitor:
    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.samples: list = []

    def summary(self, output_tokens: int | None = None, star: bool = False) -> MonitorFigures:
        """Monitor figures for the cell (stored prefixed `monitor_`), plus the `*`-versus-queue cross-check."""
        raw = summarize(self.samples, output_tokens=output_tokens)
        return MonitorFigures(**raw, queue_check=queue_cross_check(star, raw))

    def rows(self) -> list[tuple]:
        return [(s.t_ns, s.source, s.name, s.value, json.dumps(s.labels)) for s in self.samples]


class PhaseCounters:
    """The server's cumulative counters (the adapters' `counters`: monitor/counters.py) read twice, when the
    measured phase starts (`mark`: the warmup's last answer is in, or before a cell without warmup) and when
    the cell has ended (`figures`), so their increase is the measured phase's to the token: the monitor's
    own scrapes are throttled and may miss either end. A server without /metrics, or without the counters,
    gives no figures."""

    def __init__(self, server) -> None:
        engine = server.facts.engine if has_adapter(server.facts.engine) else "auto"
        self.sampler = PrometheusSampler(server.base_url, metric_names(), engine)
        self.start: list = []

    def mark(self) -> None:
        self.start = self._read()

    def _read(self) -> list:
        try:
            return self.sampler.sample()
        except TargetError:
            return []

    def figures(self) -> ServerCache | None:
        if not self.start:
            return None
        samples = self.start + self._read()
        for names in metric_names().values():
            found = window(samples, names.get("counters", {}))
            if found.increases and found.from_ns is not None and found.to_ns is not None and found.to_ns > found.from_ns:
                return ServerCache.of(found.get("prefix_queries"), found.get("prefix_hits"),
                                      (found.to_ns - found.from_ns) / 1e9)
        return None


_warned: set[str] = set()


def _warn_once(log):
    def warn(message: str) -> None:
        if message not in _warned:
            _warned.add(message)
            log(message)
    return warn


def samplers_for(server) -> list:
    engine = server.facts.engine if has_adapter(server.facts.engine) else "auto"
    accel = server.profile.accelerator if server.profile else None
    out = [PrometheusSampler(server.base_url, metric_names(), engine), HostSampler()]
    if accel in (None, "ascend"):
        out.append(NpuSmiSampler())
    if accel in (None, "nvidia"):
        out.append(NvidiaSmiSampler())
    return out


@contextlib.contextmanager
def cell_monitor(server, interval_s: float, log=print) -> Iterator[CellMonitor]:
    mon = Monitor(samplers_for(server), interval_s=interval_s, on_warning=_warn_once(log))
    cm = CellMonitor(mon)
    mon.start()
    try:
        yield cm
    finally:
        cm.samples = mon.stop()
