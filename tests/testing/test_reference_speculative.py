"""Speculative decoding: steps of 1 + accepted tokens, acceptance by prompt kind (text-like or random
ids), vLLM's spec_decode counters in /metrics equal to the send log's sums."""

from __future__ import annotations

import random
import re
import statistics

import pytest

from tokenbench.testing import expect as X
from tokenbench.testing.speculative import mean_tokens_per_step, plan_steps, text_like

from .helpers import config, post, read_log, run, served, stream_body

TEXT = ("the cat sat on the mat and the dog sat on the log while the cat and the dog looked at the "
        "mat and the log and then the cat sat down ") * 3


def test_text_like_is_about_repeated_ids():
    rng = random.Random(1)
    assert text_like([5, 6, 5, 7, 5, 6, 8, 5, 6, 9])
    assert not text_like(rng.sample(range(3, 32000), 512))
    assert text_like([7] * 40)


def test_steps_emit_exactly_n_tokens_and_average_the_formula():
    rng = random.Random(5)
    plans = [plan_steps(200, 4, 0.6, rng) for _ in range(300)]
    assert all(sum(p.sizes) == 200 and p.sizes[0] == 1 and p.drafts == len(p.sizes) - 1 for p in plans)
    assert all(a + 1 == s for p in plans for a, s in zip(p.accepted, p.sizes[1:], strict=True))
    steps = [s for p in plans for s in p.sizes[1:-1]]                  # the last step may be cut
    assert statistics.fmean(steps) == pytest.approx(mean_tokens_per_step(0.6, 4), rel=0.03)
    assert mean_tokens_per_step(0.0, 4) == 1 and mean_tokens_per_step(1.0, 3) == 4


def _metric(text: str, name: str, label: str = "") -> float:
    (value,) = re.findall(rf"^{re.escape(name)}{{[^}}]*{re.escape(label)}[^}}]*}} (\S+)$", text, re.M)
    return float(value)


def test_speculative_streams_and_counters(tmp_path):
    rng = random.Random(9)
    random_ids = rng.sample(range(3, 32000), 300)
    n, k = 120, 3

    async def main():
        cfg = config(spec_tokens=k, spec_accept_text=0.8, spec_accept_random=0.1, send_log=str(tmp_path / "l"))
        async with served(cfg) as (ref, s):
            text = await post(s, f"{ref.url}/v1/completions", stream_body(TEXT, n))
            rand = await post(s, f"{ref.url}/v1/completions", stream_body(random_ids, n))
            whole = await post(s, f"{ref.url}/v1/completions", {**stream_body(TEXT, n), "stream": False})
            info = await (await s.get(f"{ref.url}/get_server_info")).json()
            return text, rand, whole, await (await s.get(f"{ref.url}/metrics")).text(), info

    text, rand, whole, metrics, info = run(main())
    log = read_log(tmp_path / "l")
    for reply, rec in zip((text, rand), log[:2], strict=True):
        sizes = [len(c["choices"][0]["token_ids"]) for c in reply.chunks if c["choices"]]
        assert sizes[0] == 1 and sum(sizes) == n and max(sizes) <= k + 1 and sizes == rec["tokens"]
        assert rec["spec_drafts"] == len(sizes) - 1 and rec["spec_accepted"] == n - len(sizes)
        assert len(set(rec["due_ns"][1:])) == len(rec["due_ns"]) - 1         # one step per chunk
    rates = [r["spec_accepted"] / (k * r["spec_drafts"]) for r in log]
    assert rates[0] > 0.4 > 0.2 > rates[1]                                   # text 0.8 per token, random 0.1
    assert whole.json()["usage"]["completion_tokens"] == n and log[2]["spec_drafts"] > 0
    assert _metric(metrics, "vllm:spec_decode_num_drafts_total") == sum(r["spec_drafts"] for r in log)
    assert _metric(metrics, "vllm:spec_decode_num_draft_tokens_total") == k * sum(r["spec_drafts"] for r in log)
    assert _metric(metrics, "vllm:spec_decode_num_accepted_tokens_total") == sum(r["spec_accepted"] for r in log)
    per_pos = [_metric(metrics, "vllm:spec_decode_num_accepted_tokens_per_pos_total", f'position="{i}"')
               for i in range(k)]
    assert sum(per_pos) == sum(r["spec_accepted"] for r in log) and per_pos == sorted(per_pos, reverse=True)
    assert info["speculative_num_draft_tokens"] == k


def test_speculative_steps_set_the_pace(tmp_path):
    """A step takes one ITL whatever it carries, so the TPOT falls by the mean tokens per step."""
    cfg = config(ttft_ms=5, itl_ms=4, spec_tokens=4, spec_accept_text=1.0, send_log=str(tmp_path / "l"))

    async def main():
        async with served(cfg) as (ref, s):
            await post(s, f"{ref.url}/v1/completions", stream_body(TEXT, 21))

    run(main())
    (rec,) = read_log(tmp_path / "l")
    assert rec["tokens"] == [1, 5, 5, 5, 5] and rec["spec_accepted"] == 16
    assert [b - a for a, b in zip(rec["due_ns"], rec["due_ns"][1:], strict=False)] == [4_000_000] * 4
    assert X.closed_loop(cfg, 1, X.Shape(50, 21, text=True)).tpot_mean_ms == 4 / 5
