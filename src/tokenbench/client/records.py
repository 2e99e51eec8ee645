"""Per-request records: raw capture from the transport, then the parsed record metrics use.

All times are integer nanoseconds from `time.perf_counter_ns()` (CLOCK_MONOTONIC on Linux), the
same clock the monitor samplers stamp with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Phase = Literal["warmup", "measure"]
UsageSource = Literal["server", "chunks", "none"]

# Error kinds are data: a failed request keeps its partial timings and one of these kinds.
OUT_OF_FILES = "the client's limit, ulimit -n, is"    # in a `connect` error's detail: that limit refused it

ERROR_KINDS = (
    "http_status",      # non-200 answer (429, 500, 503, 401 ...): detail holds the status and body head
    "connect",          # could not connect / connection refused
    "reset",            # connection dropped mid-stream
    "timeout",          # whole-request timeout hit
    "malformed_sse",    # an SSE line that is not `data: ...`, or bytes that are not UTF-8
    "invalid_json",     # a data line whose payload is not JSON
    "server_error",     # an error object inside the stream
    "early_done",       # [DONE] or EOF before the requested output length
    "cancelled",        # interrupted by the user
)


@dataclass(slots=True, kw_only=True)
class RawExchange:
    """What the transport saw. Only timestamps and bytes; no parsing happened yet."""

    intended_ns: int
    sent_ns: int = 0
    connect_ns: int = 0                 # set-up of a new connection (TCP, TLS), before sent_ns; 0 if reused
    connect_in_ttft: bool = False       # sent_ns was moved back to the start of the connection set-up
    headers_ns: int = 0
    end_ns: int = 0
    status: int | None = None
    chunks: list[tuple[int, bytes]] = field(default_factory=list)
    error_kind: str | None = None
    error_detail: str = ""


@dataclass(slots=True, kw_only=True)
class RequestRecord:
    """One request after parsing: the unit stored in the database and fed to metrics."""

    index: int
    phase: Phase
    input_len: int                      # asked
    output_len: int                     # asked
    intended_ns: int
    sent_ns: int
    end_ns: int
    status: int | None = None
    token_times_ns: list[int] = field(default_factory=list)   # arrival of each token-bearing chunk
    token_counts: list[int] = field(default_factory=list)     # tokens carried by that chunk
    prompt_tokens: int | None = None    # as counted by the server (usage) or by us (see usage_source)
    completion_tokens: int | None = None
    cached_tokens: int | None = None    # usage.prompt_tokens_details.cached_tokens (prefix-cache hits)
    images: int = 0                     # images sent with the prompt
    image_bytes: int = 0                # their decoded size
    image_count: int | None = None      # usage.prompt_tokens_details.image_count, when the server reports it
    usage_source: UsageSource = "none"
    finish_reason: str | None = None
    error_kind: str | None = None
    error_detail: str = ""
    length_error: str = ""              # server-reported lengths differ from what was asked
    text: str = ""
    worker: int = 0
    first_content_ns: int | None = None  # arrival of the first answer token (content, text, tool call)
    reasoning_tokens: int = 0           # tokens streamed as reasoning (or usage's reasoning_tokens)
    count_source: str = "none"          # how tokens per chunk were counted (client.token_counts)
    expected_prompt_tokens: int | None = None  # what the workload's tokenizer (+ chat template) counted
    connect_ns: int = 0                 # set-up of a new connection; 0 when a kept-alive one was reused
    connect_in_ttft: bool = False       # sent_ns is the start of that set-up (vLLM's TTFT), not after it
    session_id: str | None = None       # sessions workload: the session the request is a turn of
    turn: int | None = None             # ... and which turn (0 = the first)
    # the server's own timings, from its OpenTelemetry span (metrics/server.py; docs/metrics.md "Where
    # the time went"): the W3C trace id the request carried, and what the span said, on the server's clock
    trace_id: str | None = None         # 32 hex digits, sent in the request's `traceparent` header
    server_request_id: str | None = None  # the server's own id of the request (gen_ai.request.id)
    server_arrival_ns: int | None = None  # the span's start: the request's arrival, server clock (Unix ns)
    server_queue_ns: int | None = None    # waiting to be scheduled
    server_prefill_ns: int | None = None  # scheduled -> first token
    server_ttft_ns: int | None = None     # arrival -> first token emitted
    server_decode_ns: int | None = None   # first -> last token
    server_e2e_ns: int | None = None      # arrival -> last token emitted
    clock_offset_ns: int | None = None    # server clock minus client clock (the cell's estimate), applied to
    clock_offset_error_ns: int | None = None  # the arrival and emit times; +- this

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def ttft_ns(self) -> int | None:
        return self.token_times_ns[0] - self.sent_ns if self.token_times_ns else None

    @property
    def ttfc_ns(self) -> int | None:
        """Time to the first answer (non-reasoning) token."""
        return self.first_content_ns - self.sent_ns if self.first_content_ns is not None else None

    @property
    def e2el_ns(self) -> int:
        return self.end_ns - self.sent_ns

    @property
    def output_tokens(self) -> int:
        """Server-reported completion tokens when present, else the tokens counted in chunks."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        return sum(self.token_counts)

    @property
    def queue_ns(self) -> int:
        """Client-side queueing: how late the request left versus its intended start (connection
        set-up is its own figure, never queue time)."""
        return self.sent_ns - self.intended_ns - (0 if self.connect_in_ttft else self.connect_ns)
