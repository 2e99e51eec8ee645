"""Fixtures for the monitor tests: a fake tool on PATH, a tiny /metrics server."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

import pytest

from .helpers import MetricsServer


@pytest.fixture
def fake_tool(tmp_path, monkeypatch):
    """Put a shell script named `name` on a PATH that holds nothing else."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    outer_path = os.environ.get("PATH", "")
    monkeypatch.setenv("PATH", str(bin_dir))

    def make(name: str, body: str):
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\nexport PATH='{outer_path}'\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return path

    return make


@pytest.fixture
def metrics_server() -> Iterator[MetricsServer]:
    with MetricsServer() as server:
        yield server
