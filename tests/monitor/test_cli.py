"""`tokenbench parse` and `tokenbench monitor` through main(): JSON out, one-line errors, exit codes."""

from __future__ import annotations

import io
import json

import pytest

from tokenbench.cli.main import main

from .helpers import FIXTURES, fixture_files, fixture_text


def run(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


@pytest.mark.parametrize("path", fixture_files("npu-smi"), ids=lambda p: p.name)
def test_parse_every_npu_smi_capture(capsys, path):
    code, out, err = run(["parse", "npu-smi", str(path)], capsys)
    assert code == 0 and err == []
    document = json.loads(out)
    assert document["kind"] == "npu-smi" and document["chips"] > 0
    assert document["samples"] and {s["t_ns"] for s in document["samples"]} == {0}
    assert {s["source"] for s in document["samples"]} == {"npu"}


def test_parse_npu_smi_numbers(capsys):
    code, out, _ = run(["parse", "npu-smi", str(FIXTURES / "npu-smi/26.1.0-910b3-5col-one-process.txt")], capsys)
    document = json.loads(out)
    assert document["version"] == "26.1.0" and document["idle_npus"] == [1, 2, 3, 4, 5, 6, 7]
    procs = [s for s in document["samples"] if s["name"] == "proc_mem_mb"]
    assert procs == [{"t_ns": 0, "source": "npu", "name": "proc_mem_mb", "value": 5175.0,
                      "labels": {"device": "0", "chip": "0", "pid": "485946", "process": "pytest"}}]


@pytest.mark.parametrize("path", fixture_files("prometheus"), ids=lambda p: p.name)
def test_parse_every_metrics_capture(capsys, path):
    code, out, _ = run(["parse", "prometheus", str(path)], capsys)
    document = json.loads(out)
    assert code == 0 and document["engine"] in ("vllm", "sglang", "llamacpp")


def test_parse_prometheus_with_engine_and_from_stdin(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(fixture_text("prometheus/sglang-docs-production-metrics.txt")))
    code, out, _ = run(["parse", "prometheus", "-", "--engine", "sglang"], capsys)
    document = json.loads(out)
    assert code == 0 and document["signals"]["waiting"] == 2826.0


def test_parse_nvidia_smi_header_and_noheader(capsys):
    code, out, _ = run(["parse", "nvidia-smi", str(FIXTURES / "nvidia-smi/bpytop-26-header-units-extra-columns.csv")],
                       capsys)
    assert code == 0 and json.loads(out)["gpus"] == 2
    base = FIXTURES / "nvidia-smi/gpu-utils-83-noheader-nounits"
    query = base.with_suffix(".query").read_text().strip()
    code, out, _ = run(["parse", "nvidia-smi", str(base.with_suffix(".csv")), "--query", query], capsys)
    power = [s["value"] for s in json.loads(out)["samples"] if s["name"] == "power_w"]
    assert code == 0 and power == [176.98]


@pytest.mark.parametrize("args,needle", [
    (["parse", "npu-smi", str(FIXTURES / "prometheus/sglang-docs-production-metrics.txt")], "no npu-smi device rows"),
    (["parse", "nvidia-smi", str(FIXTURES / "nvidia-smi/gpu-utils-83-noheader-nounits.csv")], "--query-gpu list"),
    (["parse", "prometheus", str(FIXTURES / "npu-smi/25.2.3-a3-busy.txt")], "not Prometheus text"),
    (["parse", "npu-smi", str(FIXTURES / "npu-smi/25.2.3-a3-busy.txt"), "--engine", "vllm"], "--engine applies"),
    (["parse", "prometheus", str(FIXTURES / "npu-smi/25.2.3-a3-busy.txt"), "--query", "index"], "--query applies"),
])
def test_parse_errors_are_one_line_with_exit_2(capsys, args, needle):
    code, out, err = run(args, capsys)
    assert code == 2 and out == ""
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0]


def test_parse_usage_mistakes(capsys):
    assert run(["parse", "npu-smi", "/no/such/file.txt"], capsys)[0] == 2
    assert run(["parse", "dcgm", str(FIXTURES / "SOURCES.md")], capsys)[0] == 2


def test_monitor_stops_after_count(capsys, metrics_server):
    metrics_server.body = fixture_text("prometheus/llamacpp-xllamacpp-2-processing-2-deferred.txt")
    code, out, err = run(["monitor", "--base-url", metrics_server.url, "--interval", "0.05", "--count", "3"],
                         capsys)
    assert code == 0
    assert "running" in out and "waiting" in out and "cpu_pct" in out
    assert "llamacpp:" not in out   # raw engine metrics stay out of the live view
    assert not any("server unavailable" in line for line in err)


def test_monitor_reports_an_unreachable_server_once_and_runs_on(capsys):
    code, out, err = run(["monitor", "--base-url", "http://127.0.0.1:9", "--interval", "0.05", "--count", "2"],
                         capsys)
    assert code == 0 and "cpu_pct" in out
    assert len([line for line in err if "server unavailable" in line]) == 1


def test_monitor_rejects_a_zero_interval(capsys):
    assert run(["monitor", "--interval", "0", "--count", "1"], capsys)[0] == 2
