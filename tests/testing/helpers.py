"""Helpers for the reference-server tests: real HTTP over loopback with aiohttp's client.

Deliberately independent of tokenbench.client: these tests define what the client is measured against.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter_ns

import aiohttp

from tokenbench.testing.reference_server import ReferenceConfig, start


def config(**overrides) -> ReferenceConfig:
    """Fast timings for functional tests; timing tests pass their own."""
    return ReferenceConfig(**{"ttft_ms": 5.0, "itl_ms": 1.0, **overrides})


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=20))


@contextlib.asynccontextmanager
async def served(cfg: ReferenceConfig):
    """(running server, client session) in this loop; the send log is complete after the block."""
    ref = await start(cfg)
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            yield ref, session
    finally:
        await ref.close()


@dataclass
class Reply:
    status: int = 0
    headers: dict = field(default_factory=dict)
    raw: bytes = b""
    error: BaseException | None = None
    sent_ns: int = 0
    headers_ns: int = 0
    arrivals: list[tuple[int, bytes]] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        """Non-empty SSE lines as sent."""
        return [ln for ln in self.raw.decode().split("\n") if ln]

    @property
    def chunks(self) -> list[dict]:
        """Parsed `data:` payloads, [DONE] excluded."""
        return [json.loads(ln[6:]) for ln in self.lines if ln.startswith("data: ") and ln != "data: [DONE]"]

    def json(self) -> dict:
        return json.loads(self.raw)


async def post(session: aiohttp.ClientSession, url: str, body: dict, headers: dict | None = None,
               read_timeout: float = 10.0) -> Reply:
    """POST and read the whole answer, stamping each arrival; transport errors are kept, not raised."""
    reply = Reply(sent_ns=perf_counter_ns())
    try:
        async with session.post(url, json=body, headers=headers) as resp:
            reply.headers_ns, reply.status, reply.headers = perf_counter_ns(), resp.status, dict(resp.headers)
            while True:
                data = await asyncio.wait_for(resp.content.readany(), read_timeout)
                if not data:
                    break
                reply.arrivals.append((perf_counter_ns(), data))
                reply.raw += data
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        reply.error = exc
    return reply


def stream_body(prompt, max_tokens: int, **extra) -> dict:
    return {"prompt": prompt, "max_tokens": max_tokens, "min_tokens": max_tokens, "ignore_eos": True,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}, **extra}


def chat_body(content, max_tokens: int, **extra) -> dict:
    return {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "min_tokens": max_tokens, "ignore_eos": True, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, **extra}


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]
