"""The OTLP receiver (monitor/otlp_receiver.py), a process of its own on real sockets: bound to 127.0.0.1 unless
asked, one port for HTTP/protobuf and gRPC, and every malformed or hostile payload dropped with a count while the
receiver goes on taking good ones. Slow tier (it starts a process)."""

from __future__ import annotations

import gzip
import socket
import urllib.error
import urllib.request

import grpc
import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.monitor.test_otlp import export, gen_ai, span
from tokenbench.errors import UsageError
from tokenbench.monitor.otlp_receiver import MAX_BODY, PREFACE, Receiver, start

pytestmark = pytest.mark.slow

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture(scope="module")
def receiver():
    with start() as r:
        yield r


def post(r: Receiver, body: bytes, content_type: str = "application/x-protobuf", **headers: str) -> int:
    ask = urllib.request.Request(r.http_endpoint, data=body, headers={"Content-Type": content_type, **headers})
    try:
        with urllib.request.urlopen(ask, timeout=20) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def grpc_export(r: Receiver, body: bytes) -> grpc.StatusCode:
    with grpc.insecure_channel(r.address) as channel:
        try:
            channel.unary_unary(EXPORT)(body, timeout=20)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def good(trace: int) -> bytes:
    return export(span(trace.to_bytes(16, "big"), start=1, end=2, **gen_ai(time_to_first_token=0.1)))


def raw(r: Receiver, data: bytes) -> bytes:
    with socket.create_connection((r.host, r.port), timeout=20) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def test_it_listens_on_the_loopback_only_unless_asked(receiver):
    listening = [c.laddr for c in psutil.Process(receiver.proc.pid).net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == receiver.port]
    assert listening and all(a.ip == "127.0.0.1" for a in listening)


def test_one_port_takes_http_and_grpc_exports(receiver):
    receiver.take()
    assert post(receiver, good(1)) == 200
    assert grpc_export(receiver, good(2)) == grpc.StatusCode.OK
    got = receiver.take()
    assert sorted(s.trace_id for s in got.spans) == [(1).to_bytes(16, "big").hex(), (2).to_bytes(16, "big").hex()]
    assert (got.payloads, got.dropped_payloads) == (2, 0)


def test_hostile_payloads_are_dropped_with_a_count_and_good_ones_still_arrive(receiver):
    receiver.take()
    assert post(receiver, b"\xff" * 64) == 400
    assert post(receiver, good(3)[:-5]) == 400
    assert post(receiver, good(3), "application/json") == 415
    assert post(receiver, b"\0" * (MAX_BODY + 1)) == 413
    bomb = gzip.compress(b"\0" * (MAX_BODY * 4))
    assert post(receiver, bomb, **{"Content-Encoding": "gzip"}) in (400, 413)
    assert grpc_export(receiver, b"\xff" * 64) == grpc.StatusCode.INVALID_ARGUMENT
    raw(receiver, PREFACE + b"\xff" * 512)               # an HTTP/2 connection that is no gRPC
    raw(receiver, b"\x16\x03\x01\x00\xa5" + b"\0" * 200)  # a TLS hello to a plain port
    raw(receiver, b"")                                    # a connection that says nothing
    got = receiver.take()
    assert got.dropped_payloads == 6 and got.payloads == 6 and not got.spans
    assert post(receiver, good(4)) == 200 and grpc_export(receiver, good(5)) == grpc.StatusCode.OK
    assert len(receiver.take().spans) == 2 and receiver.proc.poll() is None


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=2048), st.booleans())
def test_any_payload_over_either_transport_is_taken_or_counted(receiver, body, over_grpc):
    receiver.take()
    ok = grpc_export(receiver, body) == grpc.StatusCode.OK if over_grpc else post(receiver, body) == 200
    got = receiver.take()
    assert got.payloads == 1 and got.dropped_payloads == (0 if ok else 1)
    assert receiver.proc.poll() is None


def test_a_taken_port_is_one_line_with_the_fix(receiver):
    with pytest.raises(UsageError) as exc:
        start(f"127.0.0.1:{receiver.port}")
    assert "--otlp-listen" in exc.value.one_line()


def test_it_listens_where_asked(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with start(f"127.0.0.1:{port}") as r:
        assert r.port == port and post(r, good(9)) == 200
        assert [s.trace_id for s in r.take().spans] == [(9).to_bytes(16, "big").hex()]


def test_a_compressed_export_is_taken_and_a_ctrl_c_at_the_terminal_is_not_the_receivers(receiver):
    import signal

    receiver.take()
    assert post(receiver, gzip.compress(good(7)), **{"Content-Encoding": "gzip"}) == 200
    assert post(receiver, good(8), **{"Content-Encoding": "br"}) == 400
    receiver.proc.send_signal(signal.SIGINT)          # what the terminal sends the whole process group
    got = receiver.take()
    assert [s.trace_id for s in got.spans] == [(7).to_bytes(16, "big").hex()] and got.dropped_payloads == 1
    assert receiver.proc.poll() is None
