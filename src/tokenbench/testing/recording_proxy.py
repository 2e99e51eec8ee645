"""A recording reverse proxy: every request is forwarded to the real server and its answer streamed back
untouched, chunk by chunk as it arrives, while the proxy keeps what the client sent: method, path,
headers, body, the client connection it came on (numbered 1, 2, ... in order of first use) and when it
arrived; and from the answer its status and the last `usage` object the server reported.

`tokenbench agree` puts one in front of the server for a short capture of each client's requests
(study/agree_capture.py), so the comparison of request bodies is what each client sent, not what its
code is believed to send. Run it in a test or script with `async with RecordingProxy(upstream) as p`, or
from synchronous code with `ProxyThread(upstream)` (its own event loop in a thread). Measuring through
it adds a hop: capture through it, measure without it."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

# hop-by-hop headers (RFC 9110 7.6.1) and those the proxy's own HTTP stack sets again
HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
                 "proxy-authenticate", "proxy-authorization", "host", "content-length"})
TAIL = 16384          # bytes of each answer kept to find its last usage object


@dataclass
class Captured:
    """One request as the client sent it, and what came of it."""

    seq: int                                  # 1, 2, ... in order of arrival
    arrived_ns: int                           # time.perf_counter_ns() when its body had arrived
    connection: int                           # the client's connection, numbered in order of first use
    method: str
    path: str                                 # path and query
    headers: tuple[tuple[str, str], ...]      # as received, in order
    body: bytes
    status: int = 0                           # the server's answer (502: the server could not be reached)
    usage: dict | None = None                 # the last `usage` object in the answer, if any
    first_chunk_ns: int | None = None         # when the first body bytes of the answer came from the server
    last_chunk_ns: int | None = None          # ... and the last ones

    @property
    def route(self) -> str:
        """The path without its query."""
        return self.path.split("?")[0]

    @property
    def ttfb_ms(self) -> float | None:
        """Arrival to the answer's first body bytes, as the proxy saw them (no client in it)."""
        return None if self.first_chunk_ns is None else (self.first_chunk_ns - self.arrived_ns) / 1e6

    @property
    def total_ms(self) -> float | None:
        """Arrival to the answer's last body bytes, as the proxy saw them."""
        return None if self.last_chunk_ns is None else (self.last_chunk_ns - self.arrived_ns) / 1e6

    def json(self) -> Any:
        """The body as JSON, None when it is not."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None

    def header_names(self) -> set[str]:
        return {k.lower() for k, _ in self.headers}


def forwardable(headers: Mapping[str, str]) -> dict[str, str]:
    """The end-to-end headers of a message (hop-by-hop ones dropped)."""
    return {k: v for k, v in headers.items() if k.lower() not in HOP}


def last_usage(tail: bytes) -> dict | None:
    """The last `usage` object in the end of an answer: an SSE stream's `data:` events, or one JSON body."""
    text = tail.decode("utf-8", "replace")
    events = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")] or [text]
    for event in reversed(events):
        try:
            doc = json.loads(event)
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("usage"), dict):
            return doc["usage"]
    return None


class RecordingProxy:
    """The proxy in the running event loop: `url` once started; `captured` in order of arrival."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.captured: list[Captured] = []
        self.url = ""
        self._connections: dict[int, tuple[object, int]] = {}   # id(transport) -> (transport, number)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> RecordingProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        self._session = aiohttp.ClientSession(auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()
        self.url = f"http://{host}:{self._runner.addresses[0][1]}"
        return self.url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _connection(self, request: web.Request) -> int:
        """The client connection's number (the transport object is kept, so its id is never reused)."""
        transport = request.transport
        known = self._connections.get(id(transport))
        if known is None:
            known = (transport, len(self._connections) + 1)
            self._connections[id(transport)] = known
        return known[1]

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        rec = Captured(len(self.captured) + 1, time.perf_counter_ns(), self._connection(request), request.method,
                       request.path_qs, tuple(request.headers.items()), body)
        self.captured.append(rec)
        assert self._session is not None
        try:
            async with self._session.request(request.method, self.upstream + request.path_qs,
                                             headers=forwardable(request.headers), data=body) as upstream:
                return await self._relay(request, upstream, rec)
        except aiohttp.ClientConnectionError as exc:
            rec.status = 502
            return web.json_response({"error": {"message": f"recording proxy: {self.upstream}: {exc}"}}, status=502)

    async def _relay(self, request: web.Request, upstream: aiohttp.ClientResponse,
                     rec: Captured) -> web.StreamResponse:
        """The server's answer to the client as it comes, each read written on at once."""
        rec.status = upstream.status
        out = web.StreamResponse(status=upstream.status, reason=upstream.reason,
                                 headers=forwardable(upstream.headers))
        await out.prepare(request)
        tail = b""
        async for chunk in upstream.content.iter_any():
            rec.last_chunk_ns = time.perf_counter_ns()
            rec.first_chunk_ns = rec.first_chunk_ns or rec.last_chunk_ns
            await out.write(chunk)
            tail = (tail + chunk)[-TAIL:]
        await out.write_eof()
        rec.usage = last_usage(tail)
        return out


class ProxyThread:
    """A RecordingProxy on its own event loop in a thread, for synchronous callers:
    `with ProxyThread(upstream) as proxy: run a client against proxy.url; proxy.captured`."""

    def __init__(self, upstream: str) -> None:
        self.proxy = RecordingProxy(upstream)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="recording-proxy", daemon=True)

    @property
    def url(self) -> str:
        return self.proxy.url

    @property
    def captured(self) -> list[Captured]:
        return list(self.proxy.captured)

    def __enter__(self) -> ProxyThread:
        self._thread.start()
        self._call(self.proxy.start())
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self.proxy.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def _call(self, coro) -> Any:
        done: Future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return done.result(timeout=30)
