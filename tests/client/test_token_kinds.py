"""Every kind of generated token counts, from content and usage, never from the number of chunks."""

from tests.client.test_parse import MS, raw, req, sse
from tokenbench.client.parse import parse_exchange
from tokenbench.metrics.summary import summarize
from tokenbench.spec.bench import Load

DONE = b"data: [DONE]\n\n"
ROLE = sse({"choices": [{"delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})


def delta(finish=None, usage=None, **fields):
    body = {"choices": [{"delta": fields, "finish_reason": finish}]}
    return sse({**body, "usage": usage} if usage else body)


def usage(n, prompt=3):
    return sse({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": n}})


def parse(chunks, output_len=4):
    return parse_exchange(raw(chunks), req(output_len=output_len), 0, "measure")


def reasoning_stream(field):
    return [(10, ROLE), (50, delta(**{field: " think"})), (70, delta(**{field: " more"})),
            (90, delta(content=" yes")), (110, delta(content=" no", finish="length")), (111, usage(4)), (112, DONE)]


def test_reasoning_deltas_under_either_name_are_tokens_and_ttfc_is_the_first_answer_token():
    for field in ("reasoning", "reasoning_content"):
        r = parse(reasoning_stream(field))
        assert r.ok and not r.length_error, r.length_error
        assert r.ttft_ns == 50 * MS and r.ttfc_ns == 90 * MS
        assert r.token_counts == [1, 1, 1, 1] and r.reasoning_tokens == 2
        assert r.text == " think more yes no"


def test_reasoning_under_both_names_counts_once():
    chunks = [(10, ROLE), (50, delta(reasoning=" a", reasoning_content=" a")),
              (60, delta(content=" b", finish="length")), (61, usage(2)), (62, DONE)]
    r = parse(chunks, output_len=2)
    assert r.token_counts == [1, 1] and r.reasoning_tokens == 1 and r.text == " a b"


def test_usage_reasoning_tokens_take_precedence():
    chunks = [(50, delta(reasoning=" a b")), (60, delta(content=" c", finish="length")),
              (61, sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3,
                                                 "completion_tokens_details": {"reasoning_tokens": 2}}})), (62, DONE)]
    r = parse(chunks, output_len=3)
    assert r.reasoning_tokens == 2 and r.output_tokens == 3 and not r.length_error


def test_empty_text_first_token_sets_ttft():
    """vLLM sends an empty-text chunk for a token without text (EOS kept going, special token)."""
    chunks = [(10, ROLE), (51, delta(content="")), (71, delta(content=" b")), (91, delta(content=" c")),
              (111, delta(content=" d", finish="length")), (112, usage(4)), (113, DONE)]
    r = parse(chunks)
    assert r.ttft_ns == 51 * MS and r.ttfc_ns == 71 * MS and r.token_counts == [1, 1, 1, 1]
    assert r.count_source == "chunks" and not r.length_error


def test_completions_empty_text_chunks_count():
    chunks = [(51, sse({"choices": [{"text": "", "finish_reason": None}]})),
              (71, sse({"choices": [{"text": "x", "finish_reason": None}]})),
              (91, sse({"choices": [{"text": "", "finish_reason": "length"}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 3}})), (92, DONE)]
    r = parse(chunks, output_len=3)
    # the empty finish chunk is the last token here: usage says one is missing
    assert r.token_times_ns == [51 * MS, 71 * MS, 91 * MS] and r.token_counts == [1, 1, 1]


def test_continuous_usage_counts_empty_chunks_exactly():
    u = lambda n: {"prompt_tokens": 3, "completion_tokens": n}  # noqa: E731
    chunks = [(10, delta(role="assistant", content="", usage=u(0))), (51, delta(content="", usage=u(1))),
              (71, delta(content=" b c", usage=u(3))), (91, delta(content="", finish="length", usage=u(4))),
              (92, usage(4)), (93, DONE)]
    r = parse(chunks)
    assert r.count_source == "continuous_usage"
    assert r.token_times_ns == [51 * MS, 71 * MS, 91 * MS] and r.token_counts == [1, 2, 1]


def test_tool_call_argument_deltas_are_tokens():
    call = lambda **fn: {"tool_calls": [{"index": 0, "function": fn}]}  # noqa: E731
    chunks = [(10, ROLE), (40, delta(**call(name="f", arguments=""))), (60, delta(**call(arguments='{"a"'))),
              (80, delta(**call(arguments=":1}"), finish="tool_calls")), (81, usage(3)), (82, DONE)]
    r = parse(chunks, output_len=3)
    assert r.ttft_ns == 40 * MS and r.token_counts == [1, 1, 1] and r.ttfc_ns == 40 * MS
    assert r.ok and not r.length_error


def test_several_tokens_per_chunk_without_ids_follow_usage():
    """Speculative decoding or a stream interval: 4 chunks carry 10 tokens; a chunk is not a token."""
    chunks = [(50, delta(content=" a")), (70, delta(content=" b c d")), (90, delta(content=" e f g")),
              (110, delta(content=" h i j", finish="length")), (111, usage(10)), (112, DONE)]
    r = parse(chunks, output_len=10)
    assert r.token_counts == [1, 3, 3, 3] and r.count_source == "chunks+usage"
    s = summarize([r], Load(concurrency=1, num_prompts=1), 3, 10).to_dict()
    assert s["total_output_tokens"] == 10


def test_tokens_never_seen_in_the_stream_are_flagged():
    chunks = [(10, ROLE), (61, usage(3)), (62, DONE)]
    r = parse(chunks, output_len=3)
    assert r.ok and r.ttft_ns is None and "no chunk carried one" in r.length_error
    s = summarize([r], Load(concurrency=1, num_prompts=1), 3, 3).to_dict()
    assert s["zero_token_requests"] == 1 and s["length_mismatches"] == 1


def test_e2el_ends_at_done():
    chunks = [(50, delta(content=" a", finish="length")), (51, usage(1)), (60, DONE)]
    r = parse(chunks, output_len=1)
    assert r.end_ns == 60 * MS          # raw() ends the body at 500 ms


def test_cell_summary_has_ttfc_and_reasoning_counts():
    r = parse(reasoning_stream("reasoning"))
    s = summarize([r, r], Load(concurrency=1, num_prompts=2), 3, 4).to_dict()
    assert s["mean_ttfc_ms"] == 90 and s["mean_ttft_ms"] == 50
    assert s["total_reasoning_tokens"] == 4 and s["reasoning_requests"] == 2


def test_steady_throughput_counts_tokens_not_chunks():
    """3 chunks carry 9 tokens (usage says so, no token ids): a steady window over them sees 9 tokens."""
    from tokenbench.metrics.summary import _steady
    chunks = [(50, delta(content=" a")), (70, delta(content=" b c d e")),
              (90, delta(content=" f g h i", finish="length")), (91, usage(9)), (92, DONE)]
    r = parse(chunks, output_len=9)
    steady = _steady([r], (0, 100 * MS))
    assert steady["steady_output_throughput"] == 9 / 0.1          # 90 tok/s, not 30


def test_empty_chunks_beyond_the_usage_count_are_not_tokens():
    """A gateway's leading empty delta is not a token when usage says so: TTFT is the first real one."""
    chunks = [(20, delta(content="")), (50, delta(content=" a")), (70, delta(content=" b", finish="length")),
              (71, usage(2)), (72, DONE)]
    r = parse(chunks, output_len=2)
    assert r.ttft_ns == 50 * MS and r.token_counts == [1, 1] and r.count_source == "chunks+usage"
