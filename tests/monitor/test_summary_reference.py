"""monitor/summary.py against the tables of docs/monitoring.md ("Cell summary", "Coverage"), written out here per
key over any set of samples hypothesis draws: devices of two sources and chips, ticks inside and around the window,
host and server samples; each device's energy from its counter or its power by the documented choice; the
server's devices only; and the queue cross-check's three answers."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.monitor import summary as ms
from tokenbench.monitor import window as win
from tokenbench.monitor.samples import Sample
from tokenbench.monitor.window import CellWindow

S = 1_000_000_000
NAMES = ("util_pct", "mem_used_mb", "mem_total_mb", "power_w", "temp_c")


@st.composite
def cells(draw):
    """Accelerator, host and server samples at ticks 0..12 s (some skipped), and a window inside them."""
    devices = draw(st.lists(st.sampled_from([("gpu", "0", None), ("gpu", "1", None), ("npu", "0", "0"),
                                             ("npu", "0", "1"), ("npu", "3", None)]), min_size=0, max_size=4,
                            unique=True))
    ticks = draw(st.lists(st.integers(0, 24), min_size=1, max_size=14, unique=True).map(sorted))
    value = st.integers(0, 1000).map(float)
    out = []
    for source, device, chip in devices:
        labels = {"device": device, **({"chip": chip} if chip is not None else {})}
        names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
        for t in ticks:
            if draw(st.booleans()) or t == ticks[0]:
                out += [Sample(t * S // 2, source, n, draw(value), labels) for n in names]
    for t in ticks:
        out += [Sample(t * S // 2, "host", n, draw(value), {}) for n in
                draw(st.lists(st.sampled_from(["cpu_pct", "mem_used_mb", "proc_cpu_pct", "proc_rss_mb"]), max_size=4,
                              unique=True))]
        out += [Sample(t * S // 2, "server", n, draw(value), {"engine": "0"}) for n in
                draw(st.lists(st.sampled_from(["running", "waiting", "kv_usage", "preemptions"]), max_size=4,
                              unique=True))]
    start = draw(st.integers(0, 20)) * S // 2
    window = CellWindow(start, start + draw(st.integers(0, 10)) * S // 2, interval_s=0.5,
                        output_tokens=draw(st.none() | st.integers(0, 5000)), requests=draw(st.none() | st.integers(0, 50)))
    return out, window


def _mean(v):
    return sum(v) / len(v) if v else None


def _max(v):
    return max(v) if v else None


def _picked(samples: list[Sample], w: CellWindow) -> list[Sample]:
    keep = set(win.pick(sorted({s.t_ns for s in samples}), w))
    return [s for s in samples if s.t_ns in keep]


def _device_reference(samples: list[Sample], w: CellWindow) -> dict:
    def chosen(name):
        series = [s for s in samples if s.name == name]
        keep = set(win.pick([s.t_ns for s in series], w))
        return [s.value for s in series if s.t_ns in keep]
    out = {"util_mean_pct": _mean(chosen("util_pct")), "util_max_pct": _max(chosen("util_pct")),
           "mem_used_mean_mb": _mean(chosen("mem_used_mb")), "mem_peak_mb": _max(chosen("mem_used_mb")),
           "mem_total_mb": _max(chosen("mem_total_mb")), "power_max_w": _max(chosen("power_w")),
           "power_mean_w": _mean(chosen("power_w"))}
    power = [(s.t_ns, s.value) for s in samples if s.name == "power_w"]
    if power:
        joules = win.integral(power, w)
        out |= {"energy_j": joules, "energy_source": "power",
                "power_mean_w": joules / w.seconds if w.seconds else win.value_at(power, w.start_ns),
                "coverage_pct": win.coverage_pct([t for t, _ in power], w),
                "max_gap_s": win.max_gap_s([t for t, _ in power], w)}
    return out


def _reference(samples: list[Sample], w: CellWindow) -> dict:
    every = sorted(samples, key=lambda s: s.t_ns)
    accel = [s for s in every if s.source in ("gpu", "npu")]
    host = [s for s in every if s.source == "host"]
    server = [s for s in every if s.source == "server"]
    by_device = defaultdict(list)
    for s in accel:
        by_device[(s.source, s.labels["device"] + (f"/{s.labels['chip']}" if "chip" in s.labels else ""))].append(s)
    devices = {k: _device_reference(v, w) for k, v in sorted(by_device.items())}
    chosen, hosted = _picked(accel, w), _picked(host, w)

    def tick_max(part, name):
        sums = defaultdict(float)
        for s in part:
            if s.name == name:
                sums[(s.source, s.t_ns)] += s.value
        return _max(list(sums.values()))

    def total(key):
        known = [d[key] for d in devices.values() if d.get(key) is not None]
        return sum(known) if known else None

    energy = total("energy_j")
    power_devices = [d for d in devices.values() if d.get("energy_source") == "power"]
    values = lambda part, name: [s.value for s in part if s.name == name]   # noqa: E731
    preempt = sorted((t, v) for t, v in defaultdict(float, {s.t_ns: s.value for s in server
                                                            if s.name == "preemptions"}).items())
    steps = [v for _, v in preempt]
    return {
        "samples": len(every), "span_s": (every[-1].t_ns - every[0].t_ns) / S if every else None,
        "window_s": w.seconds, "interval_s": w.interval_s,
        "accel_chips": len({(s.source, s.labels["device"], s.labels.get("chip")) for s in chosen
                            if s.name == "util_pct"}) or None,
        "accel_util_mean_pct": _mean(values(chosen, "util_pct")), "accel_util_max_pct": _max(values(chosen, "util_pct")),
        "accel_mem_used_mean_mb": total("mem_used_mean_mb"), "accel_mem_peak_mb": tick_max(chosen, "mem_used_mb"),
        "accel_mem_peak_chip_mb": _max(values(chosen, "mem_used_mb")), "accel_mem_capacity_mb": total("mem_total_mb"),
        "accel_power_mean_w": total("power_mean_w"), "accel_power_max_w": tick_max(chosen, "power_w"),
        "accel_temp_max_c": _max(values(chosen, "temp_c")),
        "accel_energy_j": energy, "accel_energy_source": "power" if power_devices else None,
        "accel_energy_per_output_token_j": energy / w.output_tokens if energy is not None and w.output_tokens else None,
        "accel_energy_per_request_j": energy / w.requests if energy is not None and w.requests else None,
        "accel_tokens_per_joule": w.output_tokens / energy if energy and w.output_tokens else None,
        "accel_coverage_pct": min((d["coverage_pct"] for d in power_devices), default=None),
        "accel_max_gap_s": max((d["max_gap_s"] for d in power_devices), default=None),
        "host_cpu_mean_pct": _mean(values(hosted, "cpu_pct")), "host_cpu_max_pct": _max(values(hosted, "cpu_pct")),
        "host_mem_peak_mb": _max(values(hosted, "mem_used_mb")),
        "proc_cpu_mean_pct": _mean(values(hosted, "proc_cpu_pct")), "proc_cpu_max_pct": _max(values(hosted, "proc_cpu_pct")),
        "proc_rss_peak_mb": _max(values(hosted, "proc_rss_mb")),
        "server_running_mean": _mean(values(server, "running")), "server_running_max": _max(values(server, "running")),
        "server_waiting_mean": _mean(values(server, "waiting")), "server_waiting_max": _max(values(server, "waiting")),
        "server_kv_usage_peak": _max(values(server, "kv_usage")),
        "server_preemptions": sum(b - a if b >= a else b for a, b in zip(steps, steps[1:], strict=False))
        if steps else None,
    }, devices


@settings(deadline=None, max_examples=60)
@given(cells())
def test_every_figure_is_its_documented_formula(case):
    samples, w = case
    got = ms.summarize(samples, w)
    want, devices = _reference(samples, w)
    for key, value in want.items():
        assert getattr(got, key) == (pytest.approx(value, rel=1e-9, abs=1e-9) if isinstance(value, float) else value), key
    assert [(d.source, d.device) for d in got.devices or []] == list(devices)
    for d, ref in zip(got.devices or [], devices.values(), strict=True):
        for key in ("util_mean_pct", "util_max_pct", "mem_used_mean_mb", "mem_peak_mb", "mem_total_mb",
                    "power_max_w", "power_mean_w", "energy_j", "energy_source", "coverage_pct", "max_gap_s"):
            want_v = ref.get(key)
            assert getattr(d, key) == (pytest.approx(want_v, rel=1e-9, abs=1e-9) if isinstance(want_v, float)
                                       else want_v), key


def gpu(t: float, device: int, **values: float) -> list[Sample]:
    return [Sample(int(t * S), "gpu", name, v, {"device": str(device), "name": "H100"}) for name, v in values.items()]


W = CellWindow(2 * S, 8 * S, interval_s=1.0, output_tokens=100, requests=10)


def test_a_counter_is_used_when_it_moved_or_no_power_was_drawn_else_the_power():
    moving = [*gpu(0, 0, energy_j=0.0, power_w=100.0), *gpu(10, 0, energy_j=1000.0, power_w=100.0)]
    got = ms.summarize(moving, W).devices[0]
    assert (got.energy_source, got.energy_j, got.power_mean_w) == ("counter", pytest.approx(600.0), pytest.approx(100.0))
    still = [*gpu(0, 0, energy_j=50.0, power_w=100.0), *gpu(10, 0, energy_j=50.0, power_w=100.0)]
    assert ms.summarize(still, W).devices[0].energy_source == "power"
    idle = [*gpu(0, 0, energy_j=50.0, power_w=0.0), *gpu(10, 0, energy_j=50.0, power_w=0.0)]
    got = ms.summarize(idle, W).devices[0]
    assert (got.energy_source, got.energy_j, got.max_gap_s) == ("counter", 0.0, 10.0)
    only = [*gpu(0, 0, energy_j=50.0), *gpu(10, 0, energy_j=50.0)]
    assert ms.summarize(only, W).devices[0].energy_source == "counter"
    short = [*gpu(3, 0, energy_j=50.0, power_w=100.0), *gpu(10, 0, energy_j=60.0, power_w=100.0)]
    assert ms.summarize(short, W).devices[0].energy_source == "power"     # no reading at or before the start


def test_a_window_of_no_length_takes_the_power_at_its_start():
    samples = [*gpu(0, 0, power_w=100.0, energy_j=0.0), *gpu(4, 0, power_w=300.0, energy_j=800.0)]
    got = ms.summarize(samples, CellWindow(S, S, interval_s=1.0)).devices[0]
    assert got.energy_j == 0.0 and got.power_mean_w == pytest.approx(150.0)
    got = ms.summarize(gpu(0, 0, power_w=100.0) + gpu(4, 0, power_w=300.0), CellWindow(S, S)).devices[0]
    assert got.energy_source == "power" and got.power_mean_w == pytest.approx(150.0) and got.energy_j == 0.0


def test_without_a_window_the_accelerators_own_span_is_the_window():
    samples = gpu(1, 0, power_w=100.0, util_pct=50.0) + gpu(5, 0, power_w=100.0, util_pct=70.0)
    got = ms.summarize(samples)
    assert got.accel_energy_j == pytest.approx(400.0) and got.accel_util_mean_pct == 60.0
    assert got.window_s is None and got.interval_s is None and got.span_s == 4.0


@pytest.mark.parametrize(("labels", "served"), [({"device": "1"}, True), ({"device": "2"}, False),
                                                ({"device": "0", "phy_id": "1"}, True),
                                                ({"device": "1", "phy_id": "4"}, False), ({"device": "x"}, False),
                                                ({}, False)])
def test_only_the_servers_devices_count_by_index_or_physical_id(labels, served):
    sample = Sample(3 * S, "npu", "util_pct", 40.0, labels)
    got = ms.summarize([sample], CellWindow(2 * S, 4 * S, devices=frozenset({1, 3})))
    assert (got.accel_util_mean_pct == 40.0) == served
    assert ms.summarize([sample], CellWindow(2 * S, 4 * S)).accel_util_mean_pct == 40.0


def test_energy_per_token_and_request_need_counts_above_0():
    samples = gpu(0, 0, power_w=100.0) + gpu(10, 0, power_w=100.0)
    none = ms.summarize(samples, CellWindow(2 * S, 8 * S, output_tokens=0, requests=0))
    assert none.accel_energy_j == 600.0 and none.accel_energy_per_output_token_j is None
    assert none.accel_energy_per_request_j is None and none.accel_tokens_per_joule is None
    zero = ms.summarize(gpu(0, 0, power_w=0.0) + gpu(10, 0, power_w=0.0), W)
    assert zero.accel_energy_j == 0.0 and zero.accel_tokens_per_joule is None
    assert zero.accel_energy_per_output_token_j == 0.0


def test_host_energy_sums_each_zones_increase_and_needs_every_zone():
    rapl = [Sample(t * S, "host", "energy_j", 10.0 * t + z, {"zone": f"package-{z}"}) for t in (0, 9) for z in (0, 1)]
    got = ms.summarize(rapl, W)
    assert got.host_energy_j == pytest.approx(2 * 60.0) and got.host_energy_per_output_token_j == pytest.approx(1.2)
    short = [*rapl, Sample(5 * S, "host", "energy_j", 1.0, {"zone": "package-2"})]
    assert ms.summarize(short, W).host_energy_j is None
    assert ms.summarize(rapl, CellWindow()).host_energy_j == pytest.approx(2 * 90.0)      # the host's own span


@pytest.mark.parametrize(("star", "waiting", "says"), [(True, 0.0, "never queued"), (False, 2.0, "queued up to 2"),
                                                        (True, 1.0, None), (False, 0.0, None), (True, None, None)])
def test_the_queue_cross_check(star, waiting, says):
    got = ms.queue_cross_check(star, ms.MonitorFigures(server_waiting_max=waiting))
    assert (got is None) == (says is None) and (says is None or says in got)


def test_the_keys_are_the_monitor_figures():
    assert ms.SUMMARY_KEYS == tuple(ms.MonitorFigures.model_fields) and "accel_energy_j" in ms.SUMMARY_KEYS
    assert np.isclose(ms.summarize([], W).window_s, 6.0) and ms.summarize([], W).samples == 0
