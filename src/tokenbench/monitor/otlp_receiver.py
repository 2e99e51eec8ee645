"""The OTLP receiver: a process of its own that listens for a server's trace exports while a run lasts and keeps
the spans joining needs until tokenbench takes them (after each cell).

One port takes both OTLP transports: a connection that opens with the HTTP/2 preface is gRPC (handed to grpcio's
TraceService/Export), any other is HTTP/1.1 (POST /v1/traces, `application/x-protobuf`, served by aiohttp); the
port is the user's `--otlp-listen HOST:PORT`, by default 127.0.0.1 and a free port (never every interface unless
asked). Spans are received and decoded in this process (monitor/otlp.py), so none of it runs on the client's
event loop or holds its interpreter's lock. A payload that does not decode, is too large or is of an encoding
OTLP/HTTP-protobuf does not use is dropped and counted, never a crash; spans beyond MAX_SPANS waiting to be
taken are dropped oldest first and counted. The process ends when tokenbench closes it, or dies with it (its
pipe reads EOF)."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

from tokenbench.errors import TargetError, UsageError
from tokenbench.monitor.otlp import PayloadError, Span, decode

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"     # how every HTTP/2 (gRPC) connection opens
MAX_BODY = 16 * 2**20           # bytes of one export (decompressed): OTLP exporters send batches of 512 spans
MAX_SPANS = 1_000_000           # kept spans waiting to be taken
HEAD_S = 10.0                   # a connection that sends nothing for this long is closed
START_S = 60.0                  # the process must listen within this
PATH = "/v1/traces"
LOCAL = "127.0.0.1"


@dataclass
class Received:
    """What arrived since the last take: the kept spans, and counts."""

    spans: list[Span] = field(default_factory=list)
    payloads: int = 0               # exports received
    dropped_payloads: int = 0       # ... that could not be decoded (malformed, too large, wrong encoding)
    other_spans: int = 0            # spans that are not a request's or its queue slice
    overflow: int = 0               # kept spans dropped because MAX_SPANS were waiting

    def merged(self, more: Received) -> Received:
        return Received(self.spans + more.spans, self.payloads + more.payloads,
                        self.dropped_payloads + more.dropped_payloads, self.other_spans + more.other_spans,
                        self.overflow + more.overflow)


class _Kept:
    """The receiver's store, shared by its servers' threads and the thread that answers tokenbench."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: deque[Span] = deque()
        self.counts = Received()

    def payload(self, body: bytes) -> bool:
        """Decode and keep one export; False (counted) when it does not decode."""
        try:
            got = decode(body)
        except PayloadError:
            self.dropped()
            return False
        with self.lock:
            self.counts.payloads += 1
            self.counts.other_spans += got.other
            self.spans.extend(got.spans)
            while len(self.spans) > MAX_SPANS:
                self.spans.popleft()
                self.counts.overflow += 1
        return True

    def dropped(self) -> None:
        with self.lock:
            self.counts.payloads += 1
            self.counts.dropped_payloads += 1

    def take(self) -> Received:
        with self.lock:
            out, self.counts = self.counts, Received()
            out.spans, self.spans = list(self.spans), deque()
        return out


# ---- the servers (in the receiver's process) ----

async def _http(kept: _Kept) -> int:
    from aiohttp import web
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    answer = ExportTraceServiceResponse().SerializeToString()

    async def export(request: web.Request) -> web.Response:
        if request.content_type not in ("application/x-protobuf", "application/protobuf"):
            kept.dropped()
            return web.Response(status=415, text="OTLP/HTTP with protobuf bodies only (application/x-protobuf)")
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            kept.dropped()
            return web.Response(status=413, text=f"an export of at most {MAX_BODY} bytes")
        if not kept.payload(body):
            return web.Response(status=400, text="not an OTLP ExportTraceServiceRequest")
        return web.Response(body=answer, content_type="application/x-protobuf")

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post(PATH, export)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, LOCAL, 0)
    await site.start()
    return runner.addresses[0][1]


def _grpc(kept: _Kept) -> int:
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as service

    def export(body: bytes, context) -> service.ExportTraceServiceResponse:
        if not kept.payload(body):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not an OTLP ExportTraceServiceRequest")
        return service.ExportTraceServiceResponse()

    name = service.DESCRIPTOR.services_by_name["TraceService"].full_name
    method = grpc.unary_unary_rpc_method_handler(
        export, request_deserializer=None, response_serializer=service.ExportTraceServiceResponse.SerializeToString)
    server = grpc.server(ThreadPoolExecutor(max_workers=2), options=[("grpc.max_receive_message_length", MAX_BODY)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, {"Export": method}),))
    port = server.add_insecure_port(f"{LOCAL}:0")
    server.start()
    _keep_alive.append(server)
    return port


