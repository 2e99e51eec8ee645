"""A server's OpenTelemetry trace exports, read: an OTLP `ExportTraceServiceRequest` (the body of an HTTP/protobuf
POST to /v1/traces, or of a gRPC TraceService/Export call) decoded with the OpenTelemetry project's own message
definitions (`opentelemetry-proto`, parsed by protobuf's C implementation), then a trace's spans read as the
server's timings of one request (`timing_of`). Pure: bytes in, typed spans out; a payload that does not decode
raises PayloadError (the receiver counts and drops it).

Only what joining uses is kept: request spans (they carry the OpenTelemetry GenAI latency attributes: vLLM's
`llm_request`, SGLang's root `Req` span, the reference server's) and SGLang's `prefill_waiting` slices (its
queue); every other span is counted and dropped. Attribute names are the GenAI semantic conventions', not an
engine's; formulas: docs/metrics.md, "Where the time went"."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:       # the receiver's process imports this module with no more than receiving needs
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    from tokenbench.metrics.server import ServerTiming

TTFT = "gen_ai.latency.time_to_first_token"       # marks a request span
E2E = "gen_ai.latency.e2e"
QUEUE = "gen_ai.latency.time_in_queue"
PREFILL = "gen_ai.latency.time_in_model_prefill"
DECODE = "gen_ai.latency.time_in_model_decode"
REQUEST_IDS = ("gen_ai.request.id", "rid")
KEPT = frozenset({TTFT, E2E, QUEUE, PREFILL, DECODE, *REQUEST_IDS})
QUEUE_SLICE = "prefill_waiting"                   # SGLang: a request's wait in the scheduler's queue
MAX_TEXT = 256                                    # characters kept of a string attribute
MAX_SECONDS = 1e6                                 # a latency attribute beyond this is not one


class PayloadError(Exception):
    """An export payload that cannot be decoded (the message says why)."""


@dataclass(frozen=True, slots=True)
class Span:
    """One kept span: its trace id (32 hex digits), name, start and end (Unix ns, the server's clock) and the
    attributes joining reads."""

    trace_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, float | str] = field(default_factory=dict)

    @property
    def is_request(self) -> bool:
        return TTFT in self.attributes


@dataclass
class Decoded:
    spans: list[Span] = field(default_factory=list)     # request spans and queue slices
    other: int = 0                                      # spans of any other kind (or with no valid trace id)


def _value(v: AnyValue) -> float | str | None:
    kind = v.WhichOneof("value")
    if kind == "double_value":
        return v.double_value
    if kind == "int_value":
        return float(v.int_value)
    if kind == "string_value":
        return v.string_value[:MAX_TEXT]
    return None


def _kept(span) -> Span | None:
    attributes = {a.key: x for a in span.attributes if a.key in KEPT and (x := _value(a.value)) is not None}
    if TTFT not in attributes and span.name != QUEUE_SLICE:
        return None
    if len(span.trace_id) != 16 or not any(span.trace_id):
        return None
    return Span(span.trace_id.hex(), span.name[:MAX_TEXT], span.start_time_unix_nano, span.end_time_unix_nano,
                attributes)


def decode(body: bytes) -> Decoded:
    """The kept spans of one export payload (protobuf); PayloadError when it is not one."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    try:
        message = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise PayloadError(f"not an OTLP ExportTraceServiceRequest: {exc}") from None
    out = Decoded()
    for resource in message.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                kept = _kept(span)
                if kept is None:
                    out.other += 1
                else:
                    out.spans.append(kept)
    return out


def _ns(value: float | str | None) -> int | None:
    """A latency attribute (seconds) in ns; None when absent or not a duration."""
    if not isinstance(value, float) or not math.isfinite(value) or not 0 <= value <= MAX_SECONDS:
        return None
    return round(value * 1e9)


def _request_id(attributes: dict[str, float | str]) -> str | None:
    found = next((attributes[k] for k in REQUEST_IDS if k in attributes), None)
    return found if isinstance(found, str) else None


def _engine_span(spans: list[Span]) -> Span | None:
    """The trace's request span that is the engine's: of those with a usable TTFT, one that tells the queue or the
    prefill, else the shortest (a gateway or proxy that exports the GenAI attributes too holds the engine's span
    inside its own; durations need no common clock), then the latest start; duplicates read the same."""
    found = [s for s in spans if s.is_request and _ns(s.attributes.get(TTFT)) is not None]
    return min(found, key=lambda s: (QUEUE not in s.attributes and PREFILL not in s.attributes,
                                     s.end_ns - s.start_ns, -s.start_ns), default=None)


def timing_of(spans: list[Span]) -> ServerTiming | None:
    """The server's timings of the request one trace's spans describe: its engine's request span's attributes
    (`_engine_span`), the queue from the `prefill_waiting` slices where the trace has them (prefill then runs from
    the last one's end to the first token); None without a request span with a usable TTFT."""
    from tokenbench.metrics.server import ServerTiming
    root = _engine_span(spans)
    ttft = _ns(root.attributes.get(TTFT)) if root is not None else None
    if root is None or ttft is None:
        return None
    a = root.attributes
    e2e = _ns(a.get(E2E))
    waits = [s for s in spans if s.name == QUEUE_SLICE and s.end_ns >= s.start_ns]
    if waits:
        queue: int | None = sum(s.end_ns - s.start_ns for s in waits)
        prefill: int | None = root.start_ns + ttft - max(s.end_ns for s in waits)
    else:
        queue, prefill = _ns(a.get(QUEUE)), _ns(a.get(PREFILL))
    return ServerTiming(arrival_ns=root.start_ns, ttft_ns=ttft,
                        e2e_ns=e2e if e2e is not None else max(ttft, root.end_ns - root.start_ns), queue_ns=queue,
                        prefill_ns=prefill, decode_ns=_ns(a.get(DECODE)), request_id=_request_id(a))
