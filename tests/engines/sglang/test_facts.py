"""SGLang facts from real captures of the CPU server (/get_server_info and /metrics of sglang 0.5.23,
cpu-gemma3-sglang), served by a real local HTTP server: KV capacity, context, version, the radix-cache
state and the gauge names."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tokenbench.deploy.engines import detect_engine, sglang

FIXTURES = Path(__file__).parent / "fixtures"
INFO = json.loads((FIXTURES / "server-info-sglang-cpu.json").read_text())
METRICS = (FIXTURES / "metrics-sglang-cpu.txt").read_text()
MODELS = {"object": "list", "data": [{"id": "gemma3-270m", "object": "model", "owned_by": "sglang",
                                      "root": "gemma3-270m", "max_model_len": 2048}]}


def _serve(routes: dict[str, tuple[str, str]]):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body, kind = routes.get(self.path, ('{"detail":"Not Found"}', "application/json"))
            self.send_response(200 if self.path in routes else 404)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body.encode())))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def url_for():
    servers = []

    def start(info: dict, metrics: str = METRICS) -> str:
        server = _serve({"/get_server_info": (json.dumps(info), "application/json"),
                         "/v1/models": (json.dumps(MODELS), "application/json"),
                         "/metrics": (metrics, "text/plain")})
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"
    yield start
    for s in servers:
        s.shutdown()


def test_facts_of_the_cpu_server(url_for):
    url = url_for(INFO)
    assert detect_engine(url) == "sglang"
    f = sglang.read_facts(url)
    assert (f.engine, f.version, f.model, f.ctx_per_seq, f.kv_capacity_tokens) == ("sglang", "0.5.23", "gemma3-270m",
                                                                                  2048, 65536)
    assert f.prefix_cache == "enabled" and "disable_radix_cache=false" in f.source["prefix_cache"]
    assert f.metrics == {"running": "sglang:num_running_reqs", "waiting": "sglang:num_queue_reqs",
                         "kv_usage": "sglang:token_usage"}
    assert f.raw["server_info"]["disable_radix_cache"] is False


def test_study_a_radix_cache_off_and_no_metrics(url_for):
    """Study A's flag (--disable-radix-cache) is read back; without --enable-metrics no gauge is claimed."""
    f = sglang.read_facts(url_for({**INFO, "disable_radix_cache": True}, metrics='{"detail":"Not Found"}'))
    assert f.prefix_cache == "disabled" and f.metrics == {} and "metrics" not in f.source
