"""One cell's monitor samples -> its MonitorFigures (None where a signal was not observed).

The accelerator and host figures cover the cell's measured window only (monitor/window.py): per device
(a GPU, one chip of an NPU) and summed over the devices of the server (TP/DP/PP). The server's signals
(throttled /metrics scrapes) cover every sample of the cell. Every key and formula is in
docs/monitoring.md. A "tick" is one read of one sampler: its samples share a `t_ns`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from tokenbench.metrics.summary_groups import DeviceFigures, MonitorFigures
from tokenbench.monitor import window as win
from tokenbench.monitor.samples import ACCELERATOR_SOURCES, Sample
from tokenbench.monitor.window import CellWindow

Number = float | int | None
_ACCEL = frozenset(ACCELERATOR_SOURCES)
SUMMARY_KEYS = tuple(MonitorFigures.model_fields)


def summarize(samples: Iterable[Sample], window: CellWindow = CellWindow()) -> MonitorFigures:
    """The figures of a cell's samples over its measured `window` (no window: over every sample)."""
    every = sorted(samples, key=lambda s: s.t_ns)
    accel = [s for s in every if s.source in _ACCEL and _served(s, window.devices)]
    host = [s for s in every if s.source == "host"]
    out = _overall(every, window) | _accelerator(accel, _spanned(accel, window)) | _host(host, _spanned(host, window))
    return MonitorFigures(**out, **_server([s for s in every if s.source == "server"]))


def _served(s: Sample, devices: frozenset[int] | None) -> bool:
    """Whether the sample is of one of the server's devices: a GPU's index, an NPU chip's physical id (its NPU
    id where npu-smi shows none)."""
    if devices is None:
        return True
    ident = s.labels.get("phy_id") or s.labels.get("device", "")
    return ident.isdigit() and int(ident) in devices


def _spanned(samples: list[Sample], w: CellWindow) -> CellWindow:
    """The window; without one, the span of these samples (first to last)."""
    if w.known or not samples:
        return w
    return CellWindow(samples[0].t_ns, samples[-1].t_ns, w.interval_s, w.output_tokens, w.requests, w.devices)


def _within(samples: list[Sample], w: CellWindow) -> list[Sample]:
    """The samples of the ticks that describe the window (monitor/window.pick)."""
    keep = set(win.pick(sorted({s.t_ns for s in samples}), w))
    return [s for s in samples if s.t_ns in keep]


def queue_cross_check(star: bool, summary: MonitorFigures) -> str | None:
    """A warning when the `*` mark (KV capacity exceeded, requests must queue) and the server's
    observed queue disagree; None when they agree or the queue was not observed."""
    waiting = summary.server_waiting_max
    if waiting is None:
        return None
    if star and waiting == 0:
        return ("marked * (KV capacity exceeded) but the server never queued a request "
                "(max waiting 0): the capacity figure or the load is not what was assumed")
    if not star and waiting > 0:
        return (f"the server queued up to {waiting:g} requests but the cell is not marked *: "
                "its latencies include queueing")
    return None


def _overall(every: list[Sample], w: CellWindow) -> dict[str, Number]:
    times = [s.t_ns for s in every]
    span = (times[-1] - times[0]) / 1e9 if times else None
    return {"samples": len(every), "span_s": span, "window_s": w.seconds,
            "interval_s": w.interval_s if w.known else None}


# ---- accelerator ----

def _series(samples: list[Sample], name: str) -> list[win.Point]:
    return [(s.t_ns, s.value) for s in samples if s.name == name]


def _chosen(series: list[win.Point], w: CellWindow) -> list[float]:
    keep = set(win.pick([t for t, _ in series], w))
    return [v for t, v in series if t in keep]


def _device_key(s: Sample) -> tuple[str, str]:
    device, chip = s.labels.get("device", "?"), s.labels.get("chip")
    return s.source, device if chip is None else f"{device}/{chip}"


def _energy(samples: list[Sample], w: CellWindow) -> dict:
    """The device's energy from its NVML total-energy counter when that brackets the window and moved (exact
    whatever lies between its readings; interpolated across the readings around each edge: `max_gap_s`, the
    longer of those stretches), else from its power samples (a counter that stays put while power is drawn
    counts nothing); their coverage of the window."""
    power = _series(samples, "power_w")
    counter = _series(samples, "energy_j")
    if not w.known or not (power or counter):
        return {}
    times = [t for t, _ in power]
    told = {"coverage_pct": win.coverage_pct(times, w), "max_gap_s": win.max_gap_s(times, w)} if power else {}
    used = win.counter_increase(counter, w) if counter else None
    if used is not None and (used > 0 or not power or not any(v > 0 for _, v in power)):
        mean = used / w.seconds if w.seconds else (win.value_at(power, w.start_ns or 0) if power else None)
        return {"energy_j": used, "energy_source": "counter", "power_mean_w": mean,
                "max_gap_s": win.edge_gap_s([t for t, _ in counter], w)}
    if not power:
        return {}
    joules = win.integral(power, w)
    mean = joules / w.seconds if w.seconds else win.value_at(power, w.start_ns or 0)
    return {"energy_j": joules, "energy_source": "power", "power_mean_w": mean, **told}


def _device(key: tuple[str, str], samples: list[Sample], w: CellWindow) -> DeviceFigures:
    util = _chosen(_series(samples, "util_pct"), w)
    used = _chosen(_series(samples, "mem_used_mb"), w)
    total = _chosen(_series(samples, "mem_total_mb"), w)
    power = _chosen(_series(samples, "power_w"), w)
    figures = {"util_mean_pct": _mean(util), "util_max_pct": _max(util), "mem_used_mean_mb": _mean(used),
               "mem_peak_mb": _max(used), "mem_total_mb": _max(total), "power_max_w": _max(power),
               "power_mean_w": _mean(power)}
    return DeviceFigures(source=key[0], device=key[1], name=samples[0].labels.get("name", ""),
                         **(figures | _energy(samples, w)))


