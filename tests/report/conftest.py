"""Fixtures of the report tests: a temporary results database holding one fixed stored run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenbench.store.db import Store

from .report_fixtures import build_run


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "results" / "tokenbench.db"


@pytest.fixture
def store(db_path):
    s = Store(db_path)
    yield s
    s.close()


@pytest.fixture
def stored_run(store) -> str:
    return build_run(store)
