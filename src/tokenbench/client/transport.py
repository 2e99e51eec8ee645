"""The transport: send ONE prepared request, stamp every read as it arrives, keep the body bytes.

A minimal HTTP/1.1 client on asyncio protocols: the whole request (line, headers, body) is encoded
before the clock starts, and `data_received` stamps `time.perf_counter_ns()` in the event loop's own
read callback, before any task is woken. Only HTTP framing happens while the stream runs (to know where
the response ends); SSE and JSON are parsed after the request ended (`client.parse`).
"""

from __future__ import annotations

import asyncio
import errno
import resource
import socket
import ssl
import time
from collections import defaultdict, deque

from tokenbench.client.framing import CHUNK_SIZES, FramingError, ResponseFramer
from tokenbench.client.records import OUT_OF_FILES, RawExchange
from tokenbench.client.request import PreparedRequest, encode_request

now = time.perf_counter_ns


class _Conn(asyncio.Protocol):
    """One keep-alive connection; carries at most one exchange at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.raw: RawExchange | None = None
        self.framer: ResponseFramer | None = None
        self.done: asyncio.Future | None = None
        self.closed = False
        self.body_head = bytearray()
        self.streaming = False      # a 200 answer's chunked body, between two chunks: the one-chunk read below

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]    # uvloop's transports are not asyncio.Transport subclasses
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def start(self, raw: RawExchange, payload: bytes) -> asyncio.Future:
        self.raw, self.framer = raw, ResponseFramer()
        self.done = asyncio.get_running_loop().create_future()
        self.body_head = bytearray()
        raw.sent_ns = now()
        assert self.transport is not None
        if self.transport.is_closing():      # the server closed it first: uvloop refuses the write (RuntimeError)
            self._finish("stale", "connection closed before the request was written")
        else:
            self.transport.write(payload)
        return self.done

    def data_received(self, data: bytes) -> None:
        t = now()
        if self.streaming:
            nl = data.find(b"\r\n")
            size = CHUNK_SIZES.get(data[:nl])
            if size and len(data) == nl + size + 4 and data.endswith(b"\r\n"):
                self.raw.chunks.append((t, data[nl + 2:-2]))    # type: ignore[union-attr]  # set while streaming
                return                  # the usual read: one whole chunk, which leaves the framer where it was
        self._read(t, data)

    def _read(self, t: int, data: bytes) -> None:
        """Any read: through the framer; the head's stamp and status, the body, the end."""
        raw, framer = self.raw, self.framer
        if raw is None or framer is None or self.done is None or self.done.done():
            return
        try:
            body = framer.feed(data)
        except FramingError as exc:
            self._finish("malformed_sse", f"bad HTTP framing: {exc}")
            return
        if framer.head_done and not raw.headers_ns:
            raw.headers_ns, raw.status = t, framer.status
        if body:
            if framer.status == 200:
                raw.chunks.append((t, body))
            elif len(self.body_head) < 512:
                self.body_head += body
        if framer.complete:
            self._finish(None, "")
        else:
            self.streaming = framer.status == 200 and framer.between_chunks

    def abort_timeout(self, timeout_s: float) -> None:
        if self.done is not None and not self.done.done():
            self._finish("timeout", f"no complete answer within the per-request timeout (--timeout {timeout_s:g} s)")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.raw is None or self.framer is None or self.done is None or self.done.done():
            return
        self.framer.eof()
        if self.framer.complete:
            self._finish(None, "")
        elif not self.raw.headers_ns and not self.raw.chunks:
            self._finish("stale", f"connection closed before any response byte ({exc or 'EOF'})")
        else:
            self._finish("reset", f"connection closed mid-response ({exc or 'EOF'})")

    def _finish(self, kind: str | None, detail: str) -> None:
        raw, framer, done, transport = self.raw, self.framer, self.done, self.transport
        assert raw is not None and framer is not None and done is not None and transport is not None
        raw.end_ns = now()
        self.streaming = False
        if kind is None and raw.status != 200:
            kind = "http_status"
            detail = f"HTTP {raw.status}: {self.body_head[:512].decode('utf-8', 'replace')}"
        raw.error_kind, raw.error_detail = kind, detail
        if kind is not None or not framer.keep_alive:
            self.closed = True
            transport.close()
        done.set_result(None)


CONNECT_CAP_S = 30.0     # the longest a connection's set-up is waited for (the request's own timeout when shorter)


