"""Every text workload against the embedded engine (llama.cpp, SmolLM2-135M, 4 slots x 1024 tokens), with
prompt and output lengths verified against the engine's own usage. Small on purpose: 1 CPU thread."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenbench.spec.study import StudySpec
from tokenbench.study.run import measure
from tokenbench.workload import trace_replay

pytestmark = [pytest.mark.engine, pytest.mark.timeout(300)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHAREGPT = str(EXAMPLES / "sharegpt-mini.json")


def measured(server, study: dict, load: dict | None = None):
    """One cell of the study keys in `study` (workload, api, pairs) under `load` (study keys), through the
    study path `bench` takes."""
    load = load or {"concurrency": [2], "requests": {"num_prompts": 4}, "warmup_requests": 1}
    spec = StudySpec.model_validate({"target": {"base_url": server.base_url}, **study, **load})
    [result] = measure(spec).results
    assert result.status == "ok", result.message
    assert len(result.records) == load["requests"]["num_prompts"]
    for r in result.records:
        assert r.usage_source == "server" and not r.length_error, r
        assert r.completion_tokens == r.output_len
    return result


def test_sharegpt_completions(llamacpp_server):
    cell = measured(llamacpp_server, {"workload": {"kind": "sharegpt", "dataset_path": SHAREGPT, "max_input_len": 40,
                                                   "max_output_len": 16}})
    assert all(r.prompt_tokens == r.input_len <= 40 for r in cell.records)
    assert len({r.input_len for r in cell.records}) > 1                 # lengths come from the dataset


def test_sharegpt_chat_measures_the_template_overhead(llamacpp_server):
    cell = measured(llamacpp_server, {"workload": {"kind": "sharegpt", "dataset_path": SHAREGPT, "output_len": 4,
                                                   "max_input_len": 40}, "api": "chat"})
    overhead = cell.summary.to_dict()["chat_template_overhead_tokens"]
    assert overhead > 5                                                 # SmolLM2's template adds a system turn
    assert all(r.prompt_tokens == r.input_len + overhead for r in cell.records)


def test_jsonl_output_lengths_from_the_file(llamacpp_server):
    cell = measured(llamacpp_server, {"workload": {"kind": "jsonl", "dataset_path": str(EXAMPLES / "prompts.jsonl"),
                                                   "max_output_len": 16}})
    assert {r.output_len for r in cell.records} <= {16, 12, 8}


def test_random_chat(llamacpp_server):
    cell = measured(llamacpp_server, {"api": "chat", "pairs": [(24, 4)]})
    assert all(r.prompt_tokens == 24 + cell.summary.to_dict()["chat_template_overhead_tokens"] for r in cell.records)


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_shared_prefix_hits_the_prefix_cache(llamacpp_server, api):
    cell = measured(llamacpp_server, {"workload": {"kind": "prefix", "prefix_len": 48, "num_groups": 2}, "api": api,
                                      "pairs": [(64, 2)]},
                    {"concurrency": [2], "requests": {"num_prompts": 6}, "warmup_requests": 2})
    overhead = cell.summary.to_dict().get("chat_template_overhead_tokens", 0)
    assert all(r.prompt_tokens == 64 + overhead for r in cell.records)
    assert all(r.cached_tokens is not None for r in cell.records)      # llama.cpp reports cached_tokens
    assert cell.summary.to_dict()["cache_hit_rate"] > 0.3, cell.summary.to_dict()["cache_hit_rate"]


def test_trace_replay(llamacpp_server):
    path = str(EXAMPLES / "trace-mini.jsonl")
    cell = measured(llamacpp_server, {"workload": {"kind": "trace", "dataset_path": path, "output_len": 3,
                                                   "trace_block_size": 16}},
                    {"requests": {"num_prompts": 6}, "max_concurrency": 4, "warmup_requests": 1})
    rows = trace_replay.read_trace(path)[:6]
    assert [r.prompt_tokens for r in cell.records] == [r.input_len for r in rows]
    t0 = min(r.intended_ns for r in cell.records)
    assert [r.intended_ns - t0 for r in cell.records] == trace_replay.offsets_ns(rows, 1.0)