def _devices(accel: list[Sample], w: CellWindow) -> list[DeviceFigures]:
    by_device: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for s in accel:
        by_device[_device_key(s)].append(s)
    return [_device(key, samples, w) for key, samples in sorted(by_device.items())]


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _per(value: float | None, count: int | None) -> float | None:
    return value / count if value is not None and count else None


def _energy_totals(devices: list[DeviceFigures], w: CellWindow) -> dict[str, Number | str]:
    energy = _sum(d.energy_j for d in devices)
    sources = sorted({d.energy_source for d in devices if d.energy_source})
    integrated = [d for d in devices if d.energy_source == "power"]
    return {"accel_energy_j": energy, "accel_energy_source": "+".join(sources) or None,
            "accel_energy_per_output_token_j": _per(energy, w.output_tokens),
            "accel_energy_per_request_j": _per(energy, w.requests),
            "accel_tokens_per_joule": w.output_tokens / energy if energy and w.output_tokens else None,
            "accel_coverage_pct": min((d.coverage_pct for d in integrated if d.coverage_pct is not None),
                                      default=None),
            "accel_max_gap_s": max((d.max_gap_s for d in devices if d.max_gap_s is not None), default=None)}


def _accelerator(accel: list[Sample], w: CellWindow) -> dict:
    devices = _devices(accel, w)
    chosen = _within(accel, w)
    util = [s.value for s in chosen if s.name == "util_pct"]
    chips = {_device_key(s) for s in chosen if s.name == "util_pct"}
    return {
        "accel_chips": len(chips) if chips else None,
        "accel_util_mean_pct": _mean(util), "accel_util_max_pct": _max(util),
        "accel_mem_used_mean_mb": _sum(d.mem_used_mean_mb for d in devices),
        "accel_mem_peak_mb": _max([v for _, v in _tick_sums(chosen, "mem_used_mb")]),
        "accel_mem_peak_chip_mb": _max([s.value for s in chosen if s.name == "mem_used_mb"]),
        "accel_mem_capacity_mb": _sum(d.mem_total_mb for d in devices),
        "accel_power_mean_w": _sum(d.power_mean_w for d in devices),
        "accel_power_max_w": _max([v for _, v in _tick_sums(chosen, "power_w")]),
        "accel_temp_max_c": _max([s.value for s in chosen if s.name == "temp_c"]),
        "devices": devices or None, **_energy_totals(devices, w),
    }


# ---- server, host ----

def _server(window: list[Sample]) -> dict[str, Number]:
    running = _values(window, "running")
    waiting = _values(window, "waiting")
    preempt = [v for _, v in _tick_sums(window, "preemptions")]
    return {
        "server_running_mean": _mean(running), "server_running_max": _max(running),
        "server_waiting_mean": _mean(waiting), "server_waiting_max": _max(waiting),
        "server_kv_usage_peak": _max(_values(window, "kv_usage")),
        "server_preemptions": _counter_increase(preempt),
    }


def _rapl(host: list[Sample], w: CellWindow) -> dict[str, Number]:
    """The CPU packages' energy over the window: the sum over RAPL zones of each counter's increase."""
    zones: dict[str, list[win.Point]] = defaultdict(list)
    for s in host:
        if s.name == "energy_j":
            zones[s.labels.get("zone", "")].append((s.t_ns, s.value))
    if not zones or not w.known:
        return {}
    increases = [win.counter_increase(series, w) for series in zones.values()]
    energy = None if any(v is None for v in increases) else sum(v for v in increases if v is not None)
    return {"host_energy_j": energy, "host_energy_per_output_token_j": _per(energy, w.output_tokens)}


def _host(host: list[Sample], w: CellWindow) -> dict[str, Number]:
    chosen = _within(host, w)
    cpu = _values(chosen, "cpu_pct")
    proc_cpu = _values(chosen, "proc_cpu_pct")
    return {
        "host_cpu_mean_pct": _mean(cpu), "host_cpu_max_pct": _max(cpu),
        "host_mem_peak_mb": _max(_values(chosen, "mem_used_mb")),
        "proc_cpu_mean_pct": _mean(proc_cpu), "proc_cpu_max_pct": _max(proc_cpu),
        "proc_rss_peak_mb": _max(_values(chosen, "proc_rss_mb")), **_rapl(host, w),
    }


def _values(window: list[Sample], name: str) -> list[float]:
    return [s.value for s in window if s.name == name]


def _tick_sums(window: list[Sample], name: str) -> list[tuple[int, float]]:
    """(t_ns, sum over chips/series) per tick, in time order."""
    sums: dict[tuple[str, int], float] = defaultdict(float)
    for s in window:
        if s.name == name:
            sums[(s.source, s.t_ns)] += s.value
    return sorted((t_ns, value) for (_, t_ns), value in sums.items())


def _counter_increase(values: list[float]) -> Number:
    """Increase of a cumulative counter over the window; a drop means a restart (counted from 0)."""
    if not values:
        return None
    increase = 0.0
    for before, after in zip(values, values[1:], strict=False):
        increase += after - before if after >= before else after
    return increase


def _mean(values: list[float]) -> Number:
    return sum(values) / len(values) if values else None


def _max(values: list[float]) -> Number:
    return max(values) if values else None
