"""Engine adapters: the dispatcher, llama.cpp's command line and launcher, facts and detection."""

from __future__ import annotations

import sys

import pytest

from tokenbench.deploy import engines, facts_for, profiles
from tokenbench.deploy.engines import llamacpp
from tokenbench.errors import DeployError
from tokenbench.local_engines import llamacpp_server
from tokenbench.spec.deploy_profile import Profile
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import StubServer

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test


def profile(**extra) -> Profile:
    data = {"name": "p", "engine": "llamacpp", "model": {"path": "/m/tiny.gguf"}}
    return Profile.model_validate({**data, **extra})


def test_flag_args():
    assert engines.flag_args({"a": 1, "b-c": "x", "on": True, "off": False, "none": None, "--raw": 2}) == \
        ["--a", "1", "--b-c", "x", "--on", "--raw", "2"]


def test_engine_module_dispatch():
    assert engines.engine_module("llamacpp") is llamacpp
    with pytest.raises(DeployError, match="no adapter for engine 'tgi'"):
        engines.engine_module("tgi")
    with pytest.raises(DeployError, match="not an engine name"):
        engines.engine_module("../x")


def test_llamacpp_argv(monkeypatch):
    monkeypatch.setattr("tokenbench.local_engines.models.resolve", lambda ref: ref.path)
    p = profile(parallelism={"slots": 4, "ctx": 4096, "threads": 1}, args={"n_batch": 256, "cache_prompt": False},
                extra_args=["--warmup", "false"], host="0.0.0.0")
    assert llamacpp.launch_argv(p, 8100) == [
        sys.executable, "-m", "tokenbench.local_engines.llamacpp_server", "--model", "/m/tiny.gguf", "--host", "0.0.0.0",
        "--port", "8100", "--alias", "tiny", "--slots", "4", "--ctx", "4096", "--threads", "1",
        "--n_batch", "256", "--warmup", "false"]


def test_llamacpp_command_override_and_served_name(monkeypatch):
    monkeypatch.setattr("tokenbench.local_engines.models.resolve", lambda ref: ref.path)
    p = profile(command=["python", "-c", "pass"], model={"path": "/m/x.gguf", "served_name": "xs"})
    argv = llamacpp.launch_argv(p, 1)
    assert argv[:3] == [sys.executable, "-c", "pass"] and argv[argv.index("--alias") + 1] == "xs"
    assert engines.served_model(p) == "xs"
    assert engines.served_model(profiles.load_profile("cpu-smollm2-llamacpp")) == "smollm2-135m-instruct"


def test_launcher_builds_common_params():
    pytest.importorskip("xllamacpp")
    args, extra = llamacpp_server.parse(["--model", "/m.gguf", "--port", "9", "--slots", "3", "--ctx", "999",
                                         "--threads", "1", "--alias", "m", "--n_batch", "128",
                                         "--cache-prompt", "false", "--kv_unified", "--sampling.seed", "7"])
    p = llamacpp_server.build_params(args, extra)
    assert (p.model.path, p.port, p.hostnames, p.n_parallel, p.n_ctx) == ("/m.gguf", 9, ["127.0.0.1"], 3, 999)
    assert (p.cpuparams.n_threads, p.cpuparams_batch.n_threads, p.model_alias) == (1, 1, {"m"})
    assert (p.n_batch, p.cache_prompt, p.kv_unified, p.sampling.seed) == (128, False, True, 7)
    assert p.endpoint_metrics and p.endpoint_slots and p.endpoint_props and not p.ui


def test_launcher_rejects_unknown_params():
    pytest.importorskip("xllamacpp")
    args, extra = llamacpp_server.parse(["--model", "/m.gguf", "--port", "9", "--no_such_param", "1"])
    with pytest.raises(AttributeError, match="no parameter 'no_such_param'"):
        llamacpp_server.build_params(args, extra)


PROPS = {"total_slots": 4, "build_info": "b6000-abc", "model_path": "/m.gguf",
         "default_generation_settings": {"n_ctx": 1024, "params": {}}}
MODELS = {"object": "list", "data": [{"id": "smol", "meta": {"n_ctx": 1024, "n_ctx_train": 8192,
                                                              "n_vocab": 49152, "n_params": 134515008}}]}


def test_llamacpp_facts():
    with StubServer({"/props": (200, PROPS), "/v1/models": (200, MODELS)}) as s:
        f = llamacpp.read_facts(s.url)
    assert (f.engine, f.model, f.slots, f.ctx_per_seq, f.kv_capacity_tokens) == ("llamacpp", "smol", 4, 1024, 4096)
    assert f.version.startswith("llama.cpp b6000-abc") and f.raw["meta"]["n_vocab"] == 49152
    assert f.source["kv_capacity_tokens"] == "total_slots x n_ctx per slot"


def test_llamacpp_facts_fall_back_to_slots():
    props = {k: v for k, v in PROPS.items() if k != "default_generation_settings"}
    with StubServer({"/props": (200, props), "/v1/models": (200, MODELS),
                     "/slots": (200, [{"id": 0, "n_ctx": 512}])}) as s:
        f = llamacpp.read_facts(s.url)
    assert (f.ctx_per_seq, f.kv_capacity_tokens, f.source["ctx_per_seq"]) == (512, 2048, "/slots n_ctx")


@pytest.mark.parametrize("routes, engine", [
    ({"/props": (200, PROPS)}, "llamacpp"),
    ({"/get_server_info": (200, {"max_total_num_tokens": 100})}, "sglang"),
    ({"/server_info": (200, {"max_total_num_tokens": 100})}, "sglang"),
    ({"/metrics": (200, "# HELP vllm:num_requests_running x\nvllm:num_requests_running 0\n")}, "vllm"),
    ({"/v1/models": (200, MODELS)}, "unknown"),
])
def test_detect_engine(routes, engine):
    with StubServer(routes) as s:
        assert engines.detect_engine(s.url) == engine


def test_facts_for_llamacpp_and_unknown():
    with StubServer({"/props": (200, PROPS), "/v1/models": (200, MODELS)}) as s:
        assert facts_for(s.url).kv_capacity_tokens == 4096
    with StubServer({"/v1/models": (200, {"data": [{"id": "m", "max_model_len": 2048}]})}) as s:
        f = facts_for(s.url)
    assert (f.engine, f.model, f.ctx_per_seq, f.kv_capacity_tokens) == ("unknown", "m", 2048, None)


def test_facts_for_reference_server():
    cfg = ReferenceConfig(ttft_ms=1, itl_ms=1, max_model_len=4096, kv_capacity_tokens=20000, max_running=8)
    with ReferenceProcess(cfg) as ref:
        f = facts_for(ref.url)
    assert (f.engine, f.model, f.ctx_per_seq, f.kv_capacity_tokens, f.slots) == \
        ("reference", "reference-model", 4096, 20000, 8)


def test_sglang_facts_say_when_speculative_decoding_is_on():
    from tokenbench.deploy.engines import sglang
    info = {"max_total_num_tokens": 1000, "speculative_algorithm": "EAGLE3", "speculative_num_draft_tokens": 4}
    with StubServer({"/get_server_info": (200, info)}) as s:
        on = sglang.read_facts(s.url)
    with StubServer({"/get_server_info": (200, {**info, "speculative_algorithm": None})}) as s:
        off = sglang.read_facts(s.url)
    assert (on.speculative, on.source["speculative"]) == ("EAGLE3, 4 draft tokens",
                                                          "/get_server_info speculative_algorithm")
    assert off.speculative is None and on.raw["server_info"]["speculative_num_draft_tokens"] == 4
