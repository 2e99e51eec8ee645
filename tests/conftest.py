"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _session_cwd_in_tmp(tmp_path_factory) -> Iterator[None]:
    """Session fixtures (engines, servers) start in an empty directory, never in the checkout."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("session-cwd"))
        yield


@pytest.fixture(autouse=True)
def _cwd_in_tmp(tmp_path_factory, monkeypatch) -> None:
    """No test writes into the current directory: each runs in a fresh empty one (not its tmp_path, which
    a test may list), and reads its own files by paths relative to its test file."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def _results_and_state_in_tmp(tmp_path, monkeypatch):
    """No test writes to the user's results database or deployment state (tokenbench/userdirs.py):
    both default to this test's tmp dir. The engine cache ($TOKENBENCH_CACHE) is left as it is."""
    monkeypatch.setenv("TOKENBENCH_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("TOKENBENCH_STATE", str(tmp_path / "state"))


@pytest.fixture(autouse=True)
def _client_health_only_where_tested(request, monkeypatch):
    """The client-health verdict marks the figures the client's own delays could move beyond the accuracy
    it claims (about 1 ms), which a shared 2-core test machine rarely grants; a test about something else
    must not turn on which figures are marked. Tests of the verdict itself are marked `client_health` and
    keep it (tests/metrics/test_client_health*.py). Patched: no figure is marked."""
    if request.node.get_closest_marker("client_health") is None:
        monkeypatch.setattr("tokenbench.metrics.health.marks", lambda summary: {})


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
