"""The reference server's OpenAI-compatible surface: exact counts, usage placement, chunk shapes."""

from __future__ import annotations

import pytest

from tokenbench.errors import UsageError
from tokenbench.testing.reference_server import (
    ReferenceConfig,
    chat_text,
    detokenize,
    tokenize,
)

from .helpers import chat_body, config, post, read_log, run, served, stream_body


def test_tokenizer_is_deterministic_and_round_trips():
    ids = tokenize("the quick  brown\nfox w42 <s> w1", 32000)
    assert ids == tokenize("the quick brown fox w42 <s> w1", 32000)
    assert len(ids) == 7 and ids[4] == 42 and ids[5] == 1 and ids[6] >= 3  # `w1` is not a literal
    assert all(0 <= i < 32000 for i in ids)
    assert tokenize(detokenize([5, 31999, 0, 2]), 32000) == [5, 31999, 0, 2]


def test_chat_template_overhead_is_one_token_per_message_plus_one():
    text, images = chat_text([{"role": "system", "content": "be brief"},
                              {"role": "user", "content": "hello there world"}])
    assert text == "<|system|> be brief <|user|> hello there world <|assistant|>"
    assert len(tokenize(text, 32000)) == 2 + 3 + 3 and images == 0


@pytest.mark.parametrize("tokens_per_chunk", [1, 3])
def test_completions_exact_counts_token_ids_and_usage_on_finish_chunk(tmp_path, tokens_per_chunk):
    prompt = list(range(100, 137))

    async def main():
        cfg = config(tokens_per_chunk=tokens_per_chunk, send_log=str(tmp_path / "l"))
        async with served(cfg) as (ref, s):
            return await post(s, f"{ref.url}/v1/completions", stream_body(prompt, 10))

    reply = run(main())
    assert reply.status == 200 and reply.error is None
    assert reply.headers["Content-Type"].startswith("text/event-stream")
    assert reply.lines[-1] == "data: [DONE]"
    chunks = reply.chunks
    assert [len(c["choices"][0]["token_ids"]) for c in chunks] == \
        ([1] * 10 if tokens_per_chunk == 1 else [3, 3, 3, 1])
    for c in chunks:  # text is exactly the words of the ids it carries
        assert tokenize(c["choices"][0]["text"], 32000) == c["choices"][0]["token_ids"]
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "length"
    assert all("usage" not in c for c in chunks[:-1])  # llama.cpp style: usage rides the last chunk
    assert chunks[-1]["usage"] == {"prompt_tokens": 37, "completion_tokens": 10, "total_tokens": 47}
    (rec,) = read_log(tmp_path / "l")
    assert rec["prompt_tokens"] == 37 and rec["completion_tokens"] == 10
    assert rec["tokens"] == [len(c["choices"][0]["token_ids"]) for c in chunks]


def test_chat_role_chunk_first_then_content_then_usage_chunk(tmp_path):
    async def main():
        async with served(config(send_log=str(tmp_path / "l"))) as (ref, s):
            return await post(s, f"{ref.url}/v1/chat/completions", chat_body("one two three", 6))

    reply = run(main())
    chunks = reply.chunks
    role = chunks[0]["choices"][0]
    assert role["delta"] == {"role": "assistant"} and "token_ids" not in role
    content = chunks[1:-1]
    assert len(content) == 6 and all(len(c["choices"][0]["token_ids"]) == 1 for c in content)
    assert all(c["choices"][0]["delta"]["content"].strip() for c in content)
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == \
        {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}  # vLLM style
    (rec,) = read_log(tmp_path / "l")
    assert rec["role_ns"] <= rec["write_ns"][0] and sum(rec["tokens"]) == 6  # role is not a token


def test_continuous_usage_and_no_usage_unless_asked():
    async def main():
        async with served(config()) as (ref, s):
            cont = await post(s, f"{ref.url}/v1/completions", stream_body(
                [5, 6], 4, stream_options={"include_usage": True, "continuous_usage_stats": True}))
            bare = await post(s, f"{ref.url}/v1/chat/completions", chat_body("x", 3, stream_options={}))
            return cont, bare

    cont, bare = run(main())
    assert [c["usage"]["completion_tokens"] for c in cont.chunks] == [1, 2, 3, 4]
    assert all("usage" not in c for c in bare.chunks) and len(bare.chunks) == 4


def test_ignore_eos_min_tokens_and_a_server_that_ignores_them():
    body = {"prompt": "a b c", "max_tokens": 9, "stream": False}

    async def main(cfg, **extra):
        async with served(cfg) as (ref, s):
            return (await post(s, f"{ref.url}/v1/completions", {**body, **extra})).json()

    natural = run(main(config()))
    assert natural["usage"]["completion_tokens"] == 5 and natural["choices"][0]["finish_reason"] == "stop"
    assert run(main(config(), min_tokens=7))["usage"]["completion_tokens"] == 7
    full = run(main(config(), ignore_eos=True))
    assert full["usage"] == {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}
    assert full["choices"][0]["finish_reason"] == "length"
    assert tokenize(full["choices"][0]["text"], 32000) == full["choices"][0]["token_ids"]
    broken = run(main(config(honor_ignore_eos=False), ignore_eos=True, min_tokens=9))
    assert broken["usage"]["completion_tokens"] == 5 and broken["choices"][0]["finish_reason"] == "stop"


