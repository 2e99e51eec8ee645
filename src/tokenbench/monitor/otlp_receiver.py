"""The OTLP receiver: a process of its own that listens for a server's trace exports while a run lasts and keeps
the spans joining needs until tokenbench takes them (after each cell).

One port takes both OTLP transports: a connection that opens with the HTTP/2 preface is gRPC (handed to grpcio's
TraceService/Export), any other is HTTP/1.1 (POST /v1/traces, `application/x-protobuf`, Python's own HTTP server); the
port is the user's `--otlp-listen HOST:PORT`, by default 127.0.0.1 and a free port (never every interface unless
asked). Spans are received and decoded in this process (monitor/otlp.py), so none of it runs on the client's
event loop or holds its interpreter's lock. A payload that does not decode, is too large or is of an encoding
OTLP/HTTP-protobuf does not use is dropped and counted, never a crash; spans beyond MAX_SPANS waiting to be
taken are dropped oldest first and counted. It runs as `python -m tokenbench.monitor.otlp_receiver HOST PORT`
(importing only what receiving needs), says `ready PORT` on stdout and answers tokenbench on its stdin; it ends
when tokenbench closes that pipe, or dies with it (EOF)."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import os
import selectors
import signal
import subprocess
import sys
import threading
import zlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import msgspec

from tokenbench.errors import TargetError, UsageError
from tokenbench.monitor.otlp import PayloadError, Span, decode
from tokenbench.spec.ports import PortRange, split_listen

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"     # how every HTTP/2 (gRPC) connection opens
ANY = PortRange(0, 0)          # a free port, the kernel's choice
MAX_BODY = 16 * 2**20           # bytes of one export (decompressed): OTLP exporters send batches of 512 spans
MAX_SPANS = 1_000_000           # kept spans waiting to be taken
DRAIN = 4 * MAX_BODY            # a refused body up to this size is read before the answer (beyond it: closed)
HEAD_S = 10.0                   # a connection that sends nothing for this long is closed
IDLE_S = 120.0                  # ... a kept-alive one between exports (an engine exports when requests end)
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

class _Export(http.server.BaseHTTPRequestHandler):
    """POST /v1/traces with a protobuf body (Content-Length; gzip or deflate allowed): kept, or dropped and counted
    with the status that says why. Python's own HTTP server parses the request (a thread per connection)."""

    kept: _Kept
    answer: bytes
    timeout = IDLE_S                 # a kept-alive connection quiet this long is closed
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (the handler's name is http.server's)
        status, why = self._status()
        if status != 200:
            self.kept.dropped()
            self._drain()
            self._reply(status, why.encode(), "text/plain")
            return
        body = _inflate(self.rfile.read(int(self.headers["Content-Length"])), self.headers.get("Content-Encoding"))
        if body is None or not self.kept.payload(body):
            self.kept.dropped() if body is None else None
            self._reply(400, b"not an OTLP ExportTraceServiceRequest", "text/plain")
            return
        self._reply(200, self.answer, "application/x-protobuf")

    def _status(self) -> tuple[int, str]:
        size = self.headers.get("Content-Length", "")
        if self.path.split("?")[0] != PATH:
            return 404, f"OTLP traces are taken at {PATH}"
        if self.headers.get_content_type() not in ("application/x-protobuf", "application/protobuf"):
            return 415, "OTLP/HTTP with protobuf bodies only (application/x-protobuf)"
        if not size.isdigit():
            return 411, "a Content-Length is needed"
        if int(size) > MAX_BODY:
            return 413, f"an export of at most {MAX_BODY} bytes"
        return 200, ""

    def _drain(self) -> None:
        """Read a refused body (up to DRAIN bytes), so the client reads the answer rather than a reset."""
        size = self.headers.get("Content-Length", "")
        left = int(size) if size.isdigit() and int(size) <= DRAIN else 0
        while left > 0 and (got := self.rfile.read(min(left, 2**20))):
            left -= len(got)

    def _reply(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        if status != 200:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:     # noqa: A002 (http.server's signature)
        return None


def _inflate(body: bytes, encoding: str | None) -> bytes | None:
    """The body as sent (identity), or decompressed (gzip, deflate) to at most MAX_BODY bytes; None otherwise."""
    if encoding in (None, "", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        return None
    inflater = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    try:
        out = inflater.decompress(body, MAX_BODY + 1)
    except zlib.error:
        return None
    return out if len(out) <= MAX_BODY and inflater.eof else None


def _http(kept: _Kept) -> int:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    handler = type("Export", (_Export,), {"kept": kept, "answer": ExportTraceServiceResponse().SerializeToString()})
    server = http.server.ThreadingHTTPServer((LOCAL, 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="otlp-http", daemon=True).start()
    return server.server_address[1]


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


class _Grpc:
    """The gRPC server, started on the first HTTP/2 connection (a run whose server exports over HTTP never loads
    grpcio)."""

    def __init__(self, kept: _Kept) -> None:
        self.kept = kept
        self.port: asyncio.Future[int] | None = None

    async def address(self) -> int:
        if self.port is None:
            self.port = asyncio.get_running_loop().run_in_executor(None, _grpc, self.kept)
        return await self.port


def _router(http_port: int, grpc: _Grpc) -> Callable:
    async def route(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = None
        try:
            head = await asyncio.wait_for(_head(reader), HEAD_S)
            if not head:
                return
            port = await grpc.address() if head == PREFACE else http_port
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
    server = await asyncio.start_server(_router(_http(kept), _Grpc(kept)), host, port, backlog=1024)
    return server, server.sockets[0].getsockname()[1]


def _answer(kept: _Kept) -> None:
    """Tokenbench's requests on stdin, one per line ("take": every span and count since the last, as one frame on
    stdout: 8 bytes of length, then JSON); EOF (tokenbench gone, or closing) ends the process."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if line.strip() != b"take":
            break
        got = kept.take()
        frame = msgspec.json.encode([[[s.trace_id, s.name, s.start_ns, s.end_ns, s.attributes] for s in got.spans],
                                     got.payloads, got.dropped_payloads, got.other_spans, got.overflow])
        out.write(len(frame).to_bytes(8, "big") + frame)
        out.flush()
    os._exit(0)


def _main(host: str, ports: PortRange) -> None:
    """The receiver's process: listen on the first port of `ports` it can bind (0..0: a free one), say `ready PORT`
    (or `error WHY`) on stdout, then answer on stdin. A Ctrl-C at the terminal is tokenbench's to handle: the
    receiver keeps what it has until tokenbench takes it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    kept = _Kept()
    loop = asyncio.new_event_loop()
    why = ""
    for port in ports:
        try:
            _, bound = loop.run_until_complete(_serve(kept, host, port))
            break
        except OSError as exc:
            why = str(exc.strerror or exc)
    else:
        print(f"error {why}" + (f" (every port of {ports.text})" if ports.lo != ports.hi else ""), flush=True)
        sys.exit(2)
    print(f"ready {bound}", flush=True)
    threading.Thread(target=_answer, args=(kept,), daemon=True).start()
    loop.run_forever()


# ---- tokenbench's side ----

def parse_listen(listen: str | None) -> tuple[str, PortRange]:
    """HOST:PORT or HOST:LO-HI (an IPv6 host in brackets) -> (host, ports); None -> 127.0.0.1 and a free port."""
    if not listen:
        return LOCAL, ANY
    try:
        return split_listen(listen)
    except ValueError as exc:
        raise UsageError(f"--otlp-listen {listen!r}: {exc}", "give e.g. 127.0.0.1:4318 (port 0: a free one) or "
                         "127.0.0.1:20000-20100") from None


class Receiver:
    """The running receiver: where servers send their spans, and `take()` for what came."""

    def __init__(self, proc: subprocess.Popen, host: str, port: int) -> None:
        self.proc, self.host, self.port = proc, host, port
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
        """Every span kept and every count since the last take (TargetError when the process is gone)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self.lock:
            try:
                self.proc.stdin.write(b"take\n")
                self.proc.stdin.flush()
                size = int.from_bytes(_exactly(self.proc.stdout, 8), "big")
                spans, *counts = msgspec.json.decode(_exactly(self.proc.stdout, size))
            except (OSError, ValueError, EOFError):
                raise TargetError("the OTLP receiver process is gone", "run again; the server's spans cannot "
                                  "be joined without it") from None
        return Received([Span(*s) for s in spans], *counts)

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _exactly(pipe, n: int) -> bytes:
    data = pipe.read(n)
    if len(data) != n:
        raise EOFError
    return data


def start(listen: str | None = None, within: PortRange | None = None) -> Receiver:
    """Start the receiver's process and wait until it listens (UsageError when the address cannot be bound): at
    `listen` (HOST:PORT or HOST:LO-HI), its port free of `within` (--ports) when it names none."""
    host, ports = parse_listen(listen)
    if ports.any and within is not None:
        ports = within
    port = ports.text
    proc = subprocess.Popen([sys.executable, "-m", __name__, host, str(ports.lo), str(ports.hi)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:          # it says `ready PORT` or `error WHY`, or exits (EOF)
        sel.register(proc.stdout, selectors.EVENT_READ)
        said = proc.stdout.readline().decode(errors="replace").split(" ", 1) if sel.select(START_S) else []
    if said[:1] != ["ready"]:
        proc.kill()
        proc.wait()
        why = said[1].strip() if said[:1] == ["error"] else f"it did not start within {START_S:g} s"
        raise UsageError(f"cannot listen for OTLP spans on {host}:{port}: {why}",
                         "give a free port with --otlp-listen HOST:PORT (0: any free port), or a range of free ones "
                         "(--otlp-listen HOST:LO-HI, --ports LO-HI)")
    return Receiver(proc, host, int(said[1]))


if __name__ == "__main__":
    _main(sys.argv[1], PortRange(int(sys.argv[2]), int(sys.argv[3])))
