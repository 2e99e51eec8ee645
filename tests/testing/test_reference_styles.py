"""Reference-server stream styles real servers use: reasoning deltas (vLLM's `reasoning`, the older
`reasoning_content`, both), empty-text tokens, tool-call argument deltas, no token_ids, no /tokenize."""

import pytest

from tests.testing.helpers import chat_body, config, post, read_log, run, served, stream_body


def stream(tmp_path, api="chat", n=6, **cfg):
    async def main():
        async with served(config(send_log=str(tmp_path / "l"), **cfg)) as (ref, s):
            if api == "chat":
                return await post(s, f"{ref.url}/v1/chat/completions", chat_body("one two", n))
            return await post(s, f"{ref.url}/v1/completions", stream_body([5, 6], n))

    reply = run(main())
    (rec,) = read_log(tmp_path / "l")
    return [c["choices"][0] for c in reply.chunks if c["choices"]], rec


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_reasoning_streams_first_under_the_named_field(tmp_path, field):
    choices, rec = stream(tmp_path, reasoning_tokens=4, reasoning_field=field)
    deltas = [c["delta"] for c in choices[1:]]
    assert all(set(d) == {field} and d[field].strip() for d in deltas[:4])
    assert all(set(d) == {"content"} and d["content"].strip() for d in deltas[4:])
    assert len(deltas) == 6 and sum(rec["tokens"]) == 6


def test_reasoning_under_both_names_carries_the_same_text(tmp_path):
    choices, _ = stream(tmp_path, reasoning_tokens=2, reasoning_field="both")
    d = choices[1]["delta"]
    assert d["reasoning"] == d["reasoning_content"] != ""


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_empty_text_tokens_and_no_token_ids(tmp_path, api):
    choices, rec = stream(tmp_path, api=api, empty_every=3, token_ids=False)
    tokens = choices[1:] if api == "chat" else choices
    texts = [c["delta"]["content"] if api == "chat" else c["text"] for c in tokens]
    assert [t == "" for t in texts] == [True, False, False, True, False, False]
    assert all("token_ids" not in c for c in tokens) and rec["tokens"] == [1] * 6


def test_tool_calls_stream_argument_deltas(tmp_path):
    choices, _ = stream(tmp_path, n=4, tool_calls=True)
    calls = [c["delta"]["tool_calls"][0] for c in choices[1:]]
    assert calls[0]["function"]["name"] == "lookup" and calls[0]["id"] == "call_0"
    assert all("name" not in c["function"] and c["function"]["arguments"].strip() for c in calls[1:])
    assert len(calls) == 4


def test_server_without_tokenize_answers_404_and_still_generates(tmp_path):
    async def main():
        async with served(config(tokenize_endpoint=False)) as (ref, s):
            tok = await post(s, f"{ref.url}/tokenize", {"prompt": "a b"})
            gen = await post(s, f"{ref.url}/v1/chat/completions", chat_body("a b", 2))
            return tok, gen

    tok, gen = run(main())
    assert tok.status == 404 and gen.status == 200 and gen.chunks[-1]["usage"]["completion_tokens"] == 2


def test_style_config_rejects_nonsense():
    from tokenbench.errors import UsageError
    with pytest.raises(UsageError):
        config(reasoning_field="thoughts")
    with pytest.raises(UsageError):
        config(empty_every=-1)


@pytest.mark.parametrize("alone", [False, True])
def test_completions_usage_on_its_own_last_chunk_when_asked(tmp_path, alone):
    """vLLM and SGLang end a completions stream with a usage-only chunk (`choices: []`); llama.cpp puts
    usage on the last token's chunk. Either way the send log counts only the tokens."""
    async def main():
        async with served(config(send_log=str(tmp_path / "l"), usage_chunk=alone)) as (ref, s):
            body = stream_body([5, 6], 4, stream_options={"include_usage": True})
            return await post(s, f"{ref.url}/v1/completions", body)

    chunks = run(main()).chunks
    (rec,) = read_log(tmp_path / "l")
    last_token = [c for c in chunks if c["choices"]][-1]
    assert (chunks[-1]["choices"] == []) is alone and chunks[-1]["usage"]["completion_tokens"] == 4
    assert ("usage" in last_token) is not alone and len(rec["write_ns"]) == 4 and sum(rec["tokens"]) == 4
