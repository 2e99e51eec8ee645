from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    """Deployment state and default results of each test live in its own tmp dir."""
    monkeypatch.setenv("TOKENBENCH_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("TOKENBENCH_RESULTS", str(tmp_path / "results"))
    return tmp_path


@pytest.fixture(autouse=True)
def no_client_health_verdict(monkeypatch):
    """These tests are about failures and their exit codes, run in-process on a shared 2-core box where
    the event loop can lag for hundreds of ms; the client-health verdict (tests/metrics) would mark figures
    the documents under test compare. Here no figure is marked: a cell is what the error policy says."""
    monkeypatch.setattr("tokenbench.metrics.health.marks", lambda summary: {})
