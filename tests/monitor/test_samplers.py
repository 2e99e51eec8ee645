"""Samplers: missing tools say why, real tools are run with timeouts, HTTP is short, host is psutil."""

from __future__ import annotations

import os
import socket
import sys
import time
import types
from collections import namedtuple

import pytest

from tests.raw_server import RawServer
from tokenbench.deploy.address import on_this_host
from tokenbench.deploy.engines import metric_names
from tokenbench.deploy.profiles import load_profile
from tokenbench.errors import MeasurementError, TargetError
from tokenbench.monitor.samplers import (
    HostSampler,
    NpuSmiSampler,
    NvidiaSmiSampler,
    PrometheusSampler,
    default_samplers,
)
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.study.monitoring import samplers_for
from tokenbench.study.servers import Server

from .helpers import FIXTURES, fixture_text


def names(samples):
    return {s.name for s in samples}


def test_missing_tools_are_unavailable_with_a_reason(fake_tool):
    for sampler in (NpuSmiSampler(), NvidiaSmiSampler(use_nvml=False)):
        availability = sampler.available()
        assert not availability
        assert "not found on PATH" in availability.reason and sampler.tool in availability.reason


def test_npu_smi_sampler_runs_the_tool_and_stamps_the_midpoint(fake_tool):
    fake_tool("npu-smi", f"cat '{FIXTURES / 'npu-smi' / '25.2.3-a3-busy.txt'}'")
    sampler = NpuSmiSampler()
    assert sampler.available()
    before = time.perf_counter_ns()
    samples = sampler.sample()
    after = time.perf_counter_ns()
    assert {"util_pct", "mem_used_mb", "power_w", "proc_mem_mb"} <= names(samples)
    (t_ns,) = {s.t_ns for s in samples}
    assert before <= t_ns <= after


def test_failing_and_hanging_tools_raise_measurement_errors(fake_tool):
    fake_tool("npu-smi", "echo 'dcmi module initialize failed' >&2; exit 3")
    with pytest.raises(MeasurementError, match="exited with 3: dcmi module initialize failed"):
        NpuSmiSampler().sample()
    fake_tool("npu-smi", "sleep 5")
    started = time.monotonic()
    with pytest.raises(MeasurementError, match="took over 0.2 s"):
        NpuSmiSampler(timeout_s=0.2).sample()
    assert time.monotonic() - started < 3


def test_nvidia_smi_sampler_reads_its_noheader_nounits_query(fake_tool):
    fake_tool("nvidia-smi", 'echo "0, NVIDIA H200, GPU-5e37, 87, 70123, 143771, 512.31, 61"')
    samples = NvidiaSmiSampler(use_nvml=False).sample()
    values = {s.name: s.value for s in samples}
    assert values == {"util_pct": 87.0, "mem_used_mb": 70123.0, "mem_total_mb": 143771.0,
                      "power_w": 512.31, "temp_c": 61.0}
    assert samples[0].labels == {"device": "0", "name": "NVIDIA H200", "uuid": "GPU-5e37"}


def fake_pynvml(unsupported_memory: bool = False) -> types.ModuleType:
    nv = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    memory = namedtuple("memory", "total free used")
    util = namedtuple("util", "gpu memory")

    def memory_info(handle):
        if unsupported_memory:
            raise NVMLError("Not Supported")
        return memory(80 * 2**30, 30 * 2**30, 50 * 2**30)

    nv.NVMLError = NVMLError
    nv.NVML_TEMPERATURE_GPU = 0
    nv.nvmlInit = lambda: None
    nv.nvmlDeviceGetCount = lambda: 1
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetMemoryInfo = memory_info
    nv.nvmlDeviceGetUtilizationRates = lambda h: util(64, 20)
    nv.nvmlDeviceGetPowerUsage = lambda h: 301_500
    nv.nvmlDeviceGetTemperature = lambda h, kind: 55
    nv.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    nv.nvmlDeviceGetUUID = lambda h: "GPU-abcd"
    return nv


def test_nvml_is_used_when_importable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    sampler = NvidiaSmiSampler()
    assert sampler.available() and sampler.use_nvml
    values = {s.name: s.value for s in sampler.sample()}
    assert values == {"util_pct": 64.0, "mem_used_mb": 51200.0, "mem_total_mb": 81920.0,
                      "power_w": 301.5, "temp_c": 55.0}


def test_nvml_unsupported_query_is_unknown(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(unsupported_memory=True))
    names_seen = names(NvidiaSmiSampler().sample())
    assert "mem_used_mb" not in names_seen and "util_pct" in names_seen


