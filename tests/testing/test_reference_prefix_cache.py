"""The prefix cache: chained block keys, LRU capacity, cached tokens in usage and the send log, vLLM's
counters in /metrics, and cached tokens taken out of the prefill."""

from __future__ import annotations

import re

from tokenbench.testing.prefix_cache import PrefixCache, block_keys, cacheable_tokens
from tokenbench.testing.reference_server import tokenize

from .helpers import chat_body, config, post, read_log, run, served, stream_body


def test_block_keys_are_chained_so_a_block_hits_only_under_the_same_prefix():
    a, b = list(range(10, 42)), list(range(10, 26)) + list(range(90, 106))
    assert len(block_keys(a, 16)) == 2 and block_keys(a, 16)[0] == block_keys(b, 16)[0]
    assert block_keys(a, 16)[1] != block_keys(b, 16)[1]
    assert block_keys(list(range(50, 66)) + a[16:], 16)[1] != block_keys(a, 16)[1]   # same ids, other parent
    assert block_keys(a[:31], 16) == block_keys(a, 16)[:1]                          # full blocks only


def test_lookup_never_covers_the_last_prompt_token_and_store_is_full_blocks():
    cache = PrefixCache(capacity_blocks=100, block_size=4)
    prompt = list(range(3, 15))                    # 12 tokens = 3 blocks
    assert cache.lookup(prompt) == 0
    cache.store(prompt)
    assert cache.lookup(prompt) == 8               # the last block holds the last token: recomputed
    assert cache.lookup(prompt + [99]) == 12 and cache.lookup([4] + prompt) == 0
    assert cacheable_tokens(12, 5, 4) == 16 and cacheable_tokens(12, 1, 4) == 12


def test_lru_evicts_the_least_recent_chain_tail_first():
    cache = PrefixCache(capacity_blocks=4, block_size=2)
    old, new = [3, 4, 5, 6, 7, 8, 9], [20, 21, 22, 23, 24, 25, 26]
    cache.store(old)                               # 3 blocks
    cache.store(new)                               # 3 more: 2 of old's go, its tail first
    assert cache.used_blocks == 4
    assert cache.lookup(old) == 2 and cache.lookup(new) == 6
    cache.lookup(old)                              # old's head is now the most recent
    cache.store([40, 41, 42])
    assert cache.lookup(old) == 2


def _metric(text: str, name: str) -> float:
    (value,) = re.findall(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", text, re.M)
    return float(value)


def test_a_session_hits_its_history_over_completions(tmp_path):
    """Turn 2 re-sends turn 1's prompt and output ids: cached = the full blocks of what the server saw
    (prompt + output - 1), in usage, the send log and vLLM's counters."""
    first = list(range(100, 140))                                      # 40 tokens

    async def main():
        cfg = config(prefix_cache_blocks=64, block_size=16, send_log=str(tmp_path / "l"))
        async with served(cfg) as (ref, s):
            headers = {"X-Session-ID": "user-7"}
            one = await post(s, f"{ref.url}/v1/completions", stream_body(first, 9), headers)
            out = [t for c in one.chunks if c["choices"] for t in c["choices"][0]["token_ids"]]
            two = await post(s, f"{ref.url}/v1/completions", stream_body(first + out + [7] * 5, 4), headers)
            metrics = await (await s.get(f"{ref.url}/metrics")).text()
            arrivals = await (await s.get(f"{ref.url}/arrivals")).json()
            return one, two, metrics, arrivals

    one, two, metrics, arrivals = run(main())
    assert one.chunks[-1]["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    assert two.chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == cacheable_tokens(40, 9, 16) == 48
    log = read_log(tmp_path / "l")
    assert [r["cached_tokens"] for r in log] == [0, 48] and {r["session_id"] for r in log} == {"user-7"}
    assert _metric(metrics, "vllm:prefix_cache_queries_total") == 40 + 54
    assert _metric(metrics, "vllm:prefix_cache_hits_total") == 48
    assert _metric(metrics, "vllm:num_requests_running") == 0
    assert [a["session_id"] for a in arrivals["arrivals"]] == ["user-7", "user-7"]


def test_chat_turns_hit_through_the_template(tmp_path):
    """A chat client re-sends the assistant's text: the server's tokenizer gives back the same ids."""
    system = {"role": "system", "content": " ".join(f"rule{i}" for i in range(30))}

    async def main():
        async with served(config(prefix_cache_blocks=64, block_size=8)) as (ref, s):
            url = f"{ref.url}/v1/chat/completions"
            msgs = [system, {"role": "user", "content": "hello there"}]
            one = await post(s, url, {**chat_body("", 6), "messages": msgs})
            text = "".join(c["choices"][0]["delta"].get("content", "") for c in one.chunks if c["choices"])
            msgs2 = [*msgs, {"role": "assistant", "content": text}, {"role": "user", "content": "and then"}]
            return one, await post(s, url, {**chat_body("", 2), "messages": msgs2})

    one, two = run(main())
    p1 = one.chunks[-1]["usage"]["prompt_tokens"]
    assert p1 == len(tokenize("<|system|> " + system["content"] + " <|user|> hello there <|assistant|>", 32000))
    assert two.chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == cacheable_tokens(p1, 6, 8)


def test_cached_tokens_are_taken_out_of_the_prefill(tmp_path):
    prompt = list(range(200, 264))                                     # 64 tokens = 4 blocks

    async def main():
        cfg = config(prefix_cache_blocks=64, block_size=16, prefill_ms_per_token=0.5, send_log=str(tmp_path / "l"))
        async with served(cfg) as (ref, s):
            for _ in range(2):
                await post(s, f"{ref.url}/v1/completions", stream_body(prompt, 2))

    run(main())
    cold, warm = read_log(tmp_path / "l")
    assert (cold["cached_tokens"], warm["cached_tokens"]) == (0, 48)
    assert [r["prefill_ns"][1] - r["prefill_ns"][0] for r in (cold, warm)] == [32_000_000, 8_000_000]


def test_without_a_prefix_cache_usage_and_metrics_are_as_before():
    async def main():
        async with served(config()) as (ref, s):
            reply = await post(s, f"{ref.url}/v1/completions", stream_body([5] * 40, 2))
            return reply, await (await s.get(f"{ref.url}/metrics")).text()

    reply, metrics = run(main())
    assert "prompt_tokens_details" not in reply.chunks[-1]["usage"] and "vllm:" not in metrics
