"""The subprocess wrapper and the `tokenbench reference-server` command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from tokenbench.cli.main import main
from tokenbench.errors import DeployError
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test


def complete(url: str, body: dict, headers: dict | None = None) -> dict:
    req = urllib.request.Request(f"{url}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def test_process_free_port_affinity_clean_exit_and_send_log():
    cpu = max(os.sched_getaffinity(0))
    cfg = ReferenceConfig(ttft_ms=2, itl_ms=1, api_key="k3y")
    with ReferenceProcess(cfg, cpu=cpu) as ref:
        assert ref.port > 0 and ref.url.endswith(f":{ref.port}")
        assert os.sched_getaffinity(ref.proc.pid) == {cpu}
        assert "k3y" not in " ".join(ref.proc.args)  # the config (and key) travels in the environment
        out = complete(ref.url, {"prompt": [4, 5, 6], "max_tokens": 3, "ignore_eos": True,
                                 "temperature": 0}, {"Authorization": "Bearer k3y", "X-Request-Id": "r1"})
        assert out["usage"]["completion_tokens"] == 3
    assert ref.proc.returncode == 0
    (rec,) = ref.send_log()
    assert rec["x_request_id"] == "r1" and rec["prompt_tokens"] == 3 and rec["tokens"] == [3]


def test_process_that_cannot_start_says_so(tmp_path):
    cfg = ReferenceConfig(ttft_ms=1, itl_ms=1, send_log=str(tmp_path / "missing-dir" / "log.jsonl"))
    with pytest.raises(DeployError), ReferenceProcess(cfg):
        pass


@pytest.mark.parametrize("argv", [
    ["--ttft-ms", "1", "--itl-ms", "1", "--bogus"],
    ["--itl-ms", "1"],
    ["--ttft-ms", "1", "--itl-ms", "1", "--fault", "nope=0.1"],
    ["--ttft-ms", "1", "--itl-ms", "1", "--fault", "stall"],
    ["--ttft-ms", "1", "--itl-ms", "1", "--fault", "stall=0.6", "--fault", "http_500=0.6"],
    ["--ttft-ms", "-1", "--itl-ms", "1"],
    ["--ttft-ms", "1", "--itl-ms", "1", "--api-key-env", "TOKENBENCH_TEST_UNSET_VAR"],
    ["--ttft-ms", "1", "--itl-ms", "1", "--captured-batch-sizes", "0,2"],
    ["--ttft-ms", "1", "--itl-ms", "1", "--captured-batch-sizes", "1,x"],
    ["--ttft-ms", "1", "--itl-ms", "1", "--spec-tokens", "2", "--tokens-per-chunk", "2"],
    ["--ttft-ms", "1", "--itl-ms", "1", "--eager-itl-factor", "0.5"],
])
def test_cli_bad_input_exits_2(argv, capsys):
    assert main(["reference-server", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err


def test_cli_serves_until_sigterm(tmp_path):
    log = tmp_path / "send.jsonl"
    argv = [sys.executable, "-m", "tokenbench.cli.main", "reference-server", "--port", "0", "--ttft-ms", "1",
            "--itl-ms", "1", "--send-log", str(log), "--api-key-env", "REF_KEY", "--fault", "http_503=1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env={**os.environ, "REF_KEY": "abc"})
    try:
        line = proc.stdout.readline()
        url = line.split(" on ", 1)[1].split()[0]
        with pytest.raises(urllib.error.HTTPError) as denied:
            complete(url, {"prompt": "a", "max_tokens": 1})
        assert denied.value.code == 401
        with pytest.raises(urllib.error.HTTPError) as faulted:
            complete(url, {"prompt": "a", "max_tokens": 1}, {"Authorization": "Bearer abc"})
        assert faulted.value.code == 503
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        proc.stdout.close()
    (rec,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert rec["fault"] == "http_503" and rec["status"] == 503


@pytest.mark.parametrize("client_leaves", [True, False])
def test_requests_stalled_at_shutdown_are_in_the_send_log(client_leaves):
    """A stream stalled for 60 s when the server stops (its client gone or still waiting): logged as
    cancelled with the tokens it did write, so the send log always holds every request."""
    import socket
    import time

    cfg = ReferenceConfig(ttft_ms=1, itl_ms=1, faults={"stall": 1.0}, stall_s=60)
    body = json.dumps({"prompt": [4, 5, 6], "max_tokens": 50, "ignore_eos": True, "stream": True}).encode()
    with ReferenceProcess(cfg) as ref:
        sock = socket.create_connection(("127.0.0.1", ref.port), timeout=10)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nX-Request-Id: stalled\r\n\r\n%b" % (len(body), body))
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        time.sleep(0.3)                                  # 50 tokens at 1 ms: the stall has struck
        if client_leaves:
            sock.close()
            time.sleep(0.1)
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 30                    # not the 60 s stall
    if not client_leaves:
        sock.close()
    (rec,) = ref.send_log()
    assert rec["x_request_id"] == "stalled" and rec["fault"] == "stall" and rec["outcome"] == "cancelled"
    assert 0 < sum(rec["tokens"]) < 50 and rec["completion_tokens"] == sum(rec["tokens"])


def test_cli_flags_of_the_load_model_cache_and_speculation_reach_the_server():
    argv = [sys.executable, "-m", "tokenbench.cli.main", "reference-server", "--port", "0", "--ttft-ms", "1",
            "--itl-ms", "1", "--itl-per-running-ms", "0.5", "--prefill-ms-per-token", "0.01",
            "--captured-batch-sizes", "4,1,2", "--eager-itl-factor", "2", "--eager-itl-ms", "1",
            "--prefix-cache-blocks", "32", "--block-size", "4", "--spec-tokens", "2",
            "--spec-accept-text", "0.5", "--spec-accept-random", "0.05"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().split(" on ", 1)[1].split()[0]
        complete(url, {"prompt": list(range(5, 30)), "max_tokens": 4, "ignore_eos": True}, {"X-Session-ID": "a"})
        out = complete(url, {"prompt": list(range(5, 30)), "max_tokens": 4, "ignore_eos": True})
        with urllib.request.urlopen(f"{url}/get_server_info", timeout=10) as r:
            info = json.loads(r.read())
        with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as r:
            models = json.loads(r.read())
        with urllib.request.urlopen(f"{url}/arrivals", timeout=10) as r:
            arrivals = json.loads(r.read())
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        proc.stdout.close()
    assert out["usage"]["prompt_tokens_details"] == {"cached_tokens": 24}
    assert info["cuda_graph_bs"] == [1, 2, 4] and info["cuda_graph_max_bs"] == 4 and info["page_size"] == 4
    assert (info["itl_per_running_ms"], info["prefill_ms_per_token"], info["eager_itl_factor"]) == (0.5, 0.01, 2)
    assert info["speculative_num_draft_tokens"] == 2 and info["disable_radix_cache"] is False
    assert models["data"][0]["meta"] == {"cuda_graph_bs": [1, 2, 4], "cuda_graph_max_bs": 4}
    assert [a["session_id"] for a in arrivals["arrivals"]] == ["a", None]


def test_process_serves_its_arrival_log():
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1)) as ref:
        for i in range(3):
            complete(ref.url, {"prompt": [4, 5], "max_tokens": 1}, {"X-Request-Id": f"r{i}"})
        log = ref.arrivals()
        assert [a["x_request_id"] for a in log["arrivals"]] == ["r0", "r1", "r2"]
        assert ref.arrivals(since=2)["arrivals"] == log["arrivals"][2:]
    assert sorted(r["recv_ns"] for r in ref.send_log()) == [a["recv_ns"] for a in log["arrivals"]]
