"""A recording reverse proxy: every request is forwarded to the real server and its answer streamed back
untouched, chunk by chunk as it arrives, while the proxy keeps what the client sent: method, path,
headers, body, the client connection it came on (numbered 1, 2, ... in order of first use) and when it
arrived; and from the answer its status and the last `usage` object the server reported.

`tokenbench agree` puts one in front of the server for a short capture of each client's requests
(agreement/capture.py), so the comparison of request bodies is what each client sent, not what its
code is believed to send. Run it in a test or script with `async with RecordingProxy(upstream) as p`, or
from synchronous code with `ProxyThread(upstream)` (its own event loop in a thread). Measuring through
it adds a hop: capture through it, measure without it.

With `flush_ms` it is a *flushing* proxy (the field's buffered delivery, docs/reference-server.md "A proxy
that flushes"): what the server sends is held and written on in pieces, either on a fixed grid every
`flush_ms` from the answer's start (`interval`) or `flush_ms` after the first byte held since the last
flush (`latency`: Go's ReverseProxy FlushInterval); each flush is stamped (`Captured.flushes_ns`). A child
process runs it (`python -m tokenbench.testing.recording_proxy`, `ProxyProcess`), so it holds no CPU of
the client it stands in front of."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from aiohttp import web

# hop-by-hop headers (RFC 9110 7.6.1) and those the proxy's own HTTP stack sets again
HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
                 "proxy-authenticate", "proxy-authorization", "host", "content-length"})
TAIL = 16384          # bytes of each answer kept to find its last usage object


@dataclass(kw_only=True)
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
    flushes_ns: list[int] = field(default_factory=list)   # a flushing proxy: when each piece was written on

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


FlushMode = Literal["interval", "latency"]
READY_PREFIX = "PROXY_READY port="


class RecordingProxy:
    """The proxy in the running event loop: `url` once started; `captured` in order of arrival. `flush_ms`:
    hold the answers and write them on in pieces (see the module's doc)."""

    def __init__(self, upstream: str, flush_ms: float | None = None, flush_mode: FlushMode = "interval") -> None:
        self.upstream = upstream.rstrip("/")
        self.flush_ns = int(flush_ms * 1e6) if flush_ms else 0
        self.flush_mode = flush_mode
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
        rec = Captured(seq=len(self.captured) + 1, arrived_ns=time.perf_counter_ns(),
                       connection=self._connection(request), method=request.method, path=request.path_qs,
                       headers=tuple(request.headers.items()), body=body)
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
        held = _Held(out, rec)
        flusher = asyncio.ensure_future(self._flush(held)) if self.flush_ns else None
        async for chunk in upstream.content.iter_any():
            rec.last_chunk_ns = time.perf_counter_ns()
            rec.first_chunk_ns = rec.first_chunk_ns or rec.last_chunk_ns
            await held.add(chunk, passing=flusher is None)
        if flusher is not None:
            flusher.cancel()
            await asyncio.gather(flusher, return_exceptions=True)
        await held.flush()
        await out.write_eof()
        rec.usage = last_usage(held.tail)
        return out

    async def _flush(self, held: _Held) -> None:
        """Write what is held every `flush_ns` (interval) or `flush_ns` after the first byte held (latency)."""
        due = time.perf_counter_ns()
        while True:
            if self.flush_mode == "latency":
                await held.arrived.wait()
                due = held.since_ns
            due += self.flush_ns
            await asyncio.sleep(max(due - time.perf_counter_ns(), 0) / 1e9)
            await held.flush()


class _Held:
    """An answer's bytes on their way: written on at once (`passing`), or held until `flush`."""

    def __init__(self, out: web.StreamResponse, rec: Captured) -> None:
        self.out, self.rec, self.data, self.tail = out, rec, bytearray(), b""
        self.arrived, self.since_ns = asyncio.Event(), 0

    async def add(self, chunk: bytes, passing: bool) -> None:
        self.tail = (self.tail + chunk)[-TAIL:]
        if passing:
            await self.out.write(chunk)
            return
        if not self.data:
            self.since_ns = time.perf_counter_ns()
            self.arrived.set()
        self.data += chunk

    async def flush(self) -> None:
        if not self.data:
            return
        data, self.data = bytes(self.data), bytearray()
        self.arrived.clear()
        self.rec.flushes_ns.append(time.perf_counter_ns())
        await self.out.write(data)


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


def _child_main(argv: list[str] | None = None) -> None:
    """`python -m tokenbench.testing.recording_proxy --upstream URL [--flush-ms MS]`: serve until SIGTERM,
    printing `PROXY_READY port=N` once listening."""
    parser = argparse.ArgumentParser(prog="python -m tokenbench.testing.recording_proxy")
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--flush-ms", type=float, default=None)
    parser.add_argument("--flush-mode", choices=("interval", "latency"), default="interval")
    parser.add_argument("--cpu", default="", help="comma-separated CPUs to pin to")
    args = parser.parse_args(argv)
    if args.cpu:
        os.sched_setaffinity(0, {int(c) for c in args.cpu.split(",")})

    async def serve() -> None:
        proxy = RecordingProxy(args.upstream, args.flush_ms, args.flush_mode)
        await proxy.start(args.host)
        print(f"{READY_PREFIX}{proxy.url.rsplit(':', 1)[1]}", flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await proxy.close()

    asyncio.run(serve())


if __name__ == "__main__":
    _child_main()
