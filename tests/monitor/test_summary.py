"""Cell summary math on tiny hand-made samples, and the `*` / queue cross-check."""

from __future__ import annotations

import pytest

from tokenbench.monitor.samples import Sample, sample_from_dict
from tokenbench.monitor.summary import SUMMARY_KEYS, queue_cross_check, summarize

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
    s = summarize(SAMPLES, output_tokens=200)
    assert s["accel_chips"] == 2
    assert s["accel_util_mean_pct"] == 30 and s["accel_util_max_pct"] == 50
    assert s["accel_mem_peak_mb"] == 400          # tick sums 300, 400, 300
    assert s["accel_mem_peak_chip_mb"] == 250
    assert s["accel_mem_capacity_mb"] == 2000
    assert s["accel_power_mean_w"] == 200 and s["accel_power_max_w"] == 300
    assert s["accel_energy_j"] == pytest.approx((100 + 200) / 2 + (200 + 300) / 2)   # 400 J
    assert s["accel_energy_per_output_token_j"] == pytest.approx(2.0)
    assert s["accel_temp_max_c"] == 47


def test_server_figures():
    s = summarize(SAMPLES)
    assert s["server_running_max"] == 4 and s["server_running_mean"] == pytest.approx(7 / 3)
    assert s["server_waiting_max"] == 3 and s["server_waiting_mean"] == 1
    assert s["server_kv_usage_peak"] == 0.9
    assert s["server_preemptions"] == 2 + 2 + 2      # 5->7, restart ->2, 2->4


def test_host_figures():
    s = summarize(SAMPLES)
    assert s["host_cpu_mean_pct"] == 20 and s["host_cpu_max_pct"] == 30
    assert s["host_mem_peak_mb"] == 5100
    assert s["proc_cpu_mean_pct"] == 150 and s["proc_rss_peak_mb"] == 800
    assert s["samples"] == len(SAMPLES) and s["span_s"] == 3


def test_window_keeps_only_the_cell():
    s = summarize(SAMPLES, start_ns=1 * S, end_ns=1 * S)
    assert s["accel_util_mean_pct"] == 30 and s["accel_power_mean_w"] == 200
    assert s["accel_energy_j"] is None                # one power point: no interval to integrate
    assert s["server_waiting_max"] == 3 and s["server_preemptions"] == 0


def test_no_samples_means_unknown_not_zero():
    s = summarize([])
    assert list(s) == list(SUMMARY_KEYS)
    assert s["samples"] == 0
    assert all(value is None for key, value in s.items() if key != "samples")


def test_energy_per_token_needs_power_and_tokens():
    s = summarize(server(0, running=1) + server(1, running=1), output_tokens=100)
    assert s["accel_energy_j"] is None and s["accel_energy_per_output_token_j"] is None
    assert summarize(SAMPLES, output_tokens=0)["accel_energy_per_output_token_j"] is None


@pytest.mark.parametrize("star,waiting,expected", [
    (True, 0, "never queued"),
    (True, 3, None),
    (False, 3, "queued up to 3 requests but the cell is not marked *"),
    (False, 0, None),
    (True, None, None),
    (False, None, None),
])
def test_queue_cross_check(star, waiting, expected):
    warning = queue_cross_check(star, {"server_waiting_max": waiting})
    if expected is None:
        assert warning is None
    else:
        assert expected in warning


def test_sample_round_trips_through_a_dict():
    sample = Sample(12, "npu", "util_pct", 17.0, {"device": "0", "chip": "1"})
    assert sample_from_dict(sample.to_dict()) == sample