def test_prometheus_sampler(metrics_server):
    metrics_server.body = fixture_text("prometheus/llamacpp-xllamacpp-2-processing-2-deferred.txt")
    sampler = PrometheusSampler(metrics_server.url + "/", metric_names(), engine="auto")
    assert sampler.url == metrics_server.url + "/metrics" and sampler.engine is None
    assert sampler.available()
    values = {s.name: s.value for s in sampler.sample() if ":" not in s.name}
    assert values["running"] == 2 and values["waiting"] == 2


def test_prometheus_sampler_errors(metrics_server):
    metrics_server.status = 404
    availability = PrometheusSampler(metrics_server.url, metric_names()).available()
    assert not availability and "HTTP 404" in availability.reason
    metrics_server.status = 200
    metrics_server.body = "<html>502 Bad Gateway</html>"
    with pytest.raises(TargetError, match="not metrics"):
        PrometheusSampler(metrics_server.url, metric_names()).sample()
    closed = PrometheusSampler("http://127.0.0.1:9", metric_names(), timeout_s=0.5)
    assert not closed.available()
    with pytest.raises(TargetError, match="cannot read"):
        closed.sample()


def test_host_sampler_with_and_without_a_process():
    samples = HostSampler().sample()
    assert names(samples) == {"cpu_pct", "mem_used_mb", "mem_pct"}
    fresh = HostSampler(pid=os.getpid())
    assert "proc_cpu_pct" not in names(fresh.sample())   # psutil's first per-process reading is void
    primed = HostSampler(pid=os.getpid())
    assert primed.available()
    mine = primed.sample()
    assert "proc_cpu_pct" in names(mine)
    rss = [s for s in mine if s.name == "proc_rss_mb"]
    assert rss and rss[0].value > 1 and rss[0].labels == {"pid": str(os.getpid())}
    gone = HostSampler(pid=2**22 + 12345)
    assert not gone.available() and "does not exist" in gone.available().reason


def test_default_samplers():
    kinds = [type(s).__name__ for s in default_samplers()]
    assert kinds == ["HostSampler", "NpuSmiSampler", "NvidiaSmiSampler"]
    with_server = default_samplers("http://127.0.0.1:8000", "vllm", pid=os.getpid(), names=metric_names())
    assert isinstance(with_server[-1], PrometheusSampler) and with_server[-1].engine == "vllm"
    assert with_server[-1].names == metric_names()


@pytest.mark.parametrize("url,here", [("http://127.0.0.1:8000", True), ("http://localhost:8000", True),
                                      (f"http://{socket.gethostname()}:8000", True),
                                      ("http://192.0.2.7:8000", False), ("http://no-such-host.invalid:8000", False)])
def test_a_server_not_on_this_host_has_no_accelerator_samplers(url, here):
    """The accelerators tokenbench sees here are a server's only when the server runs here (TEST-NET-1 and
    .invalid are never this host)."""
    server = Server(url, ServerFacts.from_dict({"engine": "vllm"}), None)
    names = {type(s).__name__ for s in samplers_for(server)}
    assert on_this_host(url) == here
    assert ({"NpuSmiSampler", "NvidiaSmiSampler"} <= names) == here and "HostSampler" in names
    deployed = Server(url, ServerFacts.from_dict({"engine": "vllm"}), load_profile("nvidia-vllm"))
    assert "NvidiaSmiSampler" in {type(s).__name__ for s in samplers_for(deployed)}     # deployed here


WHOLE = b"HTTP/1.1 200 OK\r\nContent-Length: 28\r\n\r\nvllm:num_requests_running 1\n"
CUT = b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\nvllm:num_requests_running 1\n"   # then closed


def test_an_answer_cut_off_is_a_failed_sample_not_an_internal_error():
    """A /metrics answer cut off in mid-body (the server killed while it wrote) is the sampler's TargetError,
    so the monitor counts a failed sample and goes on; it escaped as http.client.IncompleteRead, which the
    monitor handed to the cell and the CLI reported as an internal error (exit 70)."""
    from tokenbench.client import api
    from tokenbench.monitor.runner import Monitor

    server = RawServer(CUT)
    try:
        with pytest.raises(TargetError, match="cannot read .*IncompleteRead"):
            PrometheusSampler(server.url, metric_names()).sample()
        server.reply = WHOLE                            # the monitor's availability check is answered
        warnings: list[str] = []
        monitor = Monitor([PrometheusSampler(server.url, metric_names())], interval_s=0.05,
                          on_warning=warnings.append).start()
        server.reply = CUT                              # then every answer is cut off
        time.sleep(0.3)
        monitor.stop()                                  # raised IncompleteRead
        assert any("server failed" in w and "IncompleteRead" in w for w in warnings)
        assert api.call(server.url, "/reset_prefix_cache", {}, quiet=True) == (0, b"")
        with pytest.raises(TargetError, match="cannot reach"):
            api.call(server.url, "/v1/models")
    finally:
        server.close()
