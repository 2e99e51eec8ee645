"""Reading a server's OTLP trace exports (monitor/otlp.py): what the OpenTelemetry messages carry comes back as the
kept spans, whatever else a payload holds is counted, any byte string that is not an export raises PayloadError
(never anything else), and a trace's spans read as vLLM's and SGLang's timings of the request."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from tokenbench.monitor.otlp import QUEUE_SLICE, TTFT, PayloadError, Span, decode, timing_of

S = 1_000_000_000
LATENCIES = ("time_to_first_token", "e2e", "time_in_queue", "time_in_model_prefill", "time_in_model_decode")


def span(trace: bytes, name: str = "llm_request", start: int = 0, end: int = 0, **attrs: float | str | int):
    def value(v):
        if isinstance(v, str):
            return AnyValue(string_value=v)
        return AnyValue(int_value=v) if isinstance(v, int) else AnyValue(double_value=v)
    kv = [KeyValue(key=k.replace("__", "."), value=value(v)) for k, v in attrs.items()]
    return ProtoSpan(trace_id=trace, span_id=b"\x01" * 8, name=name, start_time_unix_nano=start,
                     end_time_unix_nano=end, attributes=kv)


def export(*spans) -> bytes:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])]
                                     ).SerializeToString()


def gen_ai(**seconds: float) -> dict:
    return {f"gen_ai__latency__{k}": v for k, v in seconds.items()}


TRACES = st.binary(min_size=16, max_size=16).filter(any)
SECONDS = st.floats(0, 1000, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(TRACES, st.integers(0, 2**63), st.lists(SECONDS, min_size=5, max_size=5),
                          st.booleans()), max_size=12))
def test_request_spans_and_queue_slices_are_kept_the_rest_counted(items):
    spans, kept, other = [], 0, 0
    for trace, start, secs, is_request in items:
        if is_request:
            spans.append(span(trace, start=start, end=start + 1, **gen_ai(**dict(zip(LATENCIES, secs, strict=True))),
                              gen_ai__request__id="cmpl-1", http__route="/v1/completions"))
            kept += 1
        else:
            spans.append(span(trace, "model_loading", start, start + 5))
            other += 1
    got = decode(export(*spans))
    assert (len(got.spans), got.other) == (kept, other)
    requests = [i for i in items if i[3]]
    for s, (trace, start, secs, _) in zip(got.spans, requests, strict=True):
        assert (s.trace_id, s.start_ns, s.attributes[TTFT]) == (trace.hex(), start, secs[0])
        assert s.attributes["gen_ai.request.id"] == "cmpl-1" and "http.route" not in s.attributes


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=512))
def test_any_bytes_decode_or_raise_payload_error(body):
    try:
        got = decode(body)
    except PayloadError:
        return
    assert all(len(s.trace_id) == 32 for s in got.spans)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_damaged_export_decodes_or_raises_payload_error(data):
    body = bytearray(export(span(b"\x07" * 16, start=5, end=9, **gen_ai(time_to_first_token=0.1, e2e=0.2)),
                            span(b"\x08" * 16, QUEUE_SLICE, 1, 3)))
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    try:
        decode(bytes(body[:cut]))
    except PayloadError:
        pass


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (to build what the message classes refuse to: a hostile payload)."""
    size, n = b"", len(payload)
    while True:
        size += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            break
    return bytes([number << 3 | 2]) + size + payload


def test_deeply_nested_values_and_a_zero_trace_id_are_refused_or_dropped():
    value = AnyValue(string_value="x").SerializeToString()
    for _ in range(500):          # AnyValue.kvlist_value (6) -> KeyValueList.values (1) -> KeyValue.value (2)
        value = _field(6, _field(1, _field(2, value)))
    deep = _field(9, _field(2, value))   # a span's attributes (9): a KeyValue whose value (2) it is
    body = _field(1, _field(2, _field(2, _field(1, b"\x01" * 16) + deep)))
    with pytest.raises(PayloadError):
        decode(body)
    got = decode(export(span(b"\x00" * 16, **gen_ai(time_to_first_token=0.1)),
                        span(b"\x01" * 8, **gen_ai(time_to_first_token=0.1))))
    assert (got.spans, got.other) == ([], 2)


def test_vllms_span_reads_as_its_attributes():
    [root] = decode(export(span(b"\x01" * 16, start=100 * S, end=101 * S, **gen_ai(
        time_to_first_token=0.25, e2e=0.75, time_in_queue=0.05, time_in_model_prefill=0.15,
        time_in_model_decode=0.5), gen_ai__request__id="cmpl-abc-0"))).spans
    t = timing_of([root])
    assert t is not None
    assert (t.arrival_ns, t.ttft_ns, t.e2e_ns, t.queue_ns, t.prefill_ns, t.decode_ns, t.request_id) == (
        100 * S, S // 4, 3 * S // 4, S // 20, 3 * S // 20, S // 2, "cmpl-abc-0")


def test_sglangs_queue_comes_from_its_waiting_slices():
    root = Span("ab" * 16, "Req 1a2b3c4d", 10 * S, 12 * S, {TTFT: 0.5, "gen_ai.latency.e2e": 2.0,
                                                            "gen_ai.latency.time_in_model_prefill": 0.45, "rid": "1a2b"})
    waits = [Span("ab" * 16, QUEUE_SLICE, 10 * S + S // 10, 10 * S + S // 5),
             Span("ab" * 16, "prefill_forward", 10 * S + S // 5, 10 * S + S // 2)]
    t = timing_of([*waits, root])
    assert t is not None and t.queue_ns == S // 10 and t.prefill_ns == 3 * S // 10 and t.request_id == "1a2b"


@pytest.mark.parametrize("ttft", [float("nan"), -1.0, float("inf"), 1e9, "soon"])
def test_a_span_whose_ttft_is_not_a_duration_gives_no_timing(ttft):
    assert timing_of([Span("ab" * 16, "llm_request", 0, 1, {TTFT: ttft})]) is None


def test_a_trace_without_its_request_span_gives_no_timing():
    assert timing_of([Span("ab" * 16, QUEUE_SLICE, 0, 5)]) is None


@settings(max_examples=60, deadline=None)
@given(st.permutations(range(3)), st.integers(-10 * S, 10 * S), st.booleans())
def test_a_gateways_genai_span_on_the_same_trace_does_not_stand_for_the_engines(order, skew, gateway_tells_prefill):
    """A proxy or gateway in front of the engine may export its own span with the GenAI latencies on the trace the
    request carried (its clock skewed from the engine's): the engine's span (the one that tells the queue or the
    prefill, the shortest: it lies inside the gateway's) gives the timings, in any order of arrival, and a
    duplicate of it reads the same."""
    engine = Span("ab" * 16, "llm_request", 10 * S, 11 * S, {TTFT: 0.25, "gen_ai.latency.e2e": 1.0,
                                                             "gen_ai.latency.time_in_queue": 0.05,
                                                             "gen_ai.latency.time_in_model_prefill": 0.15})
    outer = {TTFT: 0.3, "gen_ai.latency.e2e": 1.2} | ({"gen_ai.latency.time_in_model_prefill": 0.28}
                                                      if gateway_tells_prefill else {})
    gateway = Span("ab" * 16, "litellm_request", 10 * S - S // 20 + skew, 11 * S + S // 5 + skew, outer)
    spans = [engine, gateway, engine]
    t = timing_of([spans[i] for i in order])
    assert t is not None and (t.arrival_ns, t.ttft_ns, t.queue_ns) == (10 * S, S // 4, S // 20)
