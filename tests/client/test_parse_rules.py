"""client/parse.py rule by rule, each stated as the record it must give (not only as one path agreeing with
another): every rule is checked on the three paths a stream can take (plain, bulk, strict), so a change in
code they share is caught as well as one in a path of its own (issue 39: a test for every behaviour a
single-point change could alter). Rules: docs/metrics.md and the module's docstring."""

from __future__ import annotations

import json

import pytest

from tests.client.test_parse_plain import took_plain
from tokenbench.client import parse
from tokenbench.client.bulk import BulkDecoder, Unusual
from tokenbench.client.parse import MAX_TEXT, PLAIN_STEP, parse_exchange, parse_steps
from tokenbench.client.plain import NotPlain, PlainReader
from tokenbench.client.records import RawExchange, RequestRecord
from tokenbench.client.request import PreparedRequest

MS = 1_000_000


def req(output_len: int = 3, expected: int = 3, images: int = 0) -> PreparedRequest:
    return PreparedRequest(url="http://x/v1/completions", body=b"{}", headers={}, input_len=3,
                           output_len=output_len, expected_prompt_tokens=expected, images=images)


def ev(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def text(t: str, finish=None, **extra) -> bytes:
    return ev({"id": "x", "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": finish}], **extra})


def usage_ev(usage) -> bytes:
    return ev({"choices": [], "usage": usage})


DONE = b"data: [DONE]\n\n"


def raw(*events: bytes, status: int = 200, end_ms: int = 900, error_kind=None, step_ms: int = 10) -> RawExchange:
    return RawExchange(intended_ns=0, sent_ns=1 * MS, headers_ns=2 * MS, end_ns=end_ms * MS, status=status,
                       chunks=[((10 + step_ms * i) * MS, e) for i, e in enumerate(events)], error_kind=error_kind,
                       error_detail="transport" if error_kind else "")


class _NotPlain(PlainReader):
    def feed(self, reads):
        raise NotPlain


class _NotBulk(BulkDecoder):
    def feed(self, t_ns, data):
        raise Unusual


def _parsed(exchange: RawExchange, request: PreparedRequest, plain: bool, bulk: bool) -> RequestRecord:
    saved = parse.PlainReader, parse.BulkDecoder
    parse.PlainReader, parse.BulkDecoder = (PlainReader if plain else _NotPlain), (BulkDecoder if bulk else _NotBulk)
    try:
        return parse_exchange(exchange, request, 0, "measure")
    finally:
        parse.PlainReader, parse.BulkDecoder = saved


def every_path(exchange: RawExchange, request: PreparedRequest | None = None) -> RequestRecord:
    """The record parse_exchange gives (plain path first), checked equal to the per-event paths' (bulk,
    then strict) and to the strict path's alone."""
    request = request or req()
    got = _parsed(exchange, request, True, True)
    assert _parsed(exchange, request, False, True) == got, "bulk"
    assert _parsed(exchange, request, False, False) == got, "strict"
    return got


GOOD = [text("a"), text("b"), text("c", finish="length")]


# ---- usage: token counts are non-negative ints, or absent ----

@pytest.mark.parametrize("field,value", [
    ("completion_tokens", "3"), ("completion_tokens", -1), ("completion_tokens", 3.0), ("completion_tokens", True),
    ("prompt_tokens", "3"), ("prompt_tokens", -3), ("prompt_tokens", 2.5), ("prompt_tokens", False),
    ("prompt_tokens", [3]), ("completion_tokens", {"n": 3})])
def test_a_usage_count_that_is_not_a_non_negative_int_is_malformed_usage(field, value):
    usage = {"prompt_tokens": 3, "completion_tokens": 3, field: value}
    rec = every_path(raw(*GOOD, usage_ev(usage), DONE))
    assert rec.error_kind == "invalid_json" and not rec.ok
    assert f"usage.{field} is not a token count" in rec.error_detail
    assert "does not follow the OpenAI schema" in rec.error_detail


@pytest.mark.parametrize("details,problem", [
    ({"cached_tokens": -1}, True), ({"cached_tokens": "1"}, True), ({"cached_tokens": True}, True),
    (3, True), (["x"], True), ({"cached_tokens": 2}, False), ({"cached_tokens": 0}, False), ({}, False),
    (None, False)])
def test_cached_tokens_are_a_count_inside_an_object(details, problem):
    rec = every_path(raw(*GOOD, usage_ev({"prompt_tokens": 3, "completion_tokens": 3,
                                           "prompt_tokens_details": details}), DONE))
    if problem:
        assert rec.error_kind == "invalid_json" and "prompt_tokens_details.cached_tokens" in rec.error_detail
    else:
        assert rec.ok and rec.cached_tokens == (details or {}).get("cached_tokens")


