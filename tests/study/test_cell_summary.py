"""The typed cell summary: vLLM's figures as typed fields with vLLM's names, every other key kept, and
the stored dict given back unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from tokenbench.client.records import RequestRecord
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary import summarize
from tokenbench.spec.bench import SLO, Load

REAL = json.loads((Path(__file__).parent / "fixtures" / "vllm-0.32-bench-serve-result.json").read_text())
MS = 1_000_000


def record(i: int) -> RequestRecord:
    t0 = i * 10 * MS
    return RequestRecord(index=i, phase="measure", input_len=8, output_len=4, intended_ns=t0, sent_ns=t0,
                         end_ns=t0 + 40 * MS, status=200, token_times_ns=[t0 + (10 + 10 * k) * MS for k in range(4)],
                         token_counts=[1] * 4, prompt_tokens=8, completion_tokens=4, usage_source="server",
                         finish_reason="length")


def test_summarize_round_trips_through_the_typed_model():
    s = summarize([record(i) for i in range(6)], Load(concurrency=2, num_prompts=6), 8, 4, SLO(ttft_ms=50))
    stored = json.loads(json.dumps(s.to_dict()))
    assert CellSummary.from_dict(stored) == s and CellSummary.from_dict(stored).to_dict() == stored
    assert (s.completed, s.total_output_tokens, s.mean_ttft_ms, s.p99_tpot_ms) == (6, 24, 10.0, 10.0)
    assert s.request_goodput == stored["request_goodput"] and s.mean_e2el_ms == 40.0


def test_types_are_checked():
    with pytest.raises(ValidationError):
        CellSummary.from_dict({"completed": "many"})
    with pytest.raises(ValidationError):
        CellSummary.from_dict({"mean_ttft_ms": "slow"})
    with pytest.raises(ValidationError):
        CellSummary.from_dict({"loop_lag_p99_ms": "late"})         # a group's key is typed by its group


def test_the_typed_names_are_vllms():
    """Every figure of a real `vllm bench serve` result file that is a cell statistic is a typed field."""
    figures = {k for k in REAL if k.startswith(("mean_", "median_", "std_", "p99_"))}
    totals = {"duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
              "request_goodput", "output_throughput", "total_token_throughput", "num_prompts", "max_concurrency",
              "request_rate"}
    assert totals <= set(REAL)
    assert figures | totals <= set(CellSummary.model_fields)


def test_the_server_counter_and_trace_keys_are_typed_and_stored_unchanged():
    """Issue 27's keys (what the server's counters said, a trace's own reuse, the text corpus) read back as
    typed groups, none left as an untyped extra, and give the stored dict back unchanged."""
    stored = {"completed": 4, "cache_hit_rate": 0.25, "total_cached_tokens": 50,
              "workload": "trace", "trace_block_size": 16, "trace_prompt_tokens": 400, "trace_reusable_tokens": 160,
              "trace_reuse_rate": 0.4, "text_corpus": "CPython pydoc_data.topics", "text_corpus_tokens": 70000,
              "server_prefix_cache_queries": 200.0, "server_prefix_cache_hits": 50.0,
              "server_prefix_cache_hit_rate": 0.25, "cache_hit_source": "counters", "spec_acceptance_rate": 0.5,
              "spec_mean_acceptance_length": 2.5, "spec_source": "counters", "spec_drafts": 10.0,
              "spec_draft_tokens": 30.0, "spec_accepted_tokens": 15.0, "speculative": "ngram, 3 draft tokens",
              "spec_random_prompts": "fed random token ids", "server_counters_window_s": 3.5,
              "server_counters_lead_s": None}
    s = CellSummary.from_dict(stored)
    assert not s.undeclared and s.facts is not None and s.counters is not None
    assert (s.facts.trace_reuse_rate, s.facts.text_corpus_tokens) == (0.4, 70000)
    assert (s.counters.spec_acceptance_rate, s.counters.speculative, s.counters.server_counters_lead_s) == \
        (0.5, "ngram, 3 draft tokens", None)
    assert s.to_dict() == stored and json.dumps(s.to_dict(), sort_keys=True) == json.dumps(stored, sort_keys=True)
