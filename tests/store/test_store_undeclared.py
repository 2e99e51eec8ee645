"""A summary holds no key its class does not declare: keys of other tools' results that no field declares (an
imported p99.9) sit in its one field `undeclared`, are written flat as they came, and a summary an older
version stored with such keys flat (any key was accepted then) reads back the same:
tests/fixtures/store/undeclared-keys-0d624d8.db, its making in SOURCES.md there."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tokenbench.cli.main import main
from tokenbench.metrics.cell_summary import GROUPS, CellSummary
from tokenbench.store.db import Store

FIXTURE = Path(__file__).parents[1] / "fixtures" / "store" / "undeclared-keys-0d624d8.db"
RUN = "20261207-152446-ff8cc2"
THEIRS = {"p25_ttft_ms": 52.0, "p99.9_ttft_ms": 84.0, "p99.9_e2el_ms": 146.64}


def older(tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    shutil.copyfile(FIXTURE, path)
    return path


def stored_json(path: Path) -> dict:
    [(text,)] = sqlite3.connect(path).execute("SELECT summary_json FROM cells").fetchall()
    return json.loads(text)


def test_an_older_stored_summary_reads_back_with_its_undeclared_keys_in_one_field(tmp_path):
    path = older(tmp_path)
    flat = stored_json(path)
    assert {k: flat[k] for k in THEIRS} == THEIRS                         # stored flat by the older version
    [cell] = Store(path).cells(RUN)
    s = cell.summary
    assert s.undeclared == THEIRS and s.mean_ttft_ms == flat["mean_ttft_ms"] and s.completed == flat["completed"]
    assert s.to_dict() == flat and list(s.to_dict()) == list(flat)       # written back as it was, in its order


def test_export_import_and_report_keep_them(tmp_path):
    db = str(older(tmp_path))
    for fmt in ("json", "csv"):
        out = tmp_path / f"run.{fmt}"
        assert main(["export", RUN, "--db", db, "--format", fmt, "-o", str(out)]) == 0
        again = tmp_path / f"again-{fmt}.db"
        assert main(["import", str(out), "--db", str(again)]) == 0
        [run] = Store(again).runs()
        [cell] = Store(again).cells(run.id)
        assert cell.summary.undeclared == THEIRS, fmt
    assert main(["report", RUN, "--db", db, "--output", str(tmp_path / "report")]) == 0


def test_a_summary_refuses_a_key_no_field_declares():
    with pytest.raises(ValidationError, match="extra"):
        CellSummary.model_validate({"completed": 3, "p99.9_ttft_ms": 84.0})
    with pytest.raises(ValidationError, match="extra"):
        CellSummary(completed=3, p99_9_ttft_ms=84.0)                      # type: ignore[call-arg]
    assert CellSummary.from_dict({"completed": 3, "p99.9_ttft_ms": 84.0}).undeclared == {"p99.9_ttft_ms": 84.0}


DECLARED = set(CellSummary.model_fields) | {k for g in GROUPS.values() for k in g.key_names()}
NAMES = st.text("abcdefghijklmnopqrstuvwxyz_.0123456789", min_size=1, max_size=12).filter(lambda k: k not in DECLARED)
VALUES = st.one_of(st.none(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
                   st.text(max_size=8), st.lists(st.integers(0, 9), max_size=3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(theirs=st.dictionaries(NAMES, VALUES, max_size=5))
def test_undeclared_keys_come_back_flat_as_they_came(theirs):
    flat = {"completed": 3, "mean_ttft_ms": 12.5, **theirs}
    s = CellSummary.from_dict(flat)
    assert s.undeclared == theirs and s.to_dict() == flat
    assert CellSummary.from_dict(s.to_dict()) == s
