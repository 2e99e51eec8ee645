"""The reference server's own timings of each request, as a real engine tells them: one vLLM-style `llm_request`
OpenTelemetry span per answered request that carried a W3C `traceparent` (exported as OTLP, HTTP/protobuf or
gRPC, in batches from a thread of the server's own), and the request-time histograms of its /metrics.

The times are the ones the server controls, so a client's reading of them can be checked exactly: the queue is
the wait the admission gate (and, under the load model, the prefill FIFO) imposed, the prefill runs from the
prefill's start to the first chunk's deadline, the decode from the first chunk's deadline to the last one's
(docs/reference-server.md, "Spans"). The span's clock is the server's wall clock (`time.time_ns` at start +
perf_counter_ns since), shifted by `span_clock_offset_ms` to test a client's clock-offset estimate."""

from __future__ import annotations

import http.client
import os
import queue
import threading
import time
import urllib.parse
from dataclasses import dataclass

from tokenbench.testing.config import ReferenceConfig

ROLES = ("queue", "prefill", "decode", "inference", "ttft", "e2e")
BATCH = 512                 # spans per export at most (the OpenTelemetry SDK's default batch)
INTERVAL_S = 0.1            # a batch leaves at least this often while spans wait (as tokenbench deploys vLLM)


@dataclass(frozen=True, slots=True)
class RequestTimes:
    """One answered request's phases (ns, perf_counter_ns): arrival and the phase lengths."""

    arrival_ns: int
    queue: int
    prefill: int
    decode: int
    ttft: int
    e2e: int

    @property
    def inference(self) -> int:
        return self.prefill + self.decode

    def seconds(self, role: str) -> float:
        return getattr(self, role) / 1e9


def times_of(rec: dict) -> RequestTimes | None:
    """The phases of a send-log record whose answer was written in full; None for one that was not."""
    due, admitted = rec.get("due_ns"), rec.get("admitted_ns")
    if not due or admitted is None or rec.get("outcome") != "ok":
        return None
    start = rec["prefill_ns"][0] if rec.get("prefill_ns") else admitted
    recv = rec["recv_ns"]
    return RequestTimes(recv, start - recv, due[0] - start, due[-1] - due[0], due[0] - recv, due[-1] - recv)


@dataclass(slots=True)
class Histograms:
    """Σ seconds and counts per role: what /metrics shows as vLLM's request-time histograms."""

    count: int = 0
    sums: dict[str, float] | None = None

    def add(self, t: RequestTimes) -> None:
        sums = self.sums if self.sums is not None else {r: 0.0 for r in ROLES}
        for role in ROLES:
            sums[role] += t.seconds(role)
        self.sums, self.count = sums, self.count + 1


def parent_of(header: str | None) -> tuple[bytes, bytes] | None:
    """(trace id, parent span id) of a W3C traceparent `00-<32 hex>-<16 hex>-<2 hex>`; None when it is not one."""
    parts = (header or "").strip().split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        return bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
    except ValueError:
        return None


def _attributes(rec: dict, t: RequestTimes) -> list:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    seconds = {"time_to_first_token": t.ttft, "e2e": t.e2e, "time_in_queue": t.queue,
               "time_in_model_prefill": t.prefill, "time_in_model_decode": t.decode,
               "time_in_model_inference": t.inference}
    out = [KeyValue(key=f"gen_ai.latency.{k}", value=AnyValue(double_value=v / 1e9)) for k, v in seconds.items()]
    out += [KeyValue(key="gen_ai.usage.prompt_tokens", value=AnyValue(int_value=rec["prompt_tokens"])),
            KeyValue(key="gen_ai.usage.completion_tokens", value=AnyValue(int_value=rec["completion_tokens"])),
            KeyValue(key="gen_ai.request.id", value=AnyValue(string_value=rec["id"]))]
    return out


class SpanExporter:
    """Spans of finished requests, exported from a thread in batches (never from the server's event loop)."""

    def __init__(self, cfg: ReferenceConfig) -> None:
        assert cfg.otlp_endpoint is not None
        self.endpoint, self.grpc = cfg.otlp_endpoint, cfg.otlp_protocol == "grpc"
        self.shift = time.time_ns() - time.perf_counter_ns() + round(cfg.span_clock_offset_ms * 1e6)
        self.waiting: queue.SimpleQueue = queue.SimpleQueue()
        self.failures = 0
        self.conn: http.client.HTTPConnection | None = None
        self.thread = threading.Thread(target=self._run, name="reference-spans", daemon=True)
        self.thread.start()

    def add(self, rec: dict, t: RequestTimes) -> None:
        ids = parent_of(rec.get("traceparent"))
        if ids is not None:
            self.waiting.put((rec, t, ids))

    def close(self) -> None:
        self.waiting.put(None)
        self.thread.join(timeout=10)

    def _run(self) -> None:
        send = self._grpc_sender() if self.grpc else self._post
        while True:
            batch, done = self._batch()
            if batch:
                try:
                    send(self._request(batch).SerializeToString())
                except Exception:            # an exporter that cannot reach its collector goes on (as the SDK's)
                    self.failures += 1
            if done:
                return

    def _batch(self) -> tuple[list, bool]:
        first = self.waiting.get()
        if first is None:
            return [], True
        batch, deadline = [first], time.monotonic() + INTERVAL_S
        while len(batch) < BATCH and (left := deadline - time.monotonic()) > 0:
            try:
                item = self.waiting.get(timeout=left)
            except queue.Empty:
                break
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _span(self, rec: dict, t: RequestTimes, ids: tuple[bytes, bytes]):
        from opentelemetry.proto.trace.v1.trace_pb2 import Span
        return Span(trace_id=ids[0], span_id=os.urandom(8), parent_span_id=ids[1], name="llm_request",
                    kind=Span.SPAN_KIND_SERVER, start_time_unix_nano=t.arrival_ns + self.shift,
                    end_time_unix_nano=t.arrival_ns + t.e2e + self.shift, attributes=_attributes(rec, t))

    def _request(self, batch: list):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
        from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
        from opentelemetry.proto.resource.v1.resource_pb2 import Resource
        from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
        resource = Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value="tokenbench-reference"))])
        spans = [self._span(*item) for item in batch]
        return ExportTraceServiceRequest(resource_spans=[ResourceSpans(resource=resource,
                                                                       scope_spans=[ScopeSpans(spans=spans)])])

    def _post(self, body: bytes) -> None:
        """POST one export on a kept-alive connection (as the SDK's exporter does); a kept connection the receiver
        closed meanwhile is replaced once by a new one."""
        try:
            self._send(body)
        except (OSError, http.client.HTTPException):
            self._send(body)

    def _send(self, body: bytes) -> None:
        url = urllib.parse.urlsplit(self.endpoint)
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=10)
            self.conn.request("POST", url.path or "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
            self.conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            raise

    def _grpc_sender(self):
        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as service
        svc = service.DESCRIPTOR.services_by_name["TraceService"]
        call = grpc.insecure_channel(self.endpoint).unary_unary(
            f"/{svc.full_name}/{svc.methods_by_name['Export'].name}", request_serializer=None,
            response_deserializer=service.ExportTraceServiceResponse.FromString)
        return lambda body: call(body, timeout=10)
