"""Cell summary math on tiny hand-made samples, and the `*` / queue cross-check."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenbench.deploy.profiles import load_profile
from tokenbench.metrics.summary_groups import MonitorFigures
from tokenbench.monitor.samples import Sample, sample_from_dict
from tokenbench.monitor.summary import SUMMARY_KEYS, queue_cross_check, summarize
from tokenbench.monitor.window import CellWindow
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.study.monitoring import served_devices
from tokenbench.study.servers import Server

S = 1_000_000_000


def npu(t, chip, **values):
    return [Sample(t * S, "npu", name, value, {"device": "0", "chip": str(chip)})
            for name, value in values.items()]


def server(t, **values):
    return [Sample(t * S, "server", name, value, {"engine": "vllm"}) for name, value in values.items()]


def host(t, **values):
    return [Sample(t * S, "host", name, value, {}) for name, value in values.items()]


# Two chips of one A3 NPU over three ticks one second apart; power only on chip 0 (board power).
SAMPLES = (
    npu(0, 0, util_pct=10, mem_used_mb=100, mem_total_mb=1000, power_w=100, temp_c=40)
    + npu(0, 1, util_pct=30, mem_used_mb=200, mem_total_mb=1000, temp_c=41)
    + npu(1, 0, util_pct=20, mem_used_mb=150, mem_total_mb=1000, power_w=200, temp_c=45)
    + npu(1, 1, util_pct=40, mem_used_mb=250, mem_total_mb=1000, temp_c=47)
    + npu(2, 0, util_pct=30, mem_used_mb=120, mem_total_mb=1000, power_w=300, temp_c=44)
    + npu(2, 1, util_pct=50, mem_used_mb=180, mem_total_mb=1000, temp_c=43)
    + server(0, running=1, waiting=0, kv_usage=0.1, preemptions=5)
    + server(1, running=4, waiting=3, kv_usage=0.9, preemptions=7)
    + server(2, running=2, waiting=0, kv_usage=0.5, preemptions=2)   # counter reset: a restart
    + server(3, preemptions=4)
    + [Sample(1 * S, "server", "vllm:num_requests_waiting", 3.0, {"engine": "0"})]
    + host(0, cpu_pct=10, mem_used_mb=5000) + host(2, cpu_pct=30, mem_used_mb=5100)
    + host(2, proc_cpu_pct=150, proc_rss_mb=800)
)


def test_accelerator_figures():
    s = summarize(SAMPLES, CellWindow(output_tokens=200))
    assert s.accel_chips == 2
    assert s.accel_util_mean_pct == 30 and s.accel_util_max_pct == 50
    assert s.accel_mem_peak_mb == 400          # tick sums 300, 400, 300
    assert s.accel_mem_peak_chip_mb == 250
    assert s.accel_mem_capacity_mb == 2000
    assert s.accel_power_mean_w == 200 and s.accel_power_max_w == 300
    assert s.accel_energy_j == pytest.approx((100 + 200) / 2 + (200 + 300) / 2)   # 400 J
    assert s.accel_energy_per_output_token_j == pytest.approx(2.0)
    assert s.accel_temp_max_c == 47


def test_server_figures():
    s = summarize(SAMPLES)
    assert s.server_running_max == 4 and s.server_running_mean == pytest.approx(7 / 3)
    assert s.server_waiting_max == 3 and s.server_waiting_mean == 1
    assert s.server_kv_usage_peak == 0.9
    assert s.server_preemptions == 2 + 2 + 2      # 5->7, restart ->2, 2->4


def test_host_figures():
    s = summarize(SAMPLES)
    assert s.host_cpu_mean_pct == 20 and s.host_cpu_max_pct == 30
    assert s.host_mem_peak_mb == 5100
    assert s.proc_cpu_mean_pct == 150 and s.proc_rss_peak_mb == 800
    assert s.samples == len(SAMPLES) and s.span_s == 3


def test_window_keeps_only_the_cell():
    s = summarize(SAMPLES, CellWindow(1 * S, 1 * S))
    assert s.accel_util_mean_pct == 30 and s.accel_power_mean_w == 200
    assert s.accel_energy_j == 0                   # a window of no length holds no energy
    assert s.window_s == 0 and s.interval_s == 1.0
    # the server's (throttled) scrapes are read over the whole cell, not the window
    assert s.server_waiting_max == 3 and s.server_preemptions == 6


def test_no_samples_means_unknown_not_zero():
    s = summarize([])
    assert s.samples == 0
    assert all(getattr(s, key) is None for key in SUMMARY_KEYS if key != "samples")


def test_energy_per_token_needs_power_and_tokens():
    s = summarize(server(0, running=1) + server(1, running=1), CellWindow(output_tokens=100))
    assert s.accel_energy_j is None and s.accel_energy_per_output_token_j is None
    assert summarize(SAMPLES, CellWindow(output_tokens=0)).accel_energy_per_output_token_j is None


@pytest.mark.parametrize("star,waiting,expected", [
    (True, 0, "never queued"),
    (True, 3, None),
    (False, 3, "queued up to 3 requests but the cell is not marked *"),
    (False, 0, None),
    (True, None, None),
    (False, None, None),
])
def test_queue_cross_check(star, waiting, expected):
    warning = queue_cross_check(star, MonitorFigures(server_waiting_max=waiting))
    if expected is None:
        assert warning is None
    else:
        assert expected in warning


def test_sample_round_trips_through_a_dict():
    sample = Sample(12, "npu", "util_pct", 17.0, {"device": "0", "chip": "1"})
    assert sample_from_dict(sample.to_dict()) == sample


# ---- the measured window: per device, summed, covered ----

def gpu(t_s: float, device: int, **values):
    return [Sample(int(t_s * S), "gpu", name, value, {"device": str(device), "name": "NVIDIA H200"})
            for name, value in values.items()]


def steady(devices: int, watts: float, start: float, end: float, skip=(), counter=False):
    """GPU samples every 0.5 s from `start` to `end` at constant power (none inside `skip`), with
    warmup-like idle power outside [2, 8] s that the window must leave out."""
    out = []
    t, every = start, 0.5
    while t <= end + 1e-9:
        if not skip or not skip[0] < t < skip[1]:
            busy = 2.0 <= t <= 8.0
            for d in range(devices):
                extra = {"energy_j": watts * t} if counter else {}
                out += gpu(t, d, util_pct=90 if busy else 5, mem_used_mb=70000 + d, mem_total_mb=143771,
                           power_w=watts if busy else 80.0, **extra)
        t += every
    return out


WINDOW = CellWindow(2 * S, 8 * S, interval_s=0.5, output_tokens=1200, requests=40)


@pytest.mark.parametrize("devices,watts", [(1, 400.0), (2, 250.0), (8, 700.0)])
def test_energy_over_the_window_per_device_and_summed(devices, watts):
    s = summarize(steady(devices, watts, 0, 10), WINDOW)
    assert s.window_s == 6 and len(s.devices) == devices
    assert s.accel_energy_j == pytest.approx(devices * watts * 6)        # idle before and after left out
    assert s.accel_power_mean_w == pytest.approx(devices * watts)
    assert s.accel_energy_per_output_token_j == pytest.approx(devices * watts * 6 / 1200)
    assert s.accel_tokens_per_joule == pytest.approx(1 / s.accel_energy_per_output_token_j)
    assert s.accel_energy_per_request_j == pytest.approx(devices * watts * 6 / 40)
    assert s.accel_util_mean_pct == 90 and s.accel_mem_capacity_mb == devices * 143771
    assert all(d.energy_j == pytest.approx(watts * 6) and d.energy_source == "power" for d in s.devices)
    assert s.accel_energy_source == "power" and not s.power_sparse


def test_an_outage_of_30_percent_marks_power_and_energy():
    s = summarize(steady(1, 400.0, 0, 10, skip=(4.0, 5.9)), WINDOW)       # silent for 1.9 s of 6
    assert s.accel_max_gap_s == pytest.approx(2.0) and s.accel_coverage_pct < 90
    assert s.power_sparse
    assert s.accel_energy_j == pytest.approx(400 * 6)       # the constant still integrates; the mark says why
    # a gap just over two intervals marks too, though it covers more than 90 %
    short = summarize(steady(1, 400.0, 0, 10, skip=(4.0, 5.1)), WINDOW)
    assert short.accel_coverage_pct > 90 and short.accel_max_gap_s > 2 * 0.5 and short.power_sparse


def test_an_energy_counter_is_exact_through_an_outage_inside_the_window_and_not_marked():
    s = summarize(steady(2, 300.0, 0, 10, skip=(4.0, 5.9), counter=True), WINDOW)
    assert s.accel_energy_source == "counter"
    # the counter ran at 300 W all along (warmup included): its increase over the window is 300 W x 6 s each
    assert s.accel_energy_j == pytest.approx(2 * 300 * 6)
    assert s.accel_coverage_pct is None and not s.power_sparse


def drawn(t: float) -> float:
    """The energy (J) a GPU drawing 80 W idle before 2 s and after 8 s, 400 W between, used from 0 to `t`."""
    busy = min(max(t, 2.0), 8.0) - 2.0
    return 80.0 * (t - busy) + 400.0 * busy


def counted(skip=(), energy=drawn):
    """One GPU read every 0.5 s from 0 to 10 s (none inside `skip`): its power and its energy counter."""
    out, t = [], 0.0
    while t <= 10 + 1e-9:
        if not skip or not skip[0] < t < skip[1]:
            out += gpu(t, 0, power_w=400.0 if 2.0 <= t <= 8.0 else 80.0, energy_j=energy(t))
        t += 0.5
    return out


def test_a_counter_is_exact_through_a_gap_inside_the_window():
    s = summarize(counted(skip=(3.2, 6.8)), WINDOW)
    assert s.accel_energy_source == "counter" and s.accel_energy_j == pytest.approx(400.0 * 6)
    assert s.accel_max_gap_s <= 0.5 and not s.power_sparse              # read at (or near) each edge


@pytest.mark.parametrize("skip", [(0.2, 3.8), (6.2, 9.8)], ids=["start", "end"])
def test_a_counter_read_far_from_an_edge_of_the_window_marks_its_energy(skip):
    """Its value at the edge is interpolated across idle and busy time: not a measurement, and marked so."""
    s = summarize(counted(skip=skip), WINDOW)
    assert s.accel_energy_source == "counter" and s.accel_energy_j != pytest.approx(400.0 * 6)
    assert s.accel_max_gap_s == pytest.approx(4.0) and s.power_sparse


@pytest.mark.parametrize(("start", "end"), [(5, 5), (5, 7)])
def test_an_idle_device_reading_0_w_has_its_counters_0_j_over_any_window_even_one_of_no_length(start, end):
    """A counter that stays put while the device reads 0 W is right (nothing drawn): 0 J from the counter and a
    mean power of 0 W, also over a window of no length (the power at its instant)."""
    idle = [x for t in range(11) for x in gpu(t, 0, power_w=0.0, energy_j=500.0)]
    s = summarize(idle, CellWindow(start * S, end * S))
    assert (s.accel_energy_source, s.accel_energy_j, s.accel_power_mean_w) == ("counter", 0.0, 0.0)


def test_a_counter_that_does_not_move_while_power_is_drawn_is_not_used():
    s = summarize(counted(energy=lambda t: 123456.0), WINDOW)
    assert s.accel_energy_source == "power" and s.accel_energy_j == pytest.approx(400.0 * 6)


def test_a_counter_that_resets_inside_the_window_gives_way_to_the_power_samples():
    s = summarize(counted(energy=lambda t: drawn(t) if t < 5 else drawn(t) - drawn(5)), WINDOW)
    assert s.accel_energy_source == "power" and s.accel_energy_j == pytest.approx(400.0 * 6)


def test_warmup_and_idle_outside_the_window_change_nothing():
    inside = summarize(steady(1, 400.0, 2, 8), WINDOW)
    around = summarize(steady(1, 400.0, 0, 30), WINDOW)
    for key in ("accel_energy_j", "accel_power_mean_w", "accel_util_mean_pct", "accel_util_max_pct"):
        assert getattr(inside, key) == pytest.approx(getattr(around, key))


def test_host_energy_from_rapl_counters_summed_over_packages():
    rapl = [Sample(int(t * S), "host", "energy_j", 50.0 * t + zone * 7, {"zone": f"package-{zone}"})
            for t in (0, 1, 3, 5, 9) for zone in (0, 1)]
    s = summarize(rapl + host(0, cpu_pct=10) + host(5, cpu_pct=90), WINDOW)
    assert s.host_energy_j == pytest.approx(2 * 50 * 6)
    assert s.host_energy_per_output_token_j == pytest.approx(600 / 1200)
    assert s.host_cpu_mean_pct == 90 and s.host_cpu_max_pct == 90      # the sample inside the window


def test_monitor_figures_round_trip_through_the_stored_form():
    s = summarize(steady(2, 250.0, 0, 10), WINDOW)
    again = MonitorFigures.take(dict(s.flat()))
    assert again == s and again.devices[1].device == "1"


def test_only_the_servers_devices_count_when_its_profile_names_them():
    samples = steady(8, 400.0, 0, 10)                       # a host of 8 GPUs, the server on 2 of them
    profile = load_profile("nvidia-vllm", ("parallelism.tp=2",))
    devices = served_devices(Server("http://127.0.0.1:1", ServerFacts.from_dict({"engine": "vllm"}), profile))
    assert devices == frozenset({0, 1})
    s = summarize(samples, replace(WINDOW, devices=devices))
    assert [d.device for d in s.devices] == ["0", "1"] and s.accel_energy_j == pytest.approx(2 * 400 * 6)
    assert summarize(samples, WINDOW).accel_energy_j == pytest.approx(8 * 400 * 6)   # unknown: every GPU seen
