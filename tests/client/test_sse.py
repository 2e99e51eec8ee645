from hypothesis import given
from hypothesis import strategies as st

from tokenbench.client.sse import SSEDecoder

TRANSCRIPT = (
    b'data: {"choices":[{"text":"h\xc3\xa9llo"}]}\n\n'
    b": keep-alive comment\n\n"
    b'data: {"choices":[{"text":" w"}]}\r\n\r\n'
    b"event: message\nid: 7\n"
    b'data: {"a":\ndata: 1}\n\n'
    b"data: [DONE]\n\n"
)
EXPECTED = ['{"choices":[{"text":"h\u00e9llo"}]}', '{"choices":[{"text":" w"}]}', '{"a":\n1}', "[DONE]"]


def decode_all(parts):
    dec = SSEDecoder()
    events = []
    for p in parts:
        events += dec.feed(p)
    events += dec.flush()
    return events


def test_whole_transcript():
    assert [e.data for e in decode_all([TRANSCRIPT])] == EXPECTED


def test_split_at_every_byte_offset():
    for i in range(len(TRANSCRIPT) + 1):
        events = decode_all([TRANSCRIPT[:i], TRANSCRIPT[i:]])
        assert [e.data for e in events] == EXPECTED, i


def test_split_into_single_bytes():
    assert [e.data for e in decode_all([bytes([b]) for b in TRANSCRIPT])] == EXPECTED


def test_trailing_event_without_blank_line_is_flushed():
    assert [e.data for e in decode_all([b"data: x"])] == ["x"]


def test_malformed_line_is_reported_not_raised():
    events = decode_all([b"garbage line\n\n", b"data: ok\n\n"])
    assert events[0].malformed == "garbage line" and events[0].data is None
    assert events[1].data == "ok"


def test_invalid_utf8_is_malformed():
    events = decode_all([b"data: \xff\xfe\n\n"])
    assert events[0].malformed is not None


@given(st.binary(max_size=300), st.integers(min_value=0, max_value=300))
def test_never_raises_on_arbitrary_bytes(blob, cut):
    decode_all([blob[:cut], blob[cut:]])
