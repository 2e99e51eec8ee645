"""nvidia-smi CSV: real captures with and without header/units/[N/A], and the sampler's own query."""

from __future__ import annotations

import pytest

from tokenbench.errors import UsageError
from tokenbench.monitor.nvidia_smi import QUERY, GpuReading, gpu_samples, parse_nvidia_smi

from .helpers import fixture_text

BPYTOP = "nvidia-smi/bpytop-26-header-units-extra-columns.csv"
GPU_UTILS = "nvidia-smi/gpu-utils-83-noheader-nounits"
GB10 = "nvidia-smi/unsloth-10703-gb10-na.csv"


def test_header_with_units_and_extra_columns():
    first, second = parse_nvidia_smi(fixture_text(BPYTOP))
    assert first == GpuReading(index=0, name="GeForce GTX 1080 Ti", uuid="", util_pct=36.0, mem_used_mb=2856.0,
                               mem_total_mb=11175.0, power_w=106.56, temp_c=60.0)
    assert second == GpuReading(index=1, name="GeForce GTX 1060 6GB", uuid="", util_pct=0.0, mem_used_mb=4.0,
                                mem_total_mb=6078.0, power_w=5.68, temp_c=49.0)


def test_noheader_nounits_needs_the_query_it_was_run_with():
    query = tuple(fixture_text(GPU_UTILS + ".query").strip().split(","))
    (gpu,) = parse_nvidia_smi(fixture_text(GPU_UTILS + ".csv"), query)
    assert (gpu.name, gpu.uuid) == ("GeForce RTX 2080", "GPU-22b2c6ac-2d49-4863-197c-9c469071178a")
    assert (gpu.util_pct, gpu.mem_total_mb, gpu.power_w, gpu.temp_c) == (86.0, 7979.0, 176.98, 45.0)
    assert gpu.mem_used_mb is None  # not in that query
    with pytest.raises(UsageError, match="8 expected columns"):
        parse_nvidia_smi(fixture_text(GPU_UTILS + ".csv"))


def test_not_available_is_unknown_never_zero():
    (gpu,) = parse_nvidia_smi(fixture_text(GB10))
    assert (gpu.index, gpu.name) == (0, "NVIDIA GB10")
    assert gpu.mem_used_mb is None and gpu.mem_total_mb is None
    assert gpu_samples([gpu], 0) == []


def test_units_stripped_capture_reads_the_same():
    text = fixture_text(BPYTOP)
    header, *rows = text.splitlines()
    nounits = "\n".join([header] + [r.replace(" %", "").replace(" MiB", "").replace(" W", "")
                                    .replace(" MHz", "") for r in rows])
    assert parse_nvidia_smi(nounits) == parse_nvidia_smi(text)


def test_default_query_in_all_three_formats():
    values = "0, NVIDIA H200, GPU-5e37, 87, 70123, 143771, 512.31, 61"
    units = "0, NVIDIA H200, GPU-5e37, 87 %, 70123 MiB, 143771 MiB, 512.31 W, 61"
    header = ("index, name, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], "
              "power.draw [W], temperature.gpu")
    expected = [GpuReading(index=0, name="NVIDIA H200", uuid="GPU-5e37", util_pct=87.0, mem_used_mb=70123.0,
                           mem_total_mb=143771.0, power_w=512.31, temp_c=61.0)]
    assert parse_nvidia_smi(values) == expected
    assert parse_nvidia_smi(header + "\n" + units) == expected
    assert parse_nvidia_smi(header.replace(" [%]", "").replace(" [MiB]", "").replace(" [W]", "")
                            + "\n" + values) == expected
    assert parse_nvidia_smi(values.replace("512.31", "[N/A]"))[0].power_w is None


def test_used_memory_from_total_and_free():
    (gpu,) = parse_nvidia_smi("index, memory.total [MiB], memory.free [MiB]\n2, 81559 MiB, 1559 MiB\n")
    assert (gpu.index, gpu.mem_used_mb) == (2, 80000.0)


def test_samples_carry_device_labels():
    readings = parse_nvidia_smi(fixture_text(BPYTOP))
    samples = gpu_samples(readings, 7)
    power = [(s.labels["device"], s.value) for s in samples if s.name == "power_w"]
    assert power == [("0", 106.56), ("1", 5.68)]
    assert {s.source for s in samples} == {"gpu"} and {s.t_ns for s in samples} == {7}


@pytest.mark.parametrize("text", [
    "", "Failed to initialize NVML: Driver/library version mismatch",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
])
def test_error_output_is_a_usage_error(text):
    with pytest.raises(UsageError):
        parse_nvidia_smi(text)


def test_the_sampler_query_is_the_documented_one():
    assert QUERY == ("index", "name", "uuid", "utilization.gpu", "memory.used", "memory.total",
                     "power.draw", "temperature.gpu")
