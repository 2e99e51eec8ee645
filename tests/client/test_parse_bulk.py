"""The bulk path (client.bulk) gives exactly the record the strict path gives, on every stream shape;
and it is the path taken for the common shape (else the comparison would prove nothing)."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.client import parse
from tokenbench.client.bulk import BulkDecoder, Unusual
from tokenbench.client.parse import parse_exchange
from tokenbench.client.records import RawExchange
from tokenbench.client.request import PreparedRequest

MS = 1_000_000
REQ = PreparedRequest(url="http://x/v1/completions", body=b"{}", headers={}, input_len=3, output_len=4,
                      expected_prompt_tokens=3)


class _StrictOnly(BulkDecoder):
    def feed(self, t_ns, data):
        raise Unusual


def strict(raw):
    saved, parse.BulkDecoder = parse.BulkDecoder, _StrictOnly
    try:
        return parse_exchange(raw, REQ, 0, "measure")
    finally:
        parse.BulkDecoder = saved


def exchange(body: bytes, cuts: list[int], error_kind=None) -> RawExchange:
    edges = sorted({0, len(body), *(c % (len(body) + 1) for c in cuts)})
    reads = [(10 * MS + i * MS, body[a:b]) for i, (a, b) in enumerate(zip(edges, edges[1:], strict=False))]
    return RawExchange(intended_ns=0, sent_ns=1, headers_ns=2, end_ns=900 * MS, status=200,
                       chunks=[r for r in reads if r[1]], error_kind=error_kind)


TEXT = st.sampled_from(["", "a", " tok", "é", "中文", None, 5, ["x"]])
DELTA = st.fixed_dictionaries({}, optional={
    "role": st.sampled_from(["assistant", None]), "content": TEXT, "reasoning": TEXT,
    "reasoning_content": TEXT,
    "tool_calls": st.sampled_from([[], [{"function": {"name": "f", "arguments": ""}}], "x"])})
CHOICE = st.one_of(
    st.fixed_dictionaries({"index": st.just(0), "text": TEXT}, optional={
        "finish_reason": st.sampled_from([None, "length", "stop", 3]),
        "token_ids": st.sampled_from([None, [], [1], [1, 2], "x"])}),
    st.fixed_dictionaries({"index": st.just(0), "delta": st.one_of(DELTA, st.just(None), st.just("d"))}, optional={
        "finish_reason": st.sampled_from([None, "length"]), "token_ids": st.sampled_from([[7], [7, 8]])}))
USAGE = st.fixed_dictionaries({"prompt_tokens": st.sampled_from([3, -1, None, True]),
                               "completion_tokens": st.integers(0, 6)},
                              optional={"prompt_tokens_details": st.sampled_from([{"cached_tokens": 1}, 3])})
EVENT = st.one_of(
    st.fixed_dictionaries({"choices": st.lists(CHOICE, max_size=2)}, optional={"usage": st.one_of(USAGE, st.just(0))}),
    st.fixed_dictionaries({"error": st.just({"message": "boom"})}),
    st.fixed_dictionaries({"choices": st.just([]), "usage": USAGE}))
LINE = st.one_of(EVENT.map(lambda e: b"data: " + json.dumps(e).encode() + b"\n\n"),
                 st.sampled_from([b": keep-alive\n\n", b"data: {not json\n\n", b"data:{}\n\n", b"data: [1]\n\n",
                                  b"event: x\ndata: {}\n\n", b"data: {}\r\n\r\n", b"\xff\n\n", b"data: NaN\n\n",
                                  b'data: {"choices": 1e400}\n\n']))


@settings(max_examples=400, deadline=None)
@given(st.lists(LINE, max_size=6), st.sampled_from([b"data: [DONE]\n\n", b"data: [DONE]\n", b"", b"data: {}"]),
       st.lists(st.integers(0, 4000), max_size=5), st.booleans())
def test_bulk_and_strict_paths_agree(lines, tail, cuts, failed):
    raw = exchange(b"".join(lines) + tail, cuts, "reset" if failed else None)
    assert parse_exchange(raw, REQ, 0, "measure") == strict(raw)


def common(n=4, chat=True, usage_each=False):
    out = []
    for i in range(n):
        choice = ({"index": 0, "delta": {"content": f" t{i}"}, "finish_reason": "length" if i == n - 1 else None}
                  if chat else {"index": 0, "text": f" t{i}", "finish_reason": None})
        ev = {"id": "x", "choices": [choice]}
        if usage_each:
            ev["usage"] = {"prompt_tokens": 3, "completion_tokens": i + 1}
        out.append(b"data: " + json.dumps(ev).encode() + b"\n\n")
    out.append(b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d}}\n\n' % n)
    return b"".join(out) + b"data: [DONE]\n\n"


@pytest.mark.parametrize("kwargs", [{}, {"chat": False}, {"usage_each": True}])
def test_common_shape_takes_the_bulk_path_at_every_split(kwargs):
    body = common(**kwargs)
    for cut in range(len(body) + 1):
        raw = exchange(body, [cut])
        st_ = parse._State()
        list(parse._bulk_steps(raw, st_, 1 << 30))            # raises Unusual if it left the bulk path
        rec = parse_exchange(raw, REQ, 0, "measure")
        assert rec.ok and rec.output_tokens == 4 and rec == strict(raw)
