"""Bad input from a server or a user: the SSE decoder, the HTTP framer, the SSE -> record parser and the
spec loader never raise anything but a typed error, and never hang, on any bytes or YAML.

The monitor parsers (npu-smi, nvidia-smi, Prometheus) have the same property in
tests/monitor/test_properties.py.
"""

from __future__ import annotations

import json
import math

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tokenbench.client.framing import FramingError, ResponseFramer
from tokenbench.client.parse import parse_exchange
from tokenbench.client.records import ERROR_KINDS, RawExchange, RequestRecord
from tokenbench.client.request import PreparedRequest
from tokenbench.client.sse import SSEDecoder, SSEEvent
from tokenbench.errors import SpecError, TokenbenchError
from tokenbench.metrics.summary import summarize
from tokenbench.spec.bench import Load
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.loader import load_file, load_model, parse_yaml
from tokenbench.spec.study import StudySpec
from tokenbench.store.records import to_dict

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    """`data` cut at the given offsets (taken modulo its length), in order."""
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


CUTS = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)

# ---------------------------------------------------------------------------------------------- SSE

SSE_BYTES = st.one_of(
    st.binary(max_size=400),
    st.lists(st.sampled_from([b"data: ", b"data:", b"event: x", b"id: 1", b"retry: 5", b": ping", b"\n", b"\r\n",
                              b"\r", b"{", b"}", b"[DONE]", b"\xff", b"\xc3", b"\xa9", b"junk", b":", b" "]),
             max_size=60).map(b"".join),
)


def decode(parts: list[bytes]) -> list[SSEEvent]:
    dec = SSEDecoder()
    events = [e for p in parts for e in dec.feed(p)]
    return events + dec.flush()


@PROPERTY
@given(SSE_BYTES, CUTS)
def test_sse_decoder_any_bytes_any_split(data, cuts):
    """Any bytes, cut anywhere: events only (never an exception), each either data or a named malformed
    line, and the same events as when the bytes arrive in one piece."""
    events = decode(split(data, cuts))
    assert events == decode([data])
    for ev in events:
        assert isinstance(ev, SSEEvent)
        assert (ev.data is None) != (ev.malformed is None)
        assert isinstance(ev.data if ev.data is not None else ev.malformed, str)


PAYLOAD_TEXT = st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)),
                       max_size=40)


@PROPERTY
@given(st.lists(PAYLOAD_TEXT, max_size=10), CUTS, st.sampled_from([b"\n\n", b"\r\n\r\n"]))
def test_sse_decoder_round_trips_data_events(payloads, cuts, sep):
    wire = b"".join(b"data: " + p.encode() + sep for p in payloads)
    assert [e.data for e in decode(split(wire, cuts))] == [p for p in payloads]


# ---------------------------------------------------------------------------------------- HTTP framer

def frame_all(parts: list[bytes], eof: bool = True) -> tuple[bytes, ResponseFramer]:
    framer, body = ResponseFramer(), b""
    for p in parts:
        body += framer.feed(p)
    if eof:
        framer.eof()
    return body, framer


HEAD_LINES = st.lists(st.sampled_from([
    b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK", b"HTTP/1.1 500 Oops", b"HTTP/1.1 \xb2\xb2\xb2 OK", b"HTTP/1.1",
    b"Content-Length: 5", b"Content-Length: -1", b"Content-Length: abc", b"Content-Length: \xb9",
    b"Content-Length: 99999999999999999999", b"Transfer-Encoding: chunked", b"Connection: close",
    b"junk", b"", b"5", b"-5", b"0x5", b"+5", b"5_0", b"ffffffff", b"0", b"abc;ext=1", b"hello",
]), max_size=14)


@PROPERTY
@given(st.one_of(st.binary(max_size=300), HEAD_LINES.map(b"\r\n".join),
                 st.tuples(HEAD_LINES.map(b"\r\n".join), st.binary(max_size=40)).map(lambda t: t[0] + t[1])),
       CUTS)
