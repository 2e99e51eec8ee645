"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def llamacpp_server(tmp_path_factory) -> Iterator:
    """The built-in `cpu-smollm2-llamacpp` profile deployed once per session on a free loopback port,
    through the deploy lifecycle; yields the `Deployment` (`.base_url`, `.facts`, `.log_path`).
    Torn down (process group SIGTERM, then SIGKILL) at the end of the session."""
    from tokenbench.deploy.lifecycle import deployed
    from tokenbench.deploy.profiles import load_profile

    profile = load_profile("cpu-smollm2-llamacpp")
    with deployed(profile, state_dir=tmp_path_factory.mktemp("deployments")) as dep:
        yield dep
