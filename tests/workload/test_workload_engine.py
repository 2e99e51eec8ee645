"""Every text workload against the embedded engine (llama.cpp, SmolLM2-135M, 4 slots x 1024 tokens), with
prompt and output lengths verified against the engine's own usage. Small on purpose: 1 CPU thread."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tokenbench.load.bench import run_bench
from tokenbench.load.target import resolve
from tokenbench.spec.bench import BenchSpec
from tokenbench.workload import trace_replay

pytestmark = [pytest.mark.engine, pytest.mark.timeout(300)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHAREGPT = str(EXAMPLES / "sharegpt-mini.json")


def measured(server, workload: dict, cell: dict | None = None):
    spec = BenchSpec(target={"base_url": server.base_url}, workload=workload,
                     cells=[cell or {"concurrency": 2, "num_prompts": 4, "warmup_requests": 1}])
    [result] = asyncio.run(run_bench(spec, resolve(spec.target), lambda r: None))
    assert result.status == "ok", result.message
    assert len(result.records) == (cell or {}).get("num_prompts", 4)
    for r in result.records:
        assert r.usage_source == "server" and not r.length_error, r
        assert r.completion_tokens == r.output_len
    return result


def test_sharegpt_completions(llamacpp_server):
    cell = measured(llamacpp_server, {"kind": "sharegpt", "dataset_path": SHAREGPT, "max_input_len": 40,
                                      "max_output_len": 16})
    assert all(r.prompt_tokens == r.input_len <= 40 for r in cell.records)
    assert len({r.input_len for r in cell.records}) > 1                 # lengths come from the dataset


def test_sharegpt_chat_measures_the_template_overhead(llamacpp_server):
    cell = measured(llamacpp_server, {"kind": "sharegpt", "dataset_path": SHAREGPT, "api": "chat", "output_len": 4,
                                      "max_input_len": 40})
    overhead = cell.summary["chat_template_overhead_tokens"]
    assert overhead > 5                                                 # SmolLM2's template adds a system turn
    assert all(r.prompt_tokens == r.input_len + overhead for r in cell.records)


def test_jsonl_output_lengths_from_the_file(llamacpp_server):
    cell = measured(llamacpp_server, {"kind": "jsonl", "dataset_path": str(EXAMPLES / "prompts.jsonl"),
                                      "max_output_len": 16})
    assert {r.output_len for r in cell.records} <= {16, 12, 8}


def test_random_chat(llamacpp_server):
    cell = measured(llamacpp_server, {"api": "chat", "input_len": 24, "output_len": 4})
    assert all(r.prompt_tokens == 24 + cell.summary["chat_template_overhead_tokens"] for r in cell.records)


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_shared_prefix_hits_the_prefix_cache(llamacpp_server, api):
    cell = measured(llamacpp_server, {"kind": "prefix", "api": api, "input_len": 64, "prefix_len": 48,
                                      "num_groups": 2, "output_len": 2},
                    {"concurrency": 2, "num_prompts": 6, "warmup_requests": 2})
    overhead = cell.summary.get("chat_template_overhead_tokens", 0)
    assert all(r.prompt_tokens == 64 + overhead for r in cell.records)
    assert all(r.cached_tokens is not None for r in cell.records)      # llama.cpp reports cached_tokens
    assert cell.summary["cache_hit_rate"] > 0.3, cell.summary["cache_hit_rate"]


def test_trace_replay(llamacpp_server):
    path = str(EXAMPLES / "trace-mini.jsonl")
    cell = measured(llamacpp_server, {"kind": "trace", "dataset_path": path, "output_len": 3, "trace_block_size": 16},
                    {"arrival": "trace", "num_prompts": 6, "max_concurrency": 4, "warmup_requests": 1})
    rows = trace_replay.read_trace(path)[:6]
    assert [r.prompt_tokens for r in cell.records] == [r.input_len for r in rows]
    t0 = min(r.intended_ns for r in cell.records)
    assert [r.intended_ns - t0 for r in cell.records] == trace_replay.offsets_ns(rows, 1.0)
