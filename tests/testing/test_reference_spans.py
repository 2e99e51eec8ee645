"""The reference server's span exporter (testing/spans.py) against tokenbench's receiver: a batch of spans
arrives whole, over a kept-alive connection that survives the receiver closing it between exports, with vLLM's
attributes carrying the phase times the send log holds. Slow tier (it starts the receiver's process)."""

from __future__ import annotations

import socket
import time

import pytest

from tokenbench.monitor.otlp import timing_of
from tokenbench.monitor.otlp_receiver import start
from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.spans import SpanExporter, times_of

pytestmark = pytest.mark.slow

MS = 1_000_000


def rec(i: int) -> dict:
    recv = 1_000 * MS + i * MS
    return {"id": f"cmpl-{i}", "recv_ns": recv, "admitted_ns": recv + 2 * MS, "prefill_ns": [recv + 3 * MS, recv + 8 * MS],
            "due_ns": [recv + 10 * MS, recv + 20 * MS, recv + 30 * MS], "outcome": "ok", "prompt_tokens": 8,
            "completion_tokens": 3, "traceparent": f"00-{i + 1:032x}-{i + 1:016x}-01"}


def arrived(receiver, n: int) -> list:
    spans, deadline = [], time.monotonic() + 30
    while len(spans) < n and time.monotonic() < deadline:
        spans += receiver.take().spans
        time.sleep(0.05)
    return spans


def test_spans_arrive_with_the_send_logs_phases_even_after_the_connection_was_closed():
    with start() as receiver:
        exporter = SpanExporter(ReferenceConfig(ttft_ms=1, itl_ms=1, otlp_endpoint=receiver.http_endpoint,
                                                span_clock_offset_ms=2.0))
        for i in range(3):
            exporter.add(rec(i), times_of(rec(i)))
        first = arrived(receiver, 3)
        assert exporter.conn is not None
        exporter.conn.sock.shutdown(socket.SHUT_RDWR)         # the receiver (or a proxy) closed the kept connection
        exporter.add(rec(3), times_of(rec(3)))
        later = arrived(receiver, 1)
        exporter.close()
    assert len(first) == 3 and len(later) == 1 and exporter.failures == 0
    t = timing_of([s for s in first if s.trace_id == f"{1:032x}"])
    assert t is not None and (t.queue_ns, t.prefill_ns, t.ttft_ns, t.decode_ns) == (3 * MS, 7 * MS, 10 * MS, 20 * MS)
    assert t.request_id == "cmpl-0" and t.arrival_ns > 0
