"""The results database on the oldest SQLite tokenbench supports (README, "Requirements"): the store's tests
and the scenario of test_store_scenario.py (figures that are not numbers, a dead port, a server that dies
mid-cell, report, export, compare, resume) run again in a child process whose standard sqlite3 module loads
SQLite 3.38.3, built by scripts/old-sqlite.sh (`make test` runs it) into $TOKENBENCH_CACHE. Without that
build the test is skipped and says why, except under CI (CI=true), where it fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokenbench import userdirs

from .test_store_scenario import SQLITE_ASKED

pytestmark = pytest.mark.slow   # a child pytest: reference servers and a bench killed mid-cell

OLDEST = "3.38.3"
HERE = Path(__file__).resolve().parent
TESTS = ["test_store_scenario.py", "test_store_not_defined.py", "test_store_schema.py", "test_store_reservoir.py"]


def library_dir() -> Path:
    where = userdirs.cache_root() / f"sqlite-{OLDEST}"
    if not (where / "libsqlite3.so.0").is_file():
        why = f"SQLite {OLDEST} is not built in {where}: run `bash scripts/old-sqlite.sh` (make test does)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return where


@pytest.mark.timeout(900)
def test_the_store_on_the_oldest_supported_sqlite(tmp_path):
    lib = library_dir()
    env = {**os.environ, "LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}".rstrip(":"),
           SQLITE_ASKED: OLDEST}
    version = subprocess.run([sys.executable, "-c", "import sqlite3; print(sqlite3.sqlite_version)"], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == OLDEST
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "",
                          *(str(HERE / t) for t in TESTS)], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
