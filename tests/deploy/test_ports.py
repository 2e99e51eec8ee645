"""`deploy up` ports: the profile's `port` when set; else the engine's usual port (vLLM 8000, SGLang 30000,
llama.cpp 8080), and another free one only when that is taken, saying so."""

from __future__ import annotations

import os
import socket

import pytest

from tokenbench.deploy import lifecycle, profiles
from tokenbench.deploy.engines import engine_module
from tokenbench.errors import DeployError

from .helpers import CRASHER, write_profile


def test_each_engine_documents_its_usual_port():
    assert {e: engine_module(e).DEFAULT_PORT for e in ("vllm", "sglang", "llamacpp")} == \
        {"vllm": 8000, "sglang": 30000, "llamacpp": 8080}


def held(port: int) -> socket.socket | None:
    """A socket listening on 127.0.0.1:port, or None when something else already holds it."""
    s = socket.socket()
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