@example(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nab", [])        # used to loop forever
@example(b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n", [])                    # used to raise ValueError
@example(b"HTTP/1.1 \xb2\xb2\xb2 OK\r\n\r\n", [])                                    # '²'.isdigit() is True
@example(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nabc", [])                   # used to never complete
@pytest.mark.timeout(120)
def test_framer_any_bytes_framing_error_or_body(data, cuts):
    """Any bytes, cut anywhere: a body or FramingError (which the transport records as a failed request),
    never another exception or a hang; the body never exceeds the bytes received."""
    try:
        body, framer = frame_all(split(data, cuts))
    except FramingError as exc:
        assert str(exc)
        return
    assert len(body) <= len(data)
    if framer.head_done:
        assert isinstance(framer.status, int) and 0 <= framer.status
        if "content-length" in framer.headers and not framer._chunked:
            assert len(body) <= int(framer.headers["content-length"])


def chunked(body: bytes, sizes: list[int]) -> bytes:
    out, i = b"", 0
    for n in sizes:
        piece = body[i: i + n]
        i += len(piece)
        if piece:
            out += f"{len(piece):x};ext=1\r\n".encode() + piece + b"\r\n"
    if i < len(body):
        out += f"{len(body) - i:X}\r\n".encode() + body[i:] + b"\r\n"
    return out + b"0\r\nTrailer: x\r\n\r\n"


@PROPERTY
@given(st.binary(max_size=300), st.lists(st.integers(min_value=1, max_value=64), max_size=10), CUTS,
       st.sampled_from(["chunked", "length", "close"]))
def test_framer_reassembles_any_valid_response_at_any_split(body, sizes, cuts, kind):
    head = {"chunked": b"Transfer-Encoding: chunked\r\n", "length": f"Content-Length: {len(body)}\r\n".encode(),
            "close": b"Connection: close\r\n"}[kind]
    wire = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + head + b"\r\n"
    wire += chunked(body, sizes) if kind == "chunked" else body
    got, framer = frame_all(split(wire, cuts), eof=kind == "close")
    assert got == body and framer.complete and framer.status == 200
    assert framer.keep_alive == (kind != "close")


# ---------------------------------------------------------------------------------- SSE -> record

REQ = PreparedRequest(url="http://x/v1/completions", body=b"{}", headers={}, input_len=4, output_len=3,
                      expected_prompt_tokens=4)

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**70), st.floats(allow_nan=False),
                      st.text(max_size=8))
JSON = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                    max_leaves=12)
CHOICE = st.fixed_dictionaries({}, optional={
    "text": JSON, "delta": st.one_of(JSON, st.fixed_dictionaries({}, optional={"content": JSON,
                                                                                 "reasoning_content": JSON,
                                                                                 "role": JSON})),
    "token_ids": st.one_of(JSON, st.lists(st.integers(0, 100), max_size=4)),
    "finish_reason": JSON, "index": JSON})
USAGE = st.one_of(JSON, st.fixed_dictionaries({}, optional={
    "prompt_tokens": JSON, "completion_tokens": JSON, "prompt_tokens_details": st.one_of(
        JSON, st.fixed_dictionaries({}, optional={"cached_tokens": JSON}))}))
CHUNK = st.one_of(
    JSON,
    st.fixed_dictionaries({}, optional={"choices": st.one_of(JSON, st.lists(CHOICE, max_size=3)),
                                        "usage": USAGE, "error": JSON}),
)