def test_batch_prompts_and_temperature_zero_is_deterministic():
    async def main():
        async with served(config()) as (ref, s):
            a = await post(s, f"{ref.url}/v1/completions",
                           {"prompt": [[7, 8, 9], "x y"], "max_tokens": 3, "temperature": 0,
                            "ignore_eos": True})
            b = await post(s, f"{ref.url}/v1/completions",
                           {"prompt": [7, 8, 9], "max_tokens": 3, "temperature": 0, "ignore_eos": True})
            return a.json(), b.json()

    a, b = run(main())
    assert [c["index"] for c in a["choices"]] == [0, 1]
    assert a["usage"] == {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}
    assert a["choices"][0]["token_ids"] == b["choices"][0]["token_ids"]


def test_images_are_counted_in_prompt_tokens_details():
    content = [{"type": "text", "text": "what is this"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]

    async def main():
        async with served(config()) as (ref, s):
            ok = await post(s, f"{ref.url}/v1/chat/completions", {**chat_body(content, 2), "stream": False})
            bad = await post(s, f"{ref.url}/v1/chat/completions", chat_body(
                [{"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}], 2))
            return ok.json(), bad

    ok, bad = run(main())
    assert ok["usage"]["prompt_tokens"] == 1 + 3 + 1 + 1
    assert ok["usage"]["prompt_tokens_details"] == {"image_count": 1}
    assert ok["choices"][0]["message"]["role"] == "assistant"
    assert bad.status == 400 and "data:" in bad.json()["error"]["message"]


def test_tokenize_agrees_with_usage():
    messages = [{"role": "user", "content": "count these five words please"}]

    async def main():
        async with served(config()) as (ref, s):
            chat = await post(s, f"{ref.url}/v1/chat/completions", {**chat_body("", 1), "messages": messages})
            by_messages = await post(s, f"{ref.url}/tokenize", {"messages": messages})
            by_prompt = await post(s, f"{ref.url}/tokenize", {"prompt": "count these five words please"})
            by_content = await post(s, f"{ref.url}/tokenize", {"content": "count these five words please"})
            detok = await post(s, f"{ref.url}/detokenize", {"tokens": by_prompt.json()["tokens"]})
            models = await s.get(f"{ref.url}/v1/models")
            return (chat, by_messages.json(), by_prompt.json(), by_content.json(), detok.json(),
                    await models.json())

    chat, by_messages, by_prompt, by_content, detok, models = run(main())
    assert by_messages["count"] == chat.chunks[-1]["usage"]["prompt_tokens"] == 7
    assert by_prompt == by_content and by_prompt["count"] == 5 and by_prompt["max_model_len"] == 131072
    assert tokenize(detok["prompt"], 32000) == by_prompt["tokens"]
    assert models["data"][0]["id"] == "reference-model" and models["data"][0]["max_model_len"] == 131072
    assert "meta" not in models["data"][0]      # only a server with captured batch sizes has one


def test_bad_requests_get_400_with_openai_error_body():
    bodies = [{"prompt": [1, 32000], "max_tokens": 2}, {"prompt": [], "max_tokens": 2},
              {"prompt": "x", "max_tokens": 0}, {"prompt": "x", "max_tokens": 2, "min_tokens": 3},
              {"prompt": "x", "max_tokens": 200}, {"prompt": "x", "max_tokens": "5"}]

    async def main():
        async with served(config(max_model_len=100)) as (ref, s):
            return [await post(s, f"{ref.url}/v1/completions", b) for b in bodies]

    for reply in run(main()):
        assert reply.status == 400 and reply.json()["error"]["type"] == "invalid_request_error"


def test_api_key_required_on_v1_routes_only():
    async def main():
        async with served(config(api_key="sekret")) as (ref, s):
            none = await post(s, f"{ref.url}/v1/completions", stream_body("a", 2))
            wrong = await post(s, f"{ref.url}/v1/completions", stream_body("a", 2),
                               headers={"Authorization": "Bearer nope"})
            right = await post(s, f"{ref.url}/v1/completions", stream_body("a", 2),
                               headers={"Authorization": "Bearer sekret"})
            health = await s.get(f"{ref.url}/health")
            return none, wrong, right, health.status

    none, wrong, right, health = run(main())
    assert none.status == wrong.status == 401 and "sekret" not in none.raw.decode()
    assert none.json()["error"]["code"] == 401
    assert right.status == 200 and health == 200


def test_server_info_and_metrics():
    async def main():
        async with served(config(kv_capacity_tokens=5000, max_running=4)) as (ref, s):
            info = await (await s.get(f"{ref.url}/get_server_info")).json()
            metrics = await (await s.get(f"{ref.url}/metrics")).text()
            return info, metrics

    info, metrics = run(main())
    assert set(info) == {"engine", "version", "model_path", "max_total_num_tokens", "context_length",
                         "max_running_requests", "vocab_size", "ttft_ms", "itl_ms", "tokens_per_chunk"}
    assert info["engine"] == "reference" and info["max_total_num_tokens"] == 5000
    assert info["context_length"] == 131072 and info["version"]
    assert 'reference:num_requests_running{model_name="reference-model"} 0' in metrics
    assert 'reference:num_requests_waiting{model_name="reference-model"} 0' in metrics


def test_config_rejects_nonsense():
    with pytest.raises(UsageError):
        ReferenceConfig(ttft_ms=-1, itl_ms=1)
    with pytest.raises(UsageError):
        ReferenceConfig(ttft_ms=1, itl_ms=1, faults={"http_500": 0.7, "stall": 0.7})
    cfg = ReferenceConfig(ttft_ms=1, itl_ms=2, faults={"stall": 0.5}, max_running=3)
    assert ReferenceConfig.from_json(cfg.to_json()) == cfg
