"""A figure that is not a number (NaN, infinity: no TPOT with one output token, no latency when every request
failed) is "not defined": stored as null and read back as None everywhere (summary, rows, export, import,
report). A database the last release wrote with NaN in its JSON, which SQLite before 3.42 refuses, is repaired
when it is opened (schema 8): tests/fixtures/store/release-0.1.0-nan.db, its making in SOURCES.md there."""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenbench.cli.main import main
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow
from tokenbench.store.schema import NAN_COLUMNS, SCHEMA_VERSION

FIXTURE = Path(__file__).parents[1] / "fixtures" / "store" / "release-0.1.0-nan.db"
OUT1, ALL_FAILED, DIED = "20261204-210803-77802f", "20261204-210805-506a64", "20261204-210809-a1fcfa"
FLOATS = sorted(k for k, f in CellSummary.model_fields.items() if f.annotation == (float | None))


def legacy(tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    shutil.copyfile(FIXTURE, path)
    return path


def _refuse(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def strict(text: str):
    """JSON as RFC 8259 has it: NaN, Infinity and -Infinity refused."""
    return json.loads(text, parse_constant=_refuse)


def test_the_last_release_wrote_nan_that_sqlite_before_3_42_refuses(tmp_path):
    con = sqlite3.connect(legacy(tmp_path))
    texts = [r[0] for r in con.execute("SELECT summary_json FROM cells")]
    assert sum("NaN" in t for t in texts) == 2
    if sqlite3.sqlite_version_info < (3, 42):
        try:
            con.execute("SELECT json_extract(summary_json, '$.completed') FROM cells").fetchall()
        except sqlite3.OperationalError as exc:
            assert "malformed JSON" in str(exc)
        else:
            raise AssertionError("this SQLite read NaN in JSON")


def test_it_opens_repaired_and_every_figure_reads_back(tmp_path):
    store = Store(legacy(tmp_path))
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    for table, columns in NAN_COLUMNS.items():
        for column in columns:
            for (text,) in store.db.execute(f"SELECT {column} FROM {table}"):
                strict(text)
    assert [r.id for r in store.runs()] == [OUT1, ALL_FAILED, DIED]
    assert store.db.execute("SELECT COUNT(*) FROM cells WHERE json_extract(summary_json, '$.mean_tpot_ms') IS NULL"
                            ).fetchone()[0] == 2
    [one] = store.cells(OUT1)
    s = one.summary
    assert s.mean_tpot_ms is None and s.p99_itl_ms is None and s.std_tpot_ms is None
    assert s.mean_ttft_ms is not None and s.mean_ttft_ms > 0 and s.completed == 8
    [failed] = store.cells(ALL_FAILED)
    assert failed.summary.mean_ttft_ms is None and failed.summary.failed == 8 and failed.status == "failed"
    assert store.done_keys(DIED) == set() and store.done_keys(OUT1) == {("default", one.key, 0)}


def test_runs_report_export_import_and_compare_read_it(tmp_path, capsys):
    db = str(legacy(tmp_path))
    assert main(["runs", "--db", db, "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [OUT1, ALL_FAILED, DIED]
    for run in (OUT1, ALL_FAILED, DIED):
        assert main(["report", run, "--db", db, "--output", str(tmp_path / run)]) == 0
        assert main(["export", run, "--db", db, "--format", "json", "--requests", "-o", str(tmp_path / f"{run}.json")]) == 0
        assert main(["export", run, "--db", db, "--format", "csv", "-o", str(tmp_path / f"{run}.csv")]) == 0
    doc = strict((tmp_path / f"{OUT1}.json").read_text())
    [cell] = doc["cells"]
    assert cell["mean_tpot_ms"] is None and cell["mean_ttft_ms"] > 0
    assert all(r["tpot_ms"] is None for r in cell["requests"])
    md = (tmp_path / OUT1 / "report.md").read_text()
    assert not re.search(r"\b(nan|inf|infinity)\b", md, re.IGNORECASE)
    assert main(["compare", OUT1, DIED, "--db", db, "--output", str(tmp_path / "cmp")]) == 0
    assert main(["import", str(tmp_path / f"{OUT1}.json"), "--db", str(tmp_path / "again.db")]) == 0
    [run] = Store(tmp_path / "again.db").runs()
    [again] = Store(tmp_path / "again.db").cells(run.id)
    assert again.summary.mean_tpot_ms is None and again.summary.mean_ttft_ms == cell["mean_ttft_ms"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=st.dictionaries(st.sampled_from(FLOATS), st.sampled_from([math.nan, math.inf, -math.inf]), min_size=1),
       good=st.dictionaries(st.sampled_from(FLOATS), st.floats(-1e300, 1e300, allow_nan=False)))
def test_a_figure_that_is_not_a_number_is_stored_as_null_and_read_back_as_not_defined(tmp_path, bad, good):
    good = {k: v for k, v in good.items() if k not in bad}
    summary = CellSummary.model_validate({**good, **bad})
    assert all(getattr(summary, k) is None for k in bad)               # fresh, it is already "not defined"
    store = Store(tmp_path / f"p{len(bad)}-{len(good)}.db")
    run = store.create_run("bench", "http://x", {"bad": list(bad.values())}, [], {"x": math.nan})
    config = store.upsert_config(run, "default")
    key = f"8:4/c={store.db.execute('SELECT COUNT(*) FROM cells').fetchone()[0] + 1}"
    store.save_cell(run, config, CellRow(key=key, input_len=8, output_len=4, status="ok", summary=summary), [],
                    [(1, "server", "x", math.nan, "{}")])
    [row] = [c for c in store.cells(run) if c.key == key]
    assert {k: getattr(row.summary, k) for k in bad} == dict.fromkeys(bad)
    assert {k: getattr(row.summary, k) for k in good} == good
    assert store.run(run).environment == {"x": None} and store.run(run).spec == {"bad": [None] * len(bad)}
    for (text,) in store.db.execute("SELECT summary_json FROM cells"):
        strict(text)


def test_a_capacity_search_holding_nan_is_stored_and_read_back_with_it(tmp_path):
    """A search record's required numbers (a load, the precision, a check's value) held as NaN are stored as
    null and read back as NaN: the search stays in view (it was dropped as unreadable), and its other fields
    are read as stored."""
    from tokenbench.metrics.capacity import LoadVerdict, SearchRecord, Tier, Tried

    tier = Tier.model_validate({"name": "slo", "limits": "ttft:p99<=200"})
    record = SearchRecord(workload="150:16", dimension="rate", tiers=[tier], budget=6, precision=math.nan,
                          tried=[Tried(key="150:16/r=nan", repeat=1, role="bracket", load=math.nan, status="failed",
                                       verdicts=[])],
                          loads=[LoadVerdict(load=2.0, cells=1, verdicts=[])])
    store = Store(tmp_path / "r.db")
    run = store.create_run("sweep", "http://x", {}, [], {})
    store.save_search(run, store.upsert_config(run, "default"), record)
    [row] = store.searches(run)
    got = row.record
    assert math.isnan(got.precision) and math.isnan(got.tried[0].load)
    assert (got.workload, got.budget, got.tried[0].key, got.loads[0].load) == ("150:16", 6, "150:16/r=nan", 2.0)
    assert json.loads(sqlite3.connect(tmp_path / "r.db").execute("SELECT record_json FROM searches")
                      .fetchone()[0])["precision"] is None             # JSON that every SQLite reads
