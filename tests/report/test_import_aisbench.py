"""AISBench perf outputs imported from a real capture: `ais_bench --mode perf` (ais-bench-benchmark
3.1.20260630, VLLMCustomAPI streaming, synthetic tokenid dataset, 8 requests at concurrency 2, 16 output
tokens, ignore_eos) against tokenbench's reference server (TTFT 100 ms, ITL 20 ms), with its per-request
time points (db_data/). Then `report` and `compare` of the imported run like any other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.errors import UsageError
from tokenbench.formats import aisbench as import_aisbench
from tokenbench.formats.importers import detect, import_file
from tokenbench.judge.cells import pair_of
from tokenbench.judge.views import load_run

from .report_fixtures import FIXTURES as REPORT_FIXTURES

CAPTURE = Path(__file__).parents[1] / "fixtures" / "aisbench" / "performances" / "tb-reference"


@pytest.mark.parametrize("name", ["", "synthetic.csv", "synthetic.json", "synthetic_details.jsonl"])
def test_the_folder_or_any_of_its_files_names_the_result(name):
    path = CAPTURE / name if name else CAPTURE
    assert detect(path) == "aisbench"
    res = import_aisbench.read(path)
    assert (res.model, res.dataset, len(res.details)) == ("tb-reference", "synthetic", 8)
    assert [f.name for f in res.files] == ["synthetic.csv", "synthetic.json", "synthetic_details.jsonl",
                                           "969745dc.db"]


def test_fields_map_onto_tokenbench_names_with_units_converted(store):
    run = load_run(store, import_file(store, CAPTURE), requests=False)
    [cell] = run.cells
    s = cell.summary.to_dict()
    assert (run.kind, run.configs[0].name, cell.concurrency, pair_of(cell)) == ("import", "tb-reference", 2, (16, 16))
    assert (s["completed"], s["failed"], s["num_prompts"]) == (8, 0, 8)
    assert (s["total_input_tokens"], s["total_output_tokens"]) == (130, 128)
    assert s["duration"] == pytest.approx(1.6389733)                   # "1638.9733 ms"
    assert (s["mean_ttft_ms"], s["p99_ttft_ms"], s["median_tpot_ms"]) == (109.6, 120.3, 19.8)
    assert (s["mean_itl_ms"], s["min_itl_ms"], s["p75_e2el_ms"]) == (19.8, 9.3, 406.9)
    assert (s["request_throughput"], s["output_throughput"]) == (4.8811, 78.0977)
    assert s["achieved_concurrency"] == 1.9837
    assert 100 <= s["mean_ttft_ms"] <= 125 and 19.0 <= s["mean_tpot_ms"] <= 20.5   # the reference server's truth


def test_per_request_records_come_from_the_time_points(store):
    """Each details line becomes a record on AISBench's own stamps; tokenbench's formulas over them give
    back the figures AISBench printed (its CSV rounds to 0.1 ms)."""
    run_id = import_file(store, CAPTURE)
    [cell] = load_run(store, run_id, requests=False).cells
    recs = store.sampled_requests(cell.id)
    assert len(recs) == 8 and all(r.ok and len(r.token_times_ns) == 16 for r in recs)
    assert sorted(r.completion_tokens for r in recs) == [16] * 8 and sum(r.prompt_tokens for r in recs) == 130
    assert min(r.sent_ns for r in recs) == 0
    s = cell.summary.to_dict()
    ttfts = sorted(r.ttft_ns / 1e6 for r in recs)
    assert sum(ttfts) / 8 == pytest.approx(s["mean_ttft_ms"], abs=0.05)                # 109.6
    assert (ttfts[0], ttfts[-1]) == (pytest.approx(s["min_ttft_ms"], abs=0.05), pytest.approx(s["max_ttft_ms"],
                                                                                            abs=0.05))
    gaps = [(b - a) / 1e6 for r in recs for a, b in zip(r.token_times_ns, r.token_times_ns[1:], strict=False)]
    assert len(gaps) == 8 * 15 and min(gaps) == pytest.approx(s["min_itl_ms"], abs=0.05)   # 9.3
    assert "p95_ttft_ms" in s and "std_itl_ms" in s and s["mean_ttft_ms"] == 109.6   # filled in; AISBench's kept
    assert s["derived"] and "AISBench does not print" in s["derived"][0]


def test_details_without_the_database_import_the_summary_only(store, tmp_path):
    for f in CAPTURE.glob("synthetic*"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    [cell] = load_run(store, import_file(store, tmp_path), requests=False).cells
    assert store.sampled_requests(cell.id) == [] and "p95_ttft_ms" not in cell.summary.to_dict()


def test_a_failed_request_is_kept_as_a_failure():
    res = import_aisbench.read(CAPTURE)
    res.details[3] = {**res.details[3], "success": False, "error_info": "Bad Gateway"}
    recs = import_aisbench.records(res, 16, 16)
    assert [r.ok for r in recs].count(False) == 1
    bad = next(r for r in recs if not r.ok)
    assert (bad.error_kind, bad.error_detail, bad.token_times_ns) == ("imported_error", "Bad Gateway", [])


def test_report_and_compare_of_the_imported_run(db_path, tmp_path, capsys):
    assert main(["import", str(CAPTURE), "--db", str(db_path), "--engine", "reference"]) == 0
    assert main(["import", str(REPORT_FIXTURES / "vllm-bench-serve.json"), "--db", str(db_path)]) == 0
    ids = re.findall(r"\d{8}-\d{6}-[0-9a-f]{6}", capsys.readouterr().out)
    assert len(ids) == 2
    assert main(["report", ids[0], "--db", str(db_path), "-o", str(tmp_path / "r"), "--lang", "zh"]) == 0
    page = (tmp_path / "r" / "report.zh.md").read_text()
    assert "tb-reference" in page and "109.6" in page
    assert list((tmp_path / "r").glob("timeline*.svg")) and "120.8" in page   # per request: the slowest TTFT
    assert main(["compare", ids[0], ids[1], "--db", str(db_path), "-o", str(tmp_path / "c")]) == 0
    assert "tb-reference" in (tmp_path / "c" / "compare.md").read_text()


def test_a_folder_with_two_datasets_asks_for_one(tmp_path):
    for name in ("a.csv", "b.csv"):
        (tmp_path / name).write_text((CAPTURE / "synthetic.csv").read_text())
    with pytest.raises(UsageError, match="2 AISBench datasets"):
        import_aisbench.read(tmp_path)


def test_units_are_read():
    assert import_aisbench.value("104.4 ms") == (104.4, "ms")
    assert import_aisbench.value("39.3772 token/s") == (39.3772, "token/s")
    assert import_aisbench.value(8) == (8.0, "") and import_aisbench.value("n/a") == (None, "")