class Session:
    """Keep-alive connection pools per (host, port, tls); no connection cap."""

    def __init__(self, timeout_s: float, connect_in_ttft: bool = False) -> None:
        self.timeout_s = timeout_s
        self.connect_in_ttft = connect_in_ttft      # vLLM's way: a new connection's set-up is in TTFT
        self.idle: dict[tuple, deque[_Conn]] = defaultdict(deque)
        self.all: set[_Conn] = set()
        self._ssl: ssl.SSLContext | None = None     # made for the first https connection (loading the CAs: 70 ms)

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        for conn in self.all:
            if conn.transport is not None:
                conn.transport.close()
        self.all.clear()
        self.idle.clear()

    async def _connect(self, key: tuple) -> _Conn:
        host, port, tls = key
        loop = asyncio.get_running_loop()
        transport, conn = await asyncio.wait_for(
            loop.create_connection(_Conn, host, port, ssl=self._tls() if tls else None),
            timeout=min(self.timeout_s, CONNECT_CAP_S))
        conn.transport = conn.transport or transport     # uvloop calls connection_made only after this returns
        self.all.add(conn)
        return conn

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def _idle_conn(self, key: tuple) -> _Conn | None:
        pool = self.idle[key]
        while pool:
            conn = pool.pop()
            if not conn.closed:
                return conn
            self.all.discard(conn)
        return None

    def _release(self, key: tuple, conn: _Conn) -> None:
        conn.raw = None
        if conn.closed:
            self.all.discard(conn)
        else:
            self.idle[key].append(conn)


def connect_error(exc: BaseException) -> str:
    """A failed connection's detail; one the client's own limit on open files refused says so, with the
    limit (`ulimit -n`): the server never saw it."""
    text = f"{type(exc).__name__}: {exc}"
    if getattr(exc, "errno", None) in (errno.EMFILE, errno.ENFILE):
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return f"{text} ({OUT_OF_FILES} {soft})"
    return text


def _connect_timeout(exc: BaseException, timeout_s: float) -> tuple[str, str]:
    """(kind, detail) of a connection not made in time: within the per-request timeout, the request timed out
    (the limit may be too short for the server, which is not taken for gone); within the 30 s cap on a
    connection's set-up, the server did not accept it."""
    if timeout_s <= CONNECT_CAP_S:
        return "timeout", f"no connection within the per-request timeout (--timeout {timeout_s:g} s)"
    return "connect", f"{type(exc).__name__}: no connection within {CONNECT_CAP_S:g} s"


def new_session(timeout_s: float, connect_in_ttft: bool = False) -> Session:
    return Session(timeout_s, connect_in_ttft)


async def _attempt(session: Session, key: tuple, payload: bytes, intended_ns: int, fresh: bool,
                   keep: bool = True) -> RawExchange:
    """One try: on a pooled connection unless `fresh`; `keep` False closes the connection after it."""
    raw = RawExchange(intended_ns=intended_ns, connect_in_ttft=session.connect_in_ttft)
    conn = None if fresh else session._idle_conn(key)
    reused = conn is not None
    try:
        if conn is None:
            raw.sent_ns = t_connect = now()
            conn = await session._connect(key)
            raw.connect_ns = now() - t_connect
        done = conn.start(raw, payload)
        if session.connect_in_ttft and raw.connect_ns:
            raw.sent_ns -= raw.connect_ns             # the clock started before the connection
        timer = asyncio.get_running_loop().call_later(session.timeout_s, conn.abort_timeout, session.timeout_s)
        try:
            await done
        finally:
            timer.cancel()
    except (asyncio.TimeoutError, TimeoutError) as exc:      # the connection was not made in time
        (raw.error_kind, raw.error_detail), raw.end_ns = _connect_timeout(exc, session.timeout_s), now()
    except OSError as exc:
        raw.error_kind, raw.error_detail, raw.end_ns = "connect", connect_error(exc), now()
    except asyncio.CancelledError:
        raw.error_kind, raw.error_detail, raw.end_ns = "cancelled", "interrupted", now()
        if conn is not None and conn.transport is not None:
            conn.closed = True
            conn.transport.close()
    if conn is not None and not keep and conn.transport is not None:
        conn.closed = True
        conn.transport.close()
    if conn is not None:
        session._release(key, conn)
    if raw.error_kind == "stale" and not reused:
        raw.error_kind = "reset"     # only a pooled connection can be stale; a new one failed for real
    return raw


async def send(session: Session, req: PreparedRequest, intended_ns: int) -> RawExchange:
    """One request. A pooled keep-alive connection that the server already closed fails before any
    response byte; that attempt is retried once on a fresh connection with a fresh send stamp.
    `req.new_connection`: a connection of its own, opened for it and closed after it (as a client that
    makes a new HTTP session per request, e.g. sglang.bench_serving)."""
    key, payload = (req.conn_key, req.wire) if req.wire else encode_request(req.url, req.body, req.headers)
    fresh = req.new_connection
    raw = await _attempt(session, key, payload, intended_ns, fresh=fresh, keep=not fresh)
    if raw.error_kind == "stale":
        raw = await _attempt(session, key, payload, intended_ns, fresh=True, keep=not fresh)
        if raw.error_kind == "stale":
            raw.error_kind = "reset"
    _mask_credentials(raw, req.headers)
    return raw


def _mask_credentials(raw: RawExchange, headers: dict[str, str]) -> None:
    """Some servers quote the Authorization header in an error body; the key must not reach the
    results (the detail is stored, written to JSON and printed)."""
    secret = headers.get("Authorization", "").removeprefix("Bearer").strip()
    if secret and secret in raw.error_detail:
        raw.error_detail = raw.error_detail.replace(secret, "***")
