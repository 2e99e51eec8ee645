"""The real SGLang server (sglang 0.5.23 on the CPU, Gemma 3 270M bf16): facts read from the server, exact
token counts through tokenbench, zero calls into the sgl_kernel stand-in, `tokenbench agree --peer sglang`,
and a deployment that leaves no process behind. Speeds are never asserted (the machine is shared)."""

from __future__ import annotations

import json
import socket

import psutil
import pytest

from tokenbench.cli.main import main
from tokenbench.client import api
from tokenbench.deploy import state
from tokenbench.local_engines import sglang_cpu, vllm_cpu

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]


def test_facts_come_from_the_real_server(sglang_server):
    facts = sglang_server.facts
    info = api.get_json(sglang_server.base_url, "/get_server_info")
    assert (facts.engine, facts.version, facts.model) == ("sglang", "0.5.23", "gemma3-270m")
    assert facts.kv_capacity_tokens == info["max_total_num_tokens"] == 65536       # --max-total-tokens
    assert facts.source["kv_capacity_tokens"] == "/get_server_info max_total_num_tokens"
    assert facts.ctx_per_seq == 2048 and facts.prefix_cache == "enabled"          # radix cache on (default)
    assert facts.metrics == {"running": "sglang:num_running_reqs", "waiting": "sglang:num_queue_reqs",
                             "kv_usage": "sglang:token_usage"}


def test_bench_counts_are_exact_and_the_stand_in_is_never_called(sglang_server, tmp_path):
    out = tmp_path / "run.json"
    code = main(["bench", "--base-url", sglang_server.base_url, "--input-len", "64", "--output-len", "6",
                 "--concurrency", "2", "--num-prompts", "4", "--warmup-requests", "1",
                 "--tokenizer", str(vllm_cpu.model_dir()), "--output", str(out), "--no-store"])
    assert code == 0
    cell = json.loads(out.read_text())["cells"][0]
    s = cell["summary"]
    assert (cell["status"], s["completed"], s["failed"], s["length_mismatches"]) == ("ok", 4, 0, 0)
    assert (s["total_input_tokens"], s["total_output_tokens"]) == (4 * 64, 4 * 6)
    for r in cell["requests"]:
        assert (r["prompt_tokens"], r["completion_tokens"], r["usage_source"]) == (64, 6, "server")
        assert sum(r["token_counts"]) == 6 and r["finish_reason"] == "length"
        assert r["cached_tokens"] == 0                  # --enable-cache-report; fresh random prompts
    calls = sglang_cpu.standin_calls(sglang_cpu.standin_log(sglang_server.pid))
    assert calls["import"], "the stand-in log is empty: is the server using the stand-in at all?"
    assert calls["call"] == [], f"SGLang called into the sgl_kernel stand-in: {sorted(set(calls['call']))}"


def test_agree_runs_sglang_bench_serving_on_the_same_workload(sglang_server, tmp_path):
    code = main(["agree", "--peer", "sglang", "--base-url", sglang_server.base_url, "--input-len", "32",
                 "--output-len", "4", "--concurrency", "2", "--num-prompts", "4", "--repeat", "1",
                 "--tokenizer", str(vllm_cpu.model_dir()), "--out-dir", str(tmp_path)])
    assert code == 0
    doc = json.loads((tmp_path / "agreement.json").read_text())
    bodies = doc["bodies"]
    names = [v["name"] for v in bodies["variants"]]
    # what bench_serving sends, as captured: re-tokenized text, no usage asked, a new connection per request
    assert {"text", "no-min-tokens", "final-usage", "connection"} <= set(names)
    sent = bodies["peer_like"]["input_len"] or 32          # the peer's prompt length by the server's count
    counts = doc["counts"]["2"]
    assert counts["tokenbench"] == {"completed": 4, "total_input_tokens": 4 * sent, "total_output_tokens": 16}
    assert (counts["sglang"]["completed"], counts["sglang"]["total_output_tokens"]) == (4, 16)
    assert doc["peer"] == "sglang" and all(r["tokenbench"] > 0 and r["peer"] > 0 for r in doc["rows"])


def test_deploy_down_leaves_nothing_running(sglang_server, monkeypatch):
    """Last in the file: `tokenbench deploy down` stops the session's server and every process it started."""
    leader = psutil.Process(sglang_server.pid)
    family = [leader, *leader.children(recursive=True)]
    assert len(family) >= 3, " ".join(p.name() for p in family)        # HTTP server, scheduler, detokenizer
    port = sglang_server.port
    monkeypatch.setenv(state.STATE_ENV, str(sglang_server.state_dir))
    assert main(["deploy", "down", "cpu-gemma3-sglang"]) == 0
    assert state.load_all(sglang_server.state_dir) == []
    for proc in family:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, f"{proc.pid} survived"
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
