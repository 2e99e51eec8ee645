from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    """Deployment state, results and the model cache of each test live in its own tmp dir."""
    monkeypatch.setenv("TOKENBENCH_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("TOKENBENCH_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("TOKENBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path
