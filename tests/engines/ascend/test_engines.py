"""SGLang and vLLM adapters: the launch argv from a profile, and facts read from a real HTTP socket.

Server answers are shaped like the engines' own: SGLang's /get_server_info is its server args plus
`max_total_num_tokens`, `max_req_input_len`, `internal_states` and `version` (0.5.x); vLLM exports the
KV cache as labels of `vllm:cache_config_info`. The 1,066,112-token pool is Study A's reported TP=1 value;
other numbers are illustrative.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tokenbench.deploy.engines import sglang, vllm
from tokenbench.spec.deploy_profile import Profile

from .ascend_helpers import STUDY_A, STUDY_B, load


@pytest.fixture
def serve():
    """serve({path: (status, body)}) -> base_url of a real local HTTP server answering those."""
    servers = []

    def start(routes: dict[str, tuple[int, str]]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                status, body = routes.get(self.path, (404, "not found"))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def models(name: str, max_len: int | None) -> str:
    entry = {"id": name, "object": "model", "owned_by": "x"}
    if max_len is not None:
        entry["max_model_len"] = max_len
    return json.dumps({"object": "list", "data": [entry]})


def test_sglang_launch_argv_study_a():
    argv = sglang.launch_argv(load(STUDY_A, "parallelism.tp=2", "parallelism.dp=2"), 31000)
    assert argv[:5] == ["python", "-m", "sglang.launch_server", "--model-path", "/models/FlagRelease/MiniCPM5-2B"]
    assert argv[argv.index("--tp") + 1] == "2" and argv[argv.index("--data-parallel-size") + 1] == "2"
    assert argv[argv.index("--port") + 1] == "31000" and argv[argv.index("--host") + 1] == "0.0.0.0"
    assert "--disable-radix-cache" in argv and argv[argv.index("--cuda-graph-max-bs") + 1] == "128"
    assert "--tp" not in sglang.launch_argv(load(STUDY_A), 31000)


def test_vllm_launch_argv_and_when_rule():
    single = vllm.launch_argv(load(STUDY_B), 9005)
    assert single == ["vllm", "serve", "/models/MinerU2.5-2509-1.2B", "--host", "0.0.0.0", "--port", "9005"]
    dp4 = vllm.launch_argv(load(STUDY_B, "parallelism.dp=4"), 30000)
    assert dp4[dp4.index("--data-parallel-size") + 1] == "4"
    assert dp4[dp4.index("--gpu-memory-utilization") + 1] == "0.85"
    tp2 = vllm.launch_argv(load(STUDY_B, "parallelism.tp=2"), 9005)
    assert tp2[tp2.index("--tensor-parallel-size") + 1] == "2" and "--gpu-memory-utilization" not in tp2


def test_args_rendering_rules():
    p = Profile(name="x", engine="vllm", model={"path": "/m", "served_name": "s"}, port=1,
                args={"a": True, "b": False, "c": None, "d": 3, "e": "v"}, extra_args=["--raw", "1"],
                when=[{"tp_at_least": 2, "args": {"d": 4}}])
    assert vllm.launch_argv(p, 1)[3:] == ["--served-model-name", "s", "--host", "127.0.0.1", "--port", "1",
                                          "--a", "--d", "3", "--e", "v", "--raw", "1"]
    p.parallelism.tp = 2
    assert "4" in vllm.launch_argv(p, 1)


def test_sglang_facts(serve):
    info = {"model_path": "/models/FlagRelease/MiniCPM5-2B", "tp_size": 1, "dp_size": 1, "context_length": None,
            "chunked_prefill_size": 8192, "cuda_graph_max_bs": 128, "disable_radix_cache": True,
            "max_running_requests": None, "status": "ready", "max_total_num_tokens": 1066112,
            "max_req_input_len": 32762, "internal_states": [{"model_path": "/models/FlagRelease/MiniCPM5-2B"}],
            "version": "0.5.11"}
    url = serve({"/get_server_info": (200, json.dumps(info)), "/v1/models": (200, models("MiniCPM52", 32768))})
    facts = sglang.read_facts(url)
    assert (facts.engine, facts.version, facts.model) == ("sglang", "0.5.11", "MiniCPM52")
    assert facts.kv_capacity_tokens == 1066112 and facts.ctx_per_seq == 32768
    assert facts.source["kv_capacity_tokens"] == "/get_server_info max_total_num_tokens"
    assert facts.raw["server_info"]["chunked_prefill_size"] == 8192


def test_sglang_facts_fallback_and_dp(serve):
    info = {"dp_size": 2, "context_length": 4096, "version": "0.4.0",
            "internal_states": [{"max_total_num_tokens": 5000}, {"max_total_num_tokens": 5000}]}
    url = serve({"/server_info": (200, json.dumps(info)), "/v1/models": (200, models("m", None))})
    facts = sglang.read_facts(url)
    assert facts.kv_capacity_tokens == 10000 and "dp_size 2" in facts.source["kv_capacity_tokens"]
    assert facts.ctx_per_seq == 4096 and facts.source["ctx_per_seq"] == "/server_info context_length"


LABELS = 'block_size="128",cache_dtype="auto",engine="{}",gpu_memory_utilization="0.85",num_gpu_blocks="7361"'
VLLM_METRICS = f"""# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{{LABELS.format(0)}}} 1.0
vllm:cache_config_info{{{LABELS.format(1)}}} 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
vllm:num_requests_running{{engine="0",model_name="m"}} 0.0
"""


def test_vllm_facts(serve):
    url = serve({"/metrics": (200, VLLM_METRICS), "/v1/models": (200, models("m", 16384)),
                 "/version": (200, json.dumps({"version": "0.10.2rc1"}))})
    facts = vllm.read_facts(url)
    assert facts.kv_capacity_tokens == 2 * 7361 * 128
    assert "sum of 2 engines" in facts.source["kv_capacity_tokens"]
    assert (facts.version, facts.model, facts.ctx_per_seq) == ("0.10.2rc1", "m", 16384)
    assert facts.raw["cache_config_info"][0]["gpu_memory_utilization"] == "0.85"


def test_vllm_facts_without_kv_labels(serve):
    metrics = 'vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1.0\n'
    url = serve({"/metrics": (200, metrics), "/v1/models": (200, models("m", None))})
    facts = vllm.read_facts(url)
    assert facts.kv_capacity_tokens is None and facts.version is None and facts.ctx_per_seq is None
