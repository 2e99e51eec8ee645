"""One cell's monitor samples -> a flat dict of numbers (None where the signal was not observed).

Every key and formula is documented in docs/monitoring.md. A "tick" is one read of one sampler: its
samples share a `t_ns`. Accelerator totals (memory, power) are summed over chips within a tick
before taking peaks and means, so they describe the whole server, not one chip.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from tokenbench.monitor.samples import ACCELERATOR_SOURCES, Sample

Number = float | int | None
_ACCEL = frozenset(ACCELERATOR_SOURCES)

SUMMARY_KEYS = (
    "samples", "span_s", "accel_chips",
    "accel_util_mean_pct", "accel_util_max_pct",
    "accel_mem_peak_mb", "accel_mem_peak_chip_mb", "accel_mem_capacity_mb",
    "accel_power_mean_w", "accel_power_max_w", "accel_energy_j", "accel_energy_per_output_token_j",
    "accel_temp_max_c",
    "server_running_mean", "server_running_max", "server_waiting_mean", "server_waiting_max",
    "server_kv_usage_peak", "server_preemptions",
    "host_cpu_mean_pct", "host_cpu_max_pct", "host_mem_peak_mb",
    "proc_cpu_mean_pct", "proc_cpu_max_pct", "proc_rss_peak_mb",
)


def summarize(samples: Iterable[Sample], start_ns: int | None = None, end_ns: int | None = None,
              output_tokens: int | None = None) -> dict[str, Number]:
    """Summary of the samples within [start_ns, end_ns] (both optional)."""
    window = [s for s in samples if (start_ns is None or s.t_ns >= start_ns)
              and (end_ns is None or s.t_ns <= end_ns)]
    result = dict.fromkeys(SUMMARY_KEYS)
    result |= _overall(window) | _accelerator(window, output_tokens) | _server(window) | _host(window)
    return result


def queue_cross_check(star: bool, summary: dict[str, Number]) -> str | None:
    """A warning when the `*` mark (KV capacity exceeded, requests must queue) and the server's
    observed queue disagree; None when they agree or the queue was not observed."""
    waiting = summary.get("server_waiting_max")
    if waiting is None:
        return None
    if star and waiting == 0:
        return ("marked * (KV capacity exceeded) but the server never queued a request "
                "(max waiting 0): the capacity figure or the load is not what was assumed")
    if not star and waiting > 0:
        return (f"the server queued up to {waiting:g} requests but the cell is not marked *: "
                "its latencies include queueing")
    return None


def _overall(window: list[Sample]) -> dict[str, Number]:
    times = [s.t_ns for s in window]
    span = (max(times) - min(times)) / 1e9 if times else None
    return {"samples": len(window), "span_s": span}


def _accelerator(window: list[Sample], output_tokens: int | None) -> dict[str, Number]:
    util = _values(window, _ACCEL, "util_pct")
    mem_ticks = _tick_sums(window, _ACCEL, "mem_used_mb")
    power_ticks = _tick_sums(window, _ACCEL, "power_w")
    energy = _trapezoid_j(power_ticks)
    per_token = energy / output_tokens if energy is not None and output_tokens else None
    chips = {(s.source, s.labels.get("device"), s.labels.get("chip")) for s in window
             if s.source in _ACCEL and s.name == "util_pct"}
    return {
        "accel_chips": len(chips) if chips else None,
        "accel_util_mean_pct": _mean(util), "accel_util_max_pct": _max(util),
        "accel_mem_peak_mb": _max([v for _, v in mem_ticks]),
        "accel_mem_peak_chip_mb": _max(_values(window, _ACCEL, "mem_used_mb")),
        "accel_mem_capacity_mb": _max([v for _, v in _tick_sums(window, _ACCEL, "mem_total_mb")]),
        "accel_power_mean_w": _mean([v for _, v in power_ticks]),
        "accel_power_max_w": _max([v for _, v in power_ticks]),
        "accel_energy_j": energy, "accel_energy_per_output_token_j": per_token,
        "accel_temp_max_c": _max(_values(window, _ACCEL, "temp_c")),
    }


def _server(window: list[Sample]) -> dict[str, Number]:
    running = _values(window, {"server"}, "running")
    waiting = _values(window, {"server"}, "waiting")
    preempt = [v for _, v in _tick_sums(window, {"server"}, "preemptions")]
    return {
        "server_running_mean": _mean(running), "server_running_max": _max(running),
        "server_waiting_mean": _mean(waiting), "server_waiting_max": _max(waiting),
        "server_kv_usage_peak": _max(_values(window, {"server"}, "kv_usage")),
        "server_preemptions": _counter_increase(preempt),
    }


def _host(window: list[Sample]) -> dict[str, Number]:
    cpu = _values(window, {"host"}, "cpu_pct")
    proc_cpu = _values(window, {"host"}, "proc_cpu_pct")
    return {
        "host_cpu_mean_pct": _mean(cpu), "host_cpu_max_pct": _max(cpu),
        "host_mem_peak_mb": _max(_values(window, {"host"}, "mem_used_mb")),
        "proc_cpu_mean_pct": _mean(proc_cpu), "proc_cpu_max_pct": _max(proc_cpu),
        "proc_rss_peak_mb": _max(_values(window, {"host"}, "proc_rss_mb")),
    }


def _values(window: list[Sample], sources: frozenset[str] | set[str], name: str) -> list[float]:
    return [s.value for s in window if s.source in sources and s.name == name]


def _tick_sums(window: list[Sample], sources: frozenset[str] | set[str], name: str) -> list[tuple[int, float]]:
    """(t_ns, sum over chips/series) per tick, in time order."""
    sums: dict[tuple[str, int], float] = defaultdict(float)
    for s in window:
        if s.source in sources and s.name == name:
            sums[(s.source, s.t_ns)] += s.value
    return sorted((t_ns, value) for (_, t_ns), value in sums.items())


def _trapezoid_j(points: list[tuple[int, float]]) -> Number:
    """Energy in joules: trapezoid rule over (t_ns, watts); None with fewer than two points."""
    if len(points) < 2:
        return None
    return sum((w0 + w1) / 2 * (t1 - t0) / 1e9 for (t0, w0), (t1, w1) in zip(points, points[1:], strict=False))


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
