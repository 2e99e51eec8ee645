"""runs and export: the run list, cell summaries with vLLM-style keys, per-request rows."""

from __future__ import annotations

import csv
import io
import json

from tokenbench.cli.main import main


def test_runs_json(stored_run, db_path, capsys):
    assert main(["runs", "--db", str(db_path), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row == {"id": stored_run, "date": "2026-01-02T03:04:05+00:00", "name": "", "kind": "sweep",
                   "target": "http://127.0.0.1:8000", "cells_done": 12, "cells_total": 12, "status": "done",
                   "verdict": "ok", "message": ""}
    assert main(["runs", "--db", str(db_path)]) == 0
    assert "12/12" in capsys.readouterr().out


def test_export_json_cells_and_requests(stored_run, db_path, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["export", stored_run, "--db", str(db_path), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["run"]["id"] == stored_run and len(doc["cells"]) == 12 and "requests" not in doc["cells"][0]
    cell = doc["cells"][0]
    for key in ("request_throughput", "output_throughput", "total_token_throughput", "mean_ttft_ms",
                "p99_ttft_ms", "median_e2el_ms", "p90_e2el_ms", "config", "over_capacity", "kv_demand"):
        assert key in cell, key
    prints = {c["name"]: c["fingerprint"] for c in doc["configs"]}       # what compare and the gate tell apart
    assert set(prints) == {c["config"] for c in doc["cells"]}
    assert {p["engine"] for p in prints.values()} == {"llamacpp"} and all(p["version"] == "b6500" for p in prints.values())
    assert main(["export", stored_run, "--db", str(db_path), "--requests"]) == 0
    doc = json.loads(capsys.readouterr().out)
    reqs = doc["cells"][0]["requests"]
    assert len(reqs) == 2 and reqs[0]["ttft_ms"] > 0 and "token_offsets_ns" in reqs[0]


def test_export_csv(stored_run, db_path, capsys):
    assert main(["export", stored_run, "--db", str(db_path), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 12
    assert list(rows[0])[:4] == ["config", "key", "repeat", "input_len"]
    assert float(rows[0]["request_throughput"]) > 0 and rows[0]["failed_by_kind"].startswith("{")
    assert main(["export", stored_run, "--db", str(db_path), "--format", "csv", "--requests"]) == 0
    reqs = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(reqs) == 2 * 2 * (2 + 4 + 8)
    failed = [r for r in reqs if r["error_kind"]]
    assert len(failed) == 1 and failed[0]["error_kind"] == "timeout" and failed[0]["ttft_ms"] == ""


def test_export_unknown_run(db_path, stored_run, capsys):
    assert main(["export", "nope", "--db", str(db_path), "--format", "csv"]) == 6
    assert "no run 'nope'" in capsys.readouterr().err
