"""Fault injection for the reference server: which fault a request gets, and what each one does to bytes.

Each fault has a rate in [0, 1]. Per request, one uniform draw from a seeded RNG picks at most one
fault (rates are stacked in FAULT_KINDS order, so they must sum to at most 1). The draw happens in
arrival order, so the same seed and the same arrival order give the same faults.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from collections.abc import Mapping

from tokenbench.errors import UsageError

# name -> the symptom a client sees. Docs (docs/reference-server.md) and tests follow this table.
FAULT_KINDS: dict[str, str] = {
    "http_429": "HTTP 429 with an OpenAI-style error body and `Retry-After: 1`, before any stream",
    "http_500": "HTTP 500 with an OpenAI-style error body, before any stream",
    "http_503": "HTTP 503 with an OpenAI-style error body and `Retry-After: 1`, before any stream",
    "reset_mid_stream": "TCP reset (RST) after half of the content chunks; no [DONE]",
    "stall": "no bytes for `stall_s` seconds after half of the content chunks, then the rest",
    "malformed_sse": "an extra line without `data:` before the middle content chunk",
    "invalid_json": "the middle content chunk is cut in half: a `data:` line with broken JSON",
    "early_done": "`data: [DONE]` after half of the content chunks (no finish_reason, no usage)",
    "missing_usage": "no `usage` anywhere, even when stream_options.include_usage is set",
    "slow_headers": "response headers only after `slow_headers_s` seconds (then a normal answer)",
    # field conditions: the answer is complete and correct, only its delivery differs (outcome `ok`)
    "proxy_buffer": "the body arrives in whole pieces of `proxy_buffer_bytes` (the rest at the end), as "
                    "through a buffering proxy (nginx's default proxy_buffering: 4 KiB)",
    "slow_end": "everything after the last token (a usage-only chunk, `[DONE]`) `slow_end_s` late, as after "
                "a gateway's hook, moderation or billing",
    "no_done": "the stream ends cleanly (finish_reason, usage, end of body) without `data: [DONE]`",
}

HTTP_FAULTS: dict[str, int] = {"http_429": 429, "http_500": 500, "http_503": 503}

MALFORMED_LINE = b"this line has no data prefix\n\n"


def validate_faults(faults: Mapping[str, float]) -> dict[str, float]:
    """Check names and rates; return a plain dict. Raises UsageError naming the bad entry."""
    known = ", ".join(FAULT_KINDS)
    out: dict[str, float] = {}
    for name, rate in faults.items():
        if name not in FAULT_KINDS:
            raise UsageError(f"unknown fault {name!r}", hint=f"use one of: {known}")
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
            raise UsageError(f"fault {name} has rate {rate!r}", hint="a rate is a number in [0, 1]")
        out[name] = float(rate)
    if sum(out.values()) > 1.0 + 1e-9:
        raise UsageError("fault rates sum to more than 1", hint="each request gets at most one fault")
    return out


def parse_fault(text: str) -> tuple[str, float]:
    """`NAME=RATE` (the CLI's --fault value) -> (name, rate); validated like a config entry."""
    name, sep, rate = text.partition("=")
    try:
        value = float(rate)
    except ValueError:
        value = None
    if not sep or value is None:
        raise UsageError(f"bad fault {text!r}", hint="write NAME=RATE, e.g. http_500=0.1")
    validate_faults({name: value})
    return name, value


class FaultPicker:
    """One seeded draw per request -> a fault name or None."""

    def __init__(self, faults: Mapping[str, float], seed: int) -> None:
        self._table = [(name, faults[name]) for name in FAULT_KINDS if faults.get(name, 0.0) > 0.0]
        self._rng = random.Random(seed)

    def pick(self) -> str | None:
        if not self._table:
            return None
        u = self._rng.random()
        edge = 0.0
        for name, rate in self._table:
            edge += rate
            if u < edge:
                return name
        return None


def fault_point(n_chunks: int) -> int:
    """Index of the content chunk where a mid-stream fault strikes (chunks before it are sent)."""
    return n_chunks // 2


def corrupt(events: bytes) -> bytes:
    """Cut the first `data: {...}` event in half: still a `data:` line, but its JSON is broken."""
    first, _, rest = events.partition(b"\n\n")
    return first[: max(len(b"data: {"), len(first) // 2)] + b"\n\n" + rest


def reset(transport: asyncio.Transport) -> None:
    """Close with an RST (SO_LINGER 0), so the peer sees a reset rather than a clean EOF."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass  # already gone: abort() below is all we can do
    transport.abort()
