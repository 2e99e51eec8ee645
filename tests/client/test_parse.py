import json

from tokenbench.client.parse import parse_exchange
from tokenbench.client.records import RawExchange
from tokenbench.client.request import PreparedRequest
from tokenbench.metrics.verdict import verdict

MS = 1_000_000


def req(input_len=3, output_len=3, expected=None):
    return PreparedRequest(url="http://x/v1/completions", body=b"{}", headers={}, input_len=input_len,
                           output_len=output_len, expected_prompt_tokens=expected or input_len)


def sse(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def raw(chunks, status=200):
    return RawExchange(intended_ns=0, sent_ns=0, headers_ns=1 * MS, end_ns=500 * MS, status=status,
                       chunks=[(t * MS, b) for t, b in chunks])


def chat(content=None, role=None, finish=None, usage=None, choices=True):
    delta = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    body = {"choices": [{"delta": delta, "finish_reason": finish}] if choices else []}
    if usage:
        body["usage"] = usage
    return sse(body)


def test_role_only_chunk_is_not_first_token_and_usage_from_final_chunk():
    r = parse_exchange(raw([(10, chat(role="assistant", content="")), (100, chat("a")), (120, chat("b")),
                            (140, chat("c", finish="length")),
                            (141, chat(choices=False, usage={"prompt_tokens": 3, "completion_tokens": 3})),
                            (142, b"data: [DONE]\n\n")]), req(), 0, "measure")
    assert r.ok and r.length_error == ""
    assert r.token_times_ns == [100 * MS, 120 * MS, 140 * MS]
    assert r.ttft_ns == 100 * MS and r.usage_source == "server" and r.text == "abc"


def test_token_ids_give_tokens_per_chunk():
    chunks = [(100, sse({"choices": [{"text": "ab", "token_ids": [5, 6]}]})),
              (140, sse({"choices": [{"text": "c", "token_ids": [7], "finish_reason": "length"}],
                         "usage": {"prompt_tokens": 3, "completion_tokens": 3}})),
              (141, b"data: [DONE]\n\n")]
    r = parse_exchange(raw(chunks), req(), 0, "measure")
    assert r.token_counts == [2, 1] and r.output_tokens == 3 and r.ok


def test_server_that_ignores_ignore_eos_is_a_length_mismatch_with_cause():
    chunks = [(100, sse({"choices": [{"text": "a"}]})),
              (120, sse({"choices": [{"text": "", "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 3, "completion_tokens": 1}})),
              (121, b"data: [DONE]\n\n")]
    r = parse_exchange(raw(chunks), req(output_len=3), 0, "measure")
    assert r.ok and "output 1 tokens, expected 3" in r.length_error
    status, message = verdict([r], allow_mismatch=False, max_error_rate=0)
    assert status == "failed" and "ignores ignore_eos" in message
    assert verdict([r], allow_mismatch=True, max_error_rate=0)[0] == "ok"


def test_missing_usage_counts_from_chunks_and_says_so():
    chunks = [(100, sse({"choices": [{"text": "a"}]})), (110, sse({"choices": [{"text": "b"}]})),
              (120, sse({"choices": [{"text": "c", "finish_reason": "length"}]})), (121, b"data: [DONE]\n\n")]
    r = parse_exchange(raw(chunks), req(), 0, "measure")
    assert r.usage_source == "chunks" and r.completion_tokens == 3 and r.prompt_tokens is None and r.ok


def test_early_done_keeps_partial_timings():
    r = parse_exchange(raw([(100, sse({"choices": [{"text": "a"}]})), (101, b"data: [DONE]\n\n")]), req(), 0, "measure")
    assert r.error_kind == "early_done" and r.token_times_ns == [100 * MS]


def test_invalid_json_and_malformed_lines_are_typed_errors():
    r = parse_exchange(raw([(100, b"data: {not json\n\n"), (101, b"data: [DONE]\n\n")]), req(), 0, "measure")
    assert r.error_kind == "invalid_json"
    r = parse_exchange(raw([(100, b"hello\n\n"), (101, b"data: [DONE]\n\n")]), req(), 0, "measure")
    assert r.error_kind == "malformed_sse"


def test_stream_without_done_is_complete_after_a_finish_reason_else_a_reset():
    """`[DONE]` is a convention: a body that ends cleanly after finish_reason (and usage) is a complete
    request, ending at the body's end; one that ends before any finish_reason was cut short."""
    done = sse({"choices": [{"text": "a", "finish_reason": "length"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 3}})
    r = parse_exchange(raw([(100, done)]), req(), 0, "measure")
    assert r.ok and r.output_tokens == 3 and r.finish_reason == "length" and r.end_ns == 500 * MS
    cut = parse_exchange(raw([(100, sse({"choices": [{"text": "a"}]}))]), req(), 0, "measure")
    assert cut.error_kind == "reset" and "[DONE]" in cut.error_detail


def test_error_object_in_stream():
    r = parse_exchange(raw([(100, sse({"error": {"message": "boom"}}))]), req(), 0, "measure")
    assert r.error_kind == "server_error" and "boom" in r.error_detail


def test_final_usage_only_chunk_carries_no_token():
    """llama.cpp /v1/completions: the finish chunk has empty text and the (non-continuous) usage."""
    chunks = [(100, sse({"choices": [{"text": "a"}]})), (110, sse({"choices": [{"text": "b"}]})),
              (120, sse({"choices": [{"text": "c"}]})),
              (121, sse({"choices": [{"text": "", "finish_reason": "length"}],
                         "usage": {"prompt_tokens": 3, "completion_tokens": 3}})), (122, b"data: [DONE]\n\n")]
    r = parse_exchange(raw(chunks), req(), 0, "measure")
    assert r.token_counts == [1, 1, 1] and r.token_times_ns[-1] == 120 * MS and r.ok


def test_continuous_usage_gives_tokens_per_chunk():
    chunks = [(100, sse({"choices": [{"text": "ab"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})),
              (110, sse({"choices": [{"text": "c", "finish_reason": "length"}],
                         "usage": {"prompt_tokens": 3, "completion_tokens": 3}})), (111, b"data: [DONE]\n\n")]
    r = parse_exchange(raw(chunks), req(), 0, "measure")
    assert r.token_counts == [2, 1] and r.output_tokens == 3
