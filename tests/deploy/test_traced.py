"""A deployed engine exports its request spans to tokenbench's receiver: vLLM over HTTP/protobuf with
--otlp-traces-endpoint, SGLang with --enable-trace over gRPC, both in batches every 100 ms; an engine
without tracing (llama.cpp) is deployed as it is."""

from __future__ import annotations

from tokenbench.deploy import engines, profiles


def test_vllm_exports_over_http_to_the_receiver():
    profile = engines.traced(profiles.load_profile("cpu-gemma3-vllm"), "127.0.0.1:4318")
    assert profile is not None
    argv = engines.profile_args(profile)
    assert argv[argv.index("--otlp-traces-endpoint") + 1] == "http://127.0.0.1:4318/v1/traces"
    assert profile.env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
    assert profile.env["OTEL_BSP_SCHEDULE_DELAY"] == "100" and profile.env["HF_HUB_OFFLINE"] == "1"


def test_sglang_exports_over_grpc_to_the_receiver():
    profile = engines.traced(profiles.load_profile("cpu-gemma3-sglang"), "127.0.0.1:4318")
    assert profile is not None
    argv = engines.profile_args(profile)
    assert "--enable-trace" in argv and argv[argv.index("--otlp-traces-endpoint") + 1] == "127.0.0.1:4318"
    assert profile.env["SGLANG_OTLP_EXPORTER_SCHEDULE_DELAY_MILLIS"] == "100"


def test_an_engine_without_tracing_is_left_as_it_is():
    assert engines.traced(profiles.load_profile("cpu-smollm2-llamacpp"), "127.0.0.1:4318") is None


def test_where_a_deployed_command_line_sends_its_spans():
    vllm = engines.traced(profiles.load_profile("cpu-gemma3-vllm"), "127.0.0.1:4318")
    sglang = engines.traced(profiles.load_profile("cpu-gemma3-sglang"), "[::1]:4317")
    assert vllm is not None and sglang is not None
    assert engines.traces_address(["vllm", "serve", *engines.profile_args(vllm)]) == "127.0.0.1:4318"
    assert engines.traces_address(engines.profile_args(sglang)) == "[::1]:4317"
    assert engines.traces_address(["vllm", "serve", "m", "--otlp-traces-endpoint"]) is None
    assert engines.traces_address(["vllm", "serve", "m"]) is None