def test_zero_and_absent_counts_are_counts():
    rec = every_path(raw(*GOOD, usage_ev({"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}), DONE))
    assert rec.ok and (rec.prompt_tokens, rec.completion_tokens, rec.usage_source) == (3, 3, "server")
    zero = every_path(raw(text("", finish="stop"), usage_ev({"prompt_tokens": 3, "completion_tokens": 0}), DONE),
                      req(output_len=0))
    assert zero.completion_tokens == 0 and zero.error_kind is None and zero.length_error == ""
    partial = every_path(raw(*GOOD, usage_ev({"completion_tokens": 3}), DONE))
    assert partial.ok and partial.prompt_tokens is None and partial.completion_tokens == 3


def test_one_bad_usage_among_good_ones_is_malformed():
    good = {"prompt_tokens": 3, "completion_tokens": 3}
    for events in ([usage_ev(good), usage_ev({**good, "completion_tokens": -2})],
                   [usage_ev({**good, "completion_tokens": -2}), usage_ev(good)]):
        assert every_path(raw(*GOOD, *events, DONE)).error_kind == "invalid_json"


def test_usage_that_is_not_an_object_is_malformed_and_an_empty_one_is_none():
    assert "usage is not an object" in every_path(raw(*GOOD, usage_ev([3]), DONE)).error_detail
    none = every_path(raw(*GOOD, usage_ev({}), DONE))
    assert none.ok and none.usage_source == "chunks" and none.completion_tokens == 3


def test_the_last_usage_counts():
    rec = every_path(raw(*GOOD, usage_ev({"prompt_tokens": 3, "completion_tokens": 2}),
                         usage_ev({"prompt_tokens": 3, "completion_tokens": 3}), DONE))
    assert rec.ok and rec.completion_tokens == 3 and rec.length_error == ""


# ---- what a record says without usage, and when usage disagrees ----

def test_without_usage_the_chunks_are_counted_and_the_record_says_so():
    rec = every_path(raw(*GOOD, DONE))
    assert (rec.prompt_tokens, rec.completion_tokens, rec.usage_source, rec.output_tokens) == (None, 3, "chunks", 3)
    empty = every_path(raw(text("", finish="stop"), DONE), req(output_len=0))
    assert (empty.completion_tokens, empty.usage_source) == (None, "none")


def test_length_problems_are_each_named_and_joined():
    rec = every_path(raw(*GOOD, usage_ev({"prompt_tokens": 5, "completion_tokens": 4}), DONE))
    assert rec.error_kind is None and rec.length_error == (
        "prompt 5 tokens, expected 3; output 4 tokens, expected 3 (finish_reason='length')")
    short = every_path(raw(*GOOD[:2], text("c", finish="stop"), usage_ev({"prompt_tokens": 3, "completion_tokens": 3}),
                           DONE), req(output_len=5))
    assert short.error_kind is None and short.length_error == "output 3 tokens, expected 5 (finish_reason='stop')"
    exact = every_path(raw(*GOOD, usage_ev({"prompt_tokens": 3, "completion_tokens": 3}), DONE))
    assert exact.length_error == "" and exact.ok


def test_a_stream_that_ends_short_without_a_finish_reason_is_early_done():
    rec = every_path(raw(text("a"), text("b"), DONE), req(output_len=3))
    assert rec.error_kind == "early_done" and rec.error_detail == "stream ended after 2 of 3 tokens with no finish_reason"
    assert rec.token_times_ns == [10 * MS, 20 * MS]                          # the partial timings are kept
    enough = every_path(raw(text("a"), text("b"), text("c"), DONE), req(output_len=3))
    assert enough.error_kind is None and enough.length_error == ""           # all asked for: no finish needed


def test_tokens_reported_but_none_carried_by_a_chunk_leave_ttft_unknown():
    role_only = ev({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
    rec = every_path(raw(role_only, usage_ev({"prompt_tokens": 3, "completion_tokens": 3}), DONE))
    assert rec.token_times_ns == [] and "server reported 3 output tokens but no chunk carried one" in rec.length_error


def test_images_the_server_counted_are_checked_against_those_sent():
    def with_images(count) -> RequestRecord:
        usage = {"prompt_tokens": 3, "completion_tokens": 3, "prompt_tokens_details": {"image_count": count}}
        return every_path(raw(*GOOD, usage_ev(usage), DONE), req(images=2))
    assert with_images(2).image_count == 2 and with_images(2).length_error == ""
    assert with_images(1).length_error == "server counted 1 images, 2 sent"
    assert with_images(True).image_count is None and with_images("2").image_count is None


# ---- errors ----

def test_an_error_object_is_a_server_error_with_its_first_300_characters():
    rec = every_path(raw(text("a"), ev({"error": {"message": "x" * 1000}}), DONE))
    assert rec.error_kind == "server_error" and len(rec.error_detail) == 300
    assert rec.error_detail.startswith('{"message": "xxx')
    first = every_path(raw(ev({"error": "boom"}), ev({"choices": 3}), DONE))
    assert (first.error_kind, first.error_detail) == ("server_error", '"boom"')     # the first error is kept


@pytest.mark.parametrize("event,kind,detail", [
    (b"data: {not json\n\n", "invalid_json", "chunk is not JSON"),
    (b"data: [1, 2]\n\n", "invalid_json", "chunk is not a JSON object"),
    (b"data: " + b"[" * 100_000 + b"\n\n", "invalid_json", "chunk is not JSON"),
    (ev({"choices": {"0": 1}}), "invalid_json", "choices is not a list"),
    (b"nonsense\n\n", "malformed_sse", "not an SSE data line: nonsense")])
def test_unreadable_events_are_typed_errors(event, kind, detail):
    rec = every_path(raw(text("a"), event, text("b", finish="length"), DONE))
    assert rec.error_kind == kind and detail in rec.error_detail


def test_the_transports_error_wins_and_no_reset_is_added_to_it():
    rec = every_path(raw(text("a"), text("b"), error_kind="timeout"))
    assert (rec.error_kind, rec.error_detail) == ("timeout", "transport")
    assert rec.token_times_ns == [10 * MS, 20 * MS] and rec.text == "ab"         # the partial stream is kept
    nothing = every_path(raw(error_kind="connect"))
    assert nothing.error_kind == "connect" and nothing.token_times_ns == [] and nothing.end_ns == 900 * MS


def test_a_stream_is_complete_at_done_or_a_clean_end_after_a_finish_reason():
    assert every_path(raw(*GOOD)).ok                                            # finish_reason, no [DONE]
    cut = every_path(raw(text("a"), text("b"), text("c")))
    assert (cut.error_kind, cut.error_detail) == ("reset", "stream ended without [DONE] or a finish_reason")
    assert every_path(raw(text("a"), text("b"), text("c"), DONE)).ok           # [DONE], no finish_reason
    assert every_path(raw(text("a"), text("b"), text("c"), status=500)).error_kind != "reset"


def test_the_end_is_the_done_read_else_the_bodys_end_and_events_after_done_are_ignored():
    rec = every_path(raw(*GOOD, DONE, text("late"), ev({"error": "after"})))
    assert rec.ok and rec.end_ns == 40 * MS and rec.text == "abc"
    assert every_path(raw(*GOOD)).end_ns == 900 * MS
    spaced = every_path(raw(*GOOD, b"data:  [DONE] \n\n"))
    assert spaced.ok and spaced.end_ns == 40 * MS


# ---- text, finish reason, counting ----

def test_the_last_finish_reason_given_is_kept():
    rec = every_path(raw(text("a", finish="stop"), text("b"), text("c", finish="length"), DONE))
    assert rec.finish_reason == "length"
    kept = every_path(raw(text("a"), text("b", finish="length"), text("c"), DONE))
    assert kept.finish_reason == "length"


def test_text_is_kept_up_to_max_text_and_no_more_is_held_while_parsing():
    piece = "y" * 300
    events = [text(piece) for _ in range(20)] + [text("z", finish="length")]
    rec = every_path(raw(*events, DONE), req(output_len=21))
    assert rec.text == (piece * 20)[:MAX_TEXT] and len(rec.text) == MAX_TEXT == 2000
    for steps in (parse._decode_steps, parse._bulk_steps):
        st = parse._State()
        list(steps(raw(*events, DONE), st, 1 << 30))
        assert st.text_len == sum(len(t) for t in st.text) and MAX_TEXT <= st.text_len < MAX_TEXT + len(piece)


def test_several_choices_in_one_chunk_count_each_and_reasoning_is_counted_apart():
    two = ev({"choices": [{"index": 0, "delta": {"content": "a"}}, {"index": 1, "delta": {"content": "b"}}]})
    rec = every_path(raw(two, text("c", finish="length"), DONE))
    assert rec.token_counts == [2, 1] and rec.output_tokens == 3
    think = ev({"choices": [{"index": 0, "delta": {"reasoning_content": "hm"}}]})
    mixed = ev({"choices": [{"index": 0, "delta": {"reasoning_content": "r"}}, {"index": 1, "delta": {"content": "d"}}]})
    r = every_path(raw(think, mixed, text("e", finish="length"), DONE), req(output_len=4))
    assert r.token_counts == [1, 2, 1] and r.reasoning_tokens == 1 and r.first_content_ns == 20 * MS
    all_reasoning = ev({"choices": [{"index": 0, "delta": {"reasoning_content": "r"}},
                                    {"index": 1, "delta": {"reasoning": "s"}}]})
    rr = every_path(raw(all_reasoning, text("e", finish="length"), DONE))
    assert rr.reasoning_tokens == 2 and rr.first_content_ns == 20 * MS


def test_a_chunk_whose_choices_carry_reasoning_and_no_answer_counts_as_reasoning_whatever_else_they_carry():
    # a choice that has finished (an empty delta) or sends an empty token beside one that reasons
    for other in ({"index": 1, "delta": {}, "finish_reason": "stop"}, {"index": 1, "delta": {"content": ""}}):
        chunk = ev({"choices": [{"index": 0, "delta": {"reasoning_content": "r"}}, other]})
        rec = every_path(raw(chunk, text("e", finish="length"), DONE), req(output_len=3 if other["delta"] else 2))
        assert rec.reasoning_tokens == rec.token_counts[0] >= 1 and rec.first_content_ns == 20 * MS


def test_token_ids_count_per_chunk_and_a_finish_only_chunk_carries_none():
    def ids(k: list[int], finish=None) -> bytes:
        return ev({"choices": [{"index": 0, "text": "t" * len(k), "token_ids": k, "finish_reason": finish}]})
    rec = every_path(raw(ids([1, 2]), ids([3]), ev({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}),
                         DONE))
    assert rec.token_counts == [2, 1] and rec.token_times_ns == [10 * MS, 20 * MS] and rec.count_source == "token_ids"
    both = ev({"choices": [{"index": 0, "text": "ab", "token_ids": [1, 2]}, {"index": 1, "text": "c", "token_ids": [3]}]})
    assert every_path(raw(both, DONE)).token_counts == [3]
    finish_only = ev({"choices": [{"index": 0, "text": "", "finish_reason": "length"},
                                  {"index": 1, "text": "", "finish_reason": "length"}]})
    r = every_path(raw(text("a"), text("b"), text("c"), finish_only, DONE))
    assert r.token_counts == [1, 1, 1] and r.finish_reason == "length"


def test_a_last_finish_of_several_choices_without_text_is_a_token_where_usage_counts_more():
    """The server counted 6 tokens, its chunks carry 4 and the last event is every choice finishing without
    text: that finish is a token (some servers count it), the rest spread over the later chunks, on every path;
    a finish that carries text is counted by its text alone."""
    pair = lambda a, b, finish=None: ev({"choices": [{"index": 0, "delta": {"content": a}, "finish_reason": finish},  # noqa: E731
                                                     {"index": 1, "delta": {"content": b}, "finish_reason": finish}]})
    end = ev({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"},
                          {"index": 1, "delta": {}, "finish_reason": "length"}],
              "usage": {"prompt_tokens": 3, "completion_tokens": 6, "total_tokens": 9}})
    rec = every_path(raw(pair("a", "b"), pair("c", "d"), end, DONE), req(output_len=6))
    assert rec.token_counts == [2, 3, 1] and rec.token_times_ns == [10 * MS, 20 * MS, 30 * MS]
    told = ev({"choices": [{"index": 0, "delta": {"content": "e"}, "finish_reason": "length"},
                           {"index": 1, "delta": {"content": "f"}, "finish_reason": "length"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10}})
    assert every_path(raw(pair("a", "b"), pair("c", "d"), told, DONE), req(output_len=7)).token_counts == [2, 3, 2]


# ---- parsing between socket reads ----

@pytest.mark.parametrize("reads,per_step", [(40, 1), (64, 2), (15, 1), (16, 1), (33, 2)])
def test_the_plain_path_pauses_every_16_steps_and_the_others_every_step(reads, per_step):
    plain = raw(*[text("t") for _ in range(reads - 1)], text("t", finish="length"))
    assert took_plain(plain) and PLAIN_STEP == 16
    request = req(output_len=reads)
    pauses = list(parse_steps(plain, request, 0, "measure", per_step))
    assert pauses[:-1] == [None] * (reads // (PLAIN_STEP * per_step)) and pauses[-1] == parse_exchange(plain, request, 0,
                                                                                                       "measure")
    usage_each = raw(*[text("t", usage={"prompt_tokens": 3, "completion_tokens": i + 1}) for i in range(reads)])
    assert not took_plain(usage_each)
    steps = list(parse_steps(usage_each, request, 0, "measure", per_step))
    assert steps[:-1] == [None] * (reads // per_step) and steps[-1].output_tokens == reads


def test_the_strict_path_pauses_every_step():
    events = [b": keep-alive\n\n"] + [text("t") for _ in range(9)]
    st = parse._State()
    assert len(list(parse._decode_steps(raw(*events), st, 3))) == 10 // 3
    st2 = parse._State()
    assert len(list(parse._bulk_steps(raw(*[text("t") for _ in range(10)]), st2, 3))) == 10 // 3
