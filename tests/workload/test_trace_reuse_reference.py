"""Issue 27's acceptance for traces: a Mooncake-format trace of 200 requests with shared hash_ids,
replayed by `tokenbench bench` against the reference server (a child process, real loopback HTTP) with
its prefix cache on and the trace's block size: the hit rate the server reports equals the trace's own
reuse, from the responses' cached_tokens and from its vLLM-named prefix-cache counters alike."""

from __future__ import annotations

import json
import random

import pytest

from tokenbench.cli.main import main
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess
from tokenbench.workload.trace_replay import read_trace, trace_reuse

pytestmark = pytest.mark.slow

BLOCK = 16


def conversation_trace(n: int, seed: int) -> list[dict]:
    """Deterministic: sessions that re-send their history (a growing chain of hash ids), most opened by a
    shared system block (hash 0), some one-off prompts; lengths cut anywhere in a block; 6 ms apart."""
    rng, sessions, fresh, rows = random.Random(seed), [], iter(range(1, 10**6)), []
    for i in range(n):
        if sessions and rng.random() < 0.7:
            chain = rng.choice(sessions)
        else:
            chain = [0] if rng.random() < 0.6 else []
            sessions.append(chain)
        length = len(chain) * BLOCK + rng.randint(1, 3 * BLOCK)
        chain += [next(fresh) for _ in range(-(-length // BLOCK) - len(chain))]
        rows.append({"timestamp": i * 6, "input_length": length, "output_length": 2,
                     "hash_ids": list(chain[:-(-length // BLOCK)])})
    return rows


def test_a_200_request_trace_hits_the_trace_own_reuse(tmp_path):
    path = tmp_path / "mooncake.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in conversation_trace(200, 27)))
    expected = trace_reuse(read_trace(str(path), BLOCK), BLOCK)
    assert 0.3 < expected.rate < 0.95, expected       # a trace with real sharing (and some of it not reusable)
    cfg = ReferenceConfig(ttft_ms=1, itl_ms=1, prefix_cache_blocks=100_000, block_size=BLOCK)
    with ReferenceProcess(cfg) as server:
        code = main(["bench", "--base-url", server.url, "--dataset-name", "trace", "--dataset-path", str(path),
                     "--trace-block-size", str(BLOCK), "--num-warmups", "4", "--output", str(tmp_path / "r.json")])
    assert code == 0
    [cell] = json.loads((tmp_path / "r.json").read_text())["cells"]
    s = cell["summary"]
    assert s["completed"] == 200 and s["cache_reported_requests"] == 200
    assert s["trace_reuse_rate"] == expected.rate and s["trace_reusable_tokens"] == expected.reusable_tokens
    assert s["total_cached_tokens"] == expected.reusable_tokens          # the server's cached_tokens, summed
    assert s["cache_hit_rate"] == expected.rate and s["cache_hit_source"] == "usage"
    assert s["server_prefix_cache_hit_rate"] == expected.rate             # its counters, over the measured phase
