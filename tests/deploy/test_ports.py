"""`deploy up` ports: the profile's `port` when set; else the engine's usual port (vLLM 8000, SGLang 30000,
llama.cpp 8080), and another free one only when that is taken, saying so. A port is taken when a socket
listens there (named with its pid and command), never by the TIME_WAIT sockets a stopped server left."""

from __future__ import annotations

import os
import socket
import time

import psutil
import pytest

from tokenbench.deploy import lifecycle, ports, profiles
from tokenbench.deploy.engines import engine_module
from tokenbench.errors import DeployError

from .helpers import CRASHER, write_profile


def test_each_engine_documents_its_usual_port():
    assert {e: engine_module(e).DEFAULT_PORT for e in ("vllm", "sglang", "llamacpp")} == \
        {"vllm": 8000, "sglang": 30000, "llamacpp": 8080}


def held(port: int) -> socket.socket | None:
    """A socket listening on 127.0.0.1:port, or None when something else already listens there. It binds
    as engines do (SO_REUSEADDR), so the TIME_WAIT sockets of an engine stopped there do not stop it."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    s.listen()
    return s


def test_a_taken_usual_port_gives_another_and_says_so(tmp_path):
    prof = profiles.load_profile(str(write_profile(tmp_path, code=CRASHER)), [])    # llamacpp: 8080
    busy = held(8080)                          # (or someone else holds it: taken either way)
    try:
        said: list[str] = []
        port = lifecycle.choose_port(prof, stable=True, say=said.append)
    finally:
        if busy:
            busy.close()
    assert port != 8080 and said == [f"port 8080 (the usual llamacpp port) is in use on 127.0.0.1; using {port}"]


def test_a_free_usual_port_is_used_and_an_explicit_port_is_never_replaced(tmp_path):
    prof = profiles.load_profile(str(write_profile(tmp_path, code=CRASHER)), [])
    probe = held(8080)
    if probe is None:
        pytest.skip("port 8080 is held by another process on this machine")
    probe.close()
    assert lifecycle.choose_port(prof, stable=True) == 8080
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        pinned = profiles.load_profile(str(write_profile(tmp_path, code=CRASHER)), [f"port={taken}"])
        with pytest.raises(DeployError, match=f"port {taken} on 127.0.0.1 is already in use"):
            lifecycle.choose_port(pinned, stable=True)


def test_deploy_status_prints_each_url_on_a_plain_line(tmp_path, monkeypatch, capsys):
    """A recorded deployment (this test's own pid stands in for the engine): its id and URL, pasteable."""
    from tokenbench.cli.main import main
    from tokenbench.deploy import state

    monkeypatch.setenv("TOKENBENCH_STATE", str(tmp_path))
    state.save(tmp_path, state.DeploymentState(
        id="tiny-8080", profile="tiny", engine="llamacpp", pid=os.getpid(), pgid=os.getpid(), create_time=0.0,
        host="127.0.0.1", port=1, base_url="http://127.0.0.1:1", log_path=str(tmp_path / "x.log"),
        started_at="now", argv=[]))
    assert main(["deploy", "status"]) == 0
    assert "tiny-8080 http://127.0.0.1:1" in capsys.readouterr().out.splitlines()


# ---- a fixed port: TIME_WAIT is free, a listener is named ----

def time_wait_port(reuse: bool = True) -> int:
    """A port where only TIME_WAIT sockets remain: a server that served a connection, closed it first
    (the server side keeps TIME_WAIT, as an engine does after serving requests), then stopped listening.
    `reuse`: it listened with SO_REUSEADDR, as uvicorn, cpp-httplib and docker-proxy do."""
    server = socket.socket()
    if reuse:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    for _ in range(3):
        client = socket.create_connection(("127.0.0.1", port))
        conn, _addr = server.accept()
        conn.close()                            # the server closes first: TIME_WAIT lands on its port
        assert client.recv(1) == b""            # the client saw the FIN ...
        client.close()                          # ... and answers with its own
    server.close()
    return port


def time_wait_on(port: int) -> bool:
    return any(c.status == psutil.CONN_TIME_WAIT and c.laddr.port == port
               for c in psutil.net_connections(kind="tcp"))


def wait_for_time_wait(port: int) -> None:
    deadline = time.monotonic() + 10
    while not time_wait_on(port) and time.monotonic() < deadline:   # the last FIN may still be in flight
        time.sleep(0.01)
    assert time_wait_on(port)


def test_time_wait_sockets_of_a_stopped_server_leave_the_port_free():
    port = time_wait_port()
    wait_for_time_wait(port)
    with socket.socket() as plain, pytest.raises(OSError):          # the old check's bind fails here ...
        plain.bind(("127.0.0.1", port))
    ports.check_port("127.0.0.1", port)                             # ... the new one does not
    assert ports.listener(port) is None
    with socket.socket() as engine:                                 # and an engine really can listen there
        engine.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        engine.bind(("127.0.0.1", port))
        engine.listen()


def test_time_wait_of_a_server_without_so_reuseaddr_is_named_as_such():
    """No engine can bind over these (the kernel refuses even with SO_REUSEADDR): the port is not free,
    and the error says why and that it passes, instead of blaming a listener that does not exist."""
    port = time_wait_port(reuse=False)
    wait_for_time_wait(port)
    with pytest.raises(DeployError) as exc:
        ports.check_port("127.0.0.1", port)
    assert "held by closing connections of a server that listened without SO_REUSEADDR" in exc.value.message
    assert exc.value.hint.startswith("wait about 60 s")


@pytest.mark.parametrize("where", ["127.0.0.1", "0.0.0.0"])
def test_a_real_listener_is_named_with_its_pid_and_command(where):
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)    # as engines do: still taken
        busy.bind((where, 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(DeployError) as exc:
            ports.check_port("127.0.0.1", port)
    me = psutil.Process().cmdline()
    assert exc.value.message.startswith(f"port {port} on 127.0.0.1 is already in use: ")
    assert f"(pid {os.getpid()}) listens on {where}:{port}" in exc.value.message
    assert os.path.basename(me[0]) in exc.value.message and "\n" not in exc.value.message
    assert exc.value.hint.startswith(f"stop it (`kill {os.getpid()}`), or pick another with --set port=N")


def test_a_listener_of_a_recorded_deployment_is_named_by_its_id(tmp_path):
    from tokenbench.deploy import state

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        state.save(state.state_dir(), state.DeploymentState(           # this process stands in for the engine
            id=f"tiny-{port}", profile="tiny", engine="llamacpp", pid=os.getpid(), pgid=os.getpgid(0),
            create_time=0.0, host="127.0.0.1", port=port, base_url=f"http://127.0.0.1:{port}",
            log_path=str(tmp_path / "x.log"), started_at="now", argv=[]))
        with pytest.raises(DeployError) as exc:
            ports.check_port("127.0.0.1", port)
    assert f"(deployment tiny-{port}, pid {os.getpid()})" in exc.value.message
    assert exc.value.hint.startswith(f"stop it with `tokenbench deploy down tiny-{port}`")


def test_a_bound_socket_that_does_not_listen_is_reported_as_such():
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        with pytest.raises(DeployError) as exc:
            ports.check_port("127.0.0.1", port)
    assert "by a socket that does not listen" in exc.value.message and f"sport = :{port}" in exc.value.hint


def test_an_address_not_of_this_host_is_said_so():
    with pytest.raises(DeployError, match="192.0.2.1 is not an address of this host"):
        ports.check_port("192.0.2.1", 8080)                 # TEST-NET-1: never assigned to a host
