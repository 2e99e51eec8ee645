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