_keep_alive: list = []           # the gRPC server lives as long as the process


async def _head(reader: asyncio.StreamReader) -> bytes:
    """The connection's first bytes: enough to tell the HTTP/2 preface from anything else."""
    head = b""
    while len(head) < len(PREFACE) and PREFACE.startswith(head):
        more = await reader.read(len(PREFACE) - len(head))
        if not more:
            break
        head += more
    return head


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    while data := await src.read(65536):
        dst.write(data)
        await dst.drain()
    if dst.can_write_eof():
        dst.write_eof()


def _router(http_port: int, grpc_port: int) -> Callable:
    async def route(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = None
        try:
            head = await asyncio.wait_for(_head(reader), HEAD_S)
            if not head:
                return
            port = grpc_port if head == PREFACE else http_port
            up_reader, upstream = await asyncio.open_connection(LOCAL, port)
            upstream.write(head)
            await asyncio.gather(_pump(reader, upstream), _pump(up_reader, writer))
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            for w in (writer, upstream):
                if w is not None:
                    w.close()
    return route


async def _serve(kept: _Kept, host: str, port: int) -> tuple[asyncio.AbstractServer, int]:
    http_port, grpc_port = await _http(kept), _grpc(kept)
    server = await asyncio.start_server(_router(http_port, grpc_port), host, port, backlog=1024)
    return server, server.sockets[0].getsockname()[1]


def _answer(conn: Connection, kept: _Kept) -> None:
    """Tokenbench's requests over the pipe; EOF (tokenbench gone) or "stop" ends the process."""
    while True:
        try:
            ask = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        if ask != "take":
            os._exit(0)
        got = kept.take()
        spans = [(s.trace_id, s.name, s.start_ns, s.end_ns, s.attributes) for s in got.spans]
        conn.send((spans, got.payloads, got.dropped_payloads, got.other_spans, got.overflow))


def _child(conn: Connection, host: str, port: int) -> None:
    kept = _Kept()
    loop = asyncio.new_event_loop()
    try:
        _, bound = loop.run_until_complete(_serve(kept, host, port))
    except OSError as exc:
        conn.send(("error", exc.strerror or str(exc)))
        return
    conn.send(("ready", bound))
    threading.Thread(target=_answer, args=(conn, kept), daemon=True).start()
    loop.run_forever()


# ---- tokenbench's side ----

def parse_listen(listen: str | None) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets) -> (host, port); None -> 127.0.0.1 and a free port."""
    if not listen:
        return LOCAL, 0
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--otlp-listen {listen!r} is not HOST:PORT", "give e.g. 127.0.0.1:4318 (port 0: a free one)")
    return host, int(port)


class Receiver:
    """The running receiver: where servers send their spans, and `take()` for what came."""

    def __init__(self, proc, conn: Connection, host: str, port: int) -> None:
        self.proc, self.conn, self.host, self.port = proc, conn, host, port
        self.lock = threading.Lock()

    @property
    def address(self) -> str:
        """HOST:PORT of the receiver, as gRPC exporters take it."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def http_endpoint(self) -> str:
        """The OTLP/HTTP traces URL (`--otlp-traces-endpoint` of vLLM with http/protobuf)."""
        return f"http://{self.address}{PATH}"

    def take(self) -> Received:
        """Every span kept and every count since the last take."""
        with self.lock:
            try:
                self.conn.send("take")
                spans, *counts = self.conn.recv()
            except (EOFError, OSError, BrokenPipeError):
                raise TargetError("the OTLP receiver process is gone", "run again; spans from the server "
                                  "cannot be joined without it") from None
        return Received([Span(*s) for s in spans], *counts)

    def close(self) -> None:
        with contextlib.suppress(OSError, BrokenPipeError):
            self.conn.send("stop")
        self.conn.close()
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def start(listen: str | None = None) -> Receiver:
    """Start the receiver's process and wait until it listens (UsageError when the address cannot be bound)."""
    host, port = parse_listen(listen)
    ctx = mp.get_context("spawn")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(theirs, host, port), name="tokenbench-otlp", daemon=True)
    proc.start()
    theirs.close()
    if not mine.poll(START_S):
        proc.kill()
        raise TargetError(f"the OTLP receiver did not start within {START_S:g} s", "run again on a less busy machine")
    kind, value = mine.recv()
    if kind != "ready":
        proc.join(timeout=5)
        raise UsageError(f"cannot listen for OTLP spans on {host}:{port}: {value}",
                         "give a free port with --otlp-listen HOST:PORT (0: any free port)")
    return Receiver(proc, mine, host, value)