def sse_line(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def exchange(parts: list[bytes], status: int | None = 200, kind: str | None = None) -> RawExchange:
    return RawExchange(intended_ns=0, sent_ns=10, headers_ns=20, end_ns=10_000 + len(parts), status=status,
                       chunks=[(100 + i, p) for i, p in enumerate(parts)], error_kind=kind,
                       error_detail="transport said so" if kind else "")


def check_record(rec: RequestRecord) -> None:
    """A record the store, the summary and the JSON writer accept, whatever the server sent."""
    assert rec.error_kind is None or rec.error_kind in ERROR_KINDS, rec.error_kind
    assert rec.error_kind is None or rec.error_detail
    for name in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        value = getattr(rec, name)
        assert value is None or (isinstance(value, int) and not isinstance(value, bool)), (name, value)
    assert rec.finish_reason is None or isinstance(rec.finish_reason, str)
    assert isinstance(rec.text, str) and isinstance(rec.output_tokens, int)
    assert len(rec.token_times_ns) == len(rec.token_counts)
    assert all(isinstance(c, int) and c > 0 for c in rec.token_counts)
    json.dumps(to_dict(rec), allow_nan=False)
    summary = summarize([rec], Load(concurrency=1, num_prompts=1), REQ.input_len, REQ.output_len)
    assert summary.completed + summary.failed == 1
    assert all(not isinstance(v, float) or not math.isinf(v) for v in summary.to_dict().values())


@PROPERTY
@given(st.lists(CHUNK, max_size=6), st.booleans(), CUTS)
@example([{"choices": [1]}], True, [])
@example([{"choices": [{"token_ids": 5}]}], True, [])
@example([{"choices": [{"delta": {"content": 5}}]}], True, [])
@example([{"usage": {"completion_tokens": "3"}}, {"choices": [{"text": "a"}], "usage": {"completion_tokens": 4}}],
         True, [])
@example([{"choices": [{"text": "a", "finish_reason": {"x": 1}}]}], True, [])
@example([{"usage": {"prompt_tokens": "4", "completion_tokens": 3}}], True, [])
def test_parse_any_json_chunks_gives_a_typed_record(chunks, done, cuts):
    """Any JSON in the data lines (wrong types included), cut anywhere: a record with a typed
    error_kind (or none), never an exception."""
    wire = b"".join(sse_line(c) for c in chunks) + (b"data: [DONE]\n\n" if done else b"")
    check_record(parse_exchange(exchange(split(wire, cuts)), REQ, 0, "measure"))


@PROPERTY
@given(st.lists(st.one_of(SSE_BYTES, st.binary(max_size=50)), max_size=6),
       st.sampled_from([200, 200, 404, 500, None]), st.sampled_from([None, *ERROR_KINDS]))
@example([b'data: ' + b'[' * 100_000 + b'\n\n'], 200, None)                          # too deep for json
def test_parse_any_bytes_gives_a_typed_record(parts, status, kind):
    check_record(parse_exchange(exchange(parts, status, kind), REQ, 0, "measure"))


def reference_like(n_tokens: int, usage: bool) -> bytes:
    body = b""
    for i in range(n_tokens):
        last = i == n_tokens - 1
        chunk = {"choices": [{"index": 0, "text": f" w{i + 3}", "token_ids": [i + 3],
                              "finish_reason": "length" if last else None}]}
        if usage and last:
            chunk["usage"] = {"prompt_tokens": 4, "completion_tokens": n_tokens}
        body += sse_line(chunk)
    return body + b"data: [DONE]\n\n"


@PROPERTY
@given(st.booleans(), CUTS)
def test_parse_valid_stream_is_split_invariant(usage, cuts):
    """A well-formed stream gives the same tokens and counts however the reads split it."""
    wire = reference_like(3, usage)
    whole = parse_exchange(exchange([wire]), REQ, 0, "measure")
    rec = parse_exchange(exchange(split(wire, cuts)), REQ, 0, "measure")
    assert whole.ok and rec.ok and not rec.length_error
    assert sum(rec.token_counts) == rec.output_tokens == 3
    assert rec.usage_source == ("server" if usage else "chunks")
    assert rec.text == whole.text == " w3 w4 w5"


# -------------------------------------------------------------------------------------- spec loader

YAML_TEXT = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=":-[]{},#&*!|>'\"%@` \n\tabc012", max_size=120),
    JSON.map(lambda v: yaml.safe_dump(v, default_flow_style=None)),
)
KNOWN_KEYS = ["name", "target", "pairs", "concurrency", "rates", "vary", "repeats", "requests", "slo", "api",
              "engine", "model", "parallelism", "args", "env", "command", "readiness", "container", "when",
              "base_url", "profile", "path", "bundled", "tp", "slots", "ctx", "image", "devices", "port", "host"]
