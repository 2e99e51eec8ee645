"""The plain path (client.plain) gives exactly the record the per-event paths give, on every stream
shape it accepts; it accepts the common shapes at every split of their bytes into reads (else the
comparison would prove nothing); and resolve_plain counts as resolve does on the chunks it stands for."""

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.client.test_parse_bulk import LINE, REQ, common, exchange, strict
from tokenbench.client import parse
from tokenbench.client.parse import parse_exchange, parse_steps
from tokenbench.client.plain import NotPlain, PlainReader
from tokenbench.client.token_counts import Chunk, resolve, resolve_plain

PLAIN_LINE = st.one_of(
    LINE,
    st.sampled_from([{"text": " a"}, {"text": "中"}, {"delta": {"content": " b"}},
                     {"delta": {"role": "assistant", "content": ""}}, {"delta": {"role": "assistant"}},
                     {"delta": {}, "finish_reason": "length"}, {"delta": {"content": None}, "finish_reason": "stop"},
                     {"delta": {"content": " c"}, "finish_reason": "length"}, {"text": " d", "finish_reason": ""}])
    .map(lambda c: b'data: {"id":"x","choices":[%s]}\n\n' % json.dumps({"index": 0, **c}).encode()),
    st.integers(0, 9).map(lambda n: b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d}}\n\n' % n))


def per_event(raw):
    """The record the per-event paths give (the plain path refused)."""
    saved = parse.PlainReader

    class Refusing(PlainReader):
        def feed(self, reads):
            raise NotPlain

    parse.PlainReader = Refusing
    try:
        return parse_exchange(raw, REQ, 0, "measure")
    finally:
        parse.PlainReader = saved


def took_plain(raw) -> bool:
    try:
        list(parse._plain_steps(raw, parse._State(), 3))
    except NotPlain:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(st.lists(PLAIN_LINE, max_size=8), st.sampled_from([b"data: [DONE]\n\n", b"data: [DONE]\n\nxx", b"", b"data: {}"]),
       st.lists(st.integers(0, 4000), max_size=6), st.booleans())
def test_plain_and_per_event_paths_agree(lines, tail, cuts, failed):
    raw = exchange(b"".join(lines) + tail, cuts, "reset" if failed else None)
    assert parse_exchange(raw, REQ, 0, "measure") == per_event(raw) == strict(raw)
    saved, parse.PLAIN_STEP = parse.PLAIN_STEP, 1
    try:                                  # the plain path fed one read at a time
        assert list(parse_steps(raw, REQ, 0, "measure", 1))[-1] == strict(raw)
    finally:
        parse.PLAIN_STEP = saved


@pytest.mark.parametrize("kwargs", [{}, {"chat": False}])
def test_common_shapes_take_the_plain_path_at_every_split(kwargs):
    body = common(**kwargs)
    for cut in range(len(body) + 1):
        for raw in (exchange(body, [cut]), exchange(body, [cut, cut + 7, cut + 40])):
            assert took_plain(raw), cut
            rec = parse_exchange(raw, REQ, 0, "measure")
            assert rec.ok and rec.output_tokens == 4 and rec == per_event(raw)


def test_per_chunk_usage_and_token_ids_are_left_to_the_per_event_path():
    assert not took_plain(exchange(common(usage_each=True), []))
    ids = b'data: {"choices":[{"index":0,"text":"a","token_ids":[5]}]}\n\ndata: [DONE]\n\n'
    assert not took_plain(exchange(ids, []))


KIND = st.sampled_from(["text", "zero", "finish"])


@settings(max_examples=500, deadline=None)
@given(st.lists(KIND, max_size=12), st.one_of(st.none(), st.integers(0, 30), st.just(True), st.just(-1)))
def test_resolve_plain_counts_as_resolve(kinds, total):
    chunks = [Chunk(t_ns=i, guess=int(k == "text"), all_ids=k != "text", mark=None, content=k == "text",
                    reasoning_only=False, empty_finish=k == "finish", empty_only=k != "text")
              for i, k in enumerate(kinds)]
    usage = None if total is None else {"completion_tokens": total}
    trailing = chunks[-1].t_ns if chunks and kinds[-1] == "finish" else None
    got = resolve_plain([c.t_ns for c in chunks if c.guess], usage, trailing)
    assert got == resolve(chunks, usage)


DONE_READ = b"data: [DONE]\n\n"


def with_done(raw):
    """The same exchange with `data: [DONE]` as one more read at its end."""
    return replace(raw, chunks=[*raw.chunks, (raw.end_ns, DONE_READ)])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(PLAIN_LINE, LINE), max_size=8), st.lists(st.integers(0, 4000), max_size=6))
def test_a_done_adds_nothing_after_a_finish_reason_on_every_path(lines, cuts):
    """A body that ends cleanly without `[DONE]` is the record the same body with `[DONE]` gives, when a
    finish_reason came (a complete request, ending at the body's end); without one it was cut short
    (`reset`, unless it already failed otherwise). The three paths agree on both."""
    bare = exchange(b"".join(lines), cuts)
    done = parse_exchange(with_done(bare), REQ, 0, "measure")
    got = parse_exchange(bare, REQ, 0, "measure")
    assert got == per_event(bare) == strict(bare)
    if done.finish_reason is not None:
        assert got == done
    else:
        assert got.error_kind == (done.error_kind if done.error_kind not in (None, "early_done") else "reset")


def test_common_shape_without_done_is_complete_on_the_plain_path_at_every_split():
    body = common().removesuffix(DONE_READ)          # the last chunk carries finish_reason "length"
    for cut in range(len(body) + 1):
        raw = exchange(body, [cut])
        assert took_plain(raw), cut
        rec = parse_exchange(raw, REQ, 0, "measure")
        assert rec.ok and rec.output_tokens == 4 and rec.end_ns == raw.end_ns
        assert rec == per_event(raw) == strict(raw)
    unfinished = exchange(common(chat=False).removesuffix(DONE_READ), [])     # no finish_reason anywhere
    assert parse_exchange(unfinished, REQ, 0, "measure").error_kind == "reset" == strict(unfinished).error_kind