SPEC_LIKE = st.recursive(
    JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                       st.dictionaries(st.sampled_from(KNOWN_KEYS), inner, max_size=5)),
    max_leaves=20).map(lambda v: yaml.safe_dump(v, default_flow_style=None))


def load_or_spec_error(model, text: str):
    try:
        data, lines = parse_yaml(text, "spec.yaml")
        return load_model(model, data, "spec.yaml", lines)
    except SpecError as exc:
        assert exc.message.startswith("spec.yaml") and exc.hint and "\n" not in exc.one_line(), exc.one_line()
        return None


@PROPERTY
@given(st.one_of(YAML_TEXT, SPEC_LIKE), st.sampled_from([StudySpec, Profile]))
@example("a: [", StudySpec)
@example("? [a, b]\n: c\n", StudySpec)
@example("target: {base_url: x}\npairs: [[1, 2]]\nconcurrency: [0]\n", StudySpec)
@example("name: x\nengine: llamacpp\nmodel: {path: m}\nenv: {'A=B': 1}\n", Profile)
@example("a: " + "[" * 3000, StudySpec)                       # used to raise RecursionError
@example("target: &t {base_url: x, profile: *t}\n", StudySpec)  # an alias inside its own anchor: same
@example("\x00", Profile)                                       # used to give a two-line message
def test_spec_loader_any_yaml_gives_a_model_or_a_spec_error(text, model):
    """Any text as a sweep spec or a profile: a validated model or a SpecError naming the file (and the
    line where known) with a fix, never another exception."""
    load_or_spec_error(model, text)


def test_spec_error_names_file_line_and_fix(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("target:\n  base_url: http://x\npairs: [[8, 8]]\nconcurrency: [1]\nbogus: 1\n")
    with pytest.raises(SpecError) as exc:
        load_file(StudySpec, path)
    assert exc.value.message == f"{path}:5: unknown key 'bogus'" and "spelling" in exc.value.hint
    assert isinstance(exc.value, TokenbenchError) and exc.value.exit_code == 2


OVERRIDE = st.one_of(st.text(max_size=20),
                     st.tuples(st.sampled_from(["name", "pairs", "target.base_url", "slo.ttft", "a.b.c", ".", ""]),
                               st.one_of(st.text(max_size=12), YAML_TEXT)).map("=".join))


@PROPERTY
@given(st.sampled_from(["target: {base_url: 'http://x'}\npairs: [[8, 8]]\nconcurrency: [1]\n", "- 1\n", "", "7"]),
       st.lists(OVERRIDE, max_size=4))
@example("- 1\n", ["a=1"])                  # used to raise TypeError (a list has no keys)
@example("", ["name=\x1b"])                 # used to raise yaml's ReaderError
@example("", ["name=["])
def test_spec_overrides_any_text_gives_a_model_or_a_spec_error(tmp_path_factory, text, overrides):
    """`--set key=value` with any text, on any spec file: a model or a one-line SpecError."""
    path = tmp_path_factory.mktemp("spec") / "sweep.yaml"
    path.write_text(text)
    try:
        load_file(StudySpec, path, overrides)
    except SpecError as exc:
        line = exc.one_line()
        for item in overrides:      # the message may quote the user's own text, newlines and all
            line = line.replace(item, "")
        assert exc.hint and "\n" not in line, exc.one_line()
