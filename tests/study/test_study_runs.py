"""bench and sweep run as one study against the reference server: vocabulary from a flag or the YAML,
vLLM-format result files, bench --resume running only the cells not stored."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow

# a real result file of `vllm bench serve --save-result` (vLLM 0.32 CPU, random 128:64, --max-concurrency 8,
# --num-prompts 32, --goodput ttft:500 tpot:50, default percentile metrics ttft,tpot,itl and percentile 99)
REAL = json.loads((Path(__file__).parent / "fixtures" / "vllm-0.32-bench-serve-result.json").read_text())
VLLM_KEYS = {k for k in REAL if not k.startswith(("mean_", "median_", "std_", "p99_"))}
DETAILED = {"input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors"}


@pytest.fixture(scope="module")
def mute():
    """A server that does not report its vocabulary (only --vocab-size makes exact prompts possible)."""
    with ReferenceProcess(ReferenceConfig(ttft_ms=2, itl_ms=5, report_vocab=False)) as ref:
        yield ref.url


@pytest.fixture(scope="module")
def ref():
    with ReferenceProcess(ReferenceConfig(ttft_ms=2, itl_ms=5)) as ref:
        yield ref.url


def cells(db) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT id, key, status FROM cells ORDER BY id").fetchall()
    finally:
        con.close()


def test_sweep_against_a_server_without_vocabulary(mute, tmp_path, capsys):
    db = str(tmp_path / "r.db")
    grid = ["--pairs", "16:4", "--concurrency", "1,2", "--num-prompts", "4", "--db", db]
    assert main(["sweep", "--base-url", mute, *grid]) == 3
    assert "--vocab-size" in capsys.readouterr().err
    assert main(["sweep", "--base-url", mute, "--vocab-size", "32000", *grid]) == 0
    (tmp_path / "s.yaml").write_text(f"target: {{base_url: '{mute}'}}\nworkload: {{vocab_size: 32000}}\n"
                                     "pairs: [[16, 4]]\nconcurrency: [1, 2]\nrequests: {num_prompts: 4}\n")
    assert main(["sweep", str(tmp_path / "s.yaml"), "--db", db]) == 0
    assert [k for _, k, _ in cells(db)] == ["16:4/c=1", "16:4/c=2"] * 2      # both runs measured every cell


def test_save_result_writes_vllm_keys(ref, tmp_path):
    out = tmp_path / "out"
    args = ["bench", "--base-url", ref, "--dataset-name", "random", "--random-input-len", "16",
            "--random-output-len", "8", "--max-concurrency", "4", "--num-prompts", "8", "--save-result",
            "--result-dir", str(out), "--goodput", "ttft:500", "tpot:50", "--percentile-metrics", "ttft,tpot,itl,e2el",
            "--metric-percentiles", "50,99", "--no-store"]
    assert main(args) == 0
    (path,) = out.iterdir()
    assert path.name.startswith("tokenbench-infqps-concurrency4-reference-model-")
    doc = json.loads(path.read_text())
    stats = {f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in ("mean", "median", "std", "p50", "p99")}
    assert set(doc) == VLLM_KEYS | stats
    assert (doc["completed"], doc["num_prompts"], doc["max_concurrency"], doc["request_rate"]) == (8, 8, 4, "inf")
    assert doc["total_output_tokens"] == 64 and doc["request_goodput"] > 0
    assert main(args + ["--save-detailed", "--result-filename", "x.json"]) == 0
    detailed = json.loads((out / "x.json").read_text())
    assert set(detailed) == VLLM_KEYS | stats | DETAILED and detailed["output_lens"] == [8] * 8


def test_save_result_has_the_keys_of_a_real_vllm_result_in_its_order(ref, tmp_path):
    """The acceptance command of issue 17, against the reference server: same keys, same order."""
    args = ["bench", "--base-url", ref, "--dataset-name", "random", "--random-input-len", "128",
            "--random-output-len", "64", "--max-concurrency", "8", "--num-prompts", "32", "--save-result",
            "--result-dir", str(tmp_path), "--goodput", "ttft:500", "tpot:50", "--no-store"]
    assert main(args) == 0
    (path,) = tmp_path.glob("*.json")
    doc = json.loads(path.read_text())
    assert list(doc) == list(REAL)
    assert {k: doc[k] for k in ("num_prompts", "request_rate", "burstiness", "max_concurrency", "completed")} == \
        {k: REAL[k] for k in ("num_prompts", "request_rate", "burstiness", "max_concurrency", "completed")}


def test_bench_resume_runs_only_the_missing_cells(ref, tmp_path, capsys):
    db = str(tmp_path / "r.db")
    assert main(["bench", "--base-url", ref, "--input-len", "8", "--output-len", "4", "--concurrency", "1,2",
                 "--num-prompts", "4", "--db", db, "--output", str(tmp_path / "b.json")]) == 0
    first = cells(db)
    con = sqlite3.connect(db)
    run_id = con.execute("SELECT id FROM runs").fetchone()[0]
    with con:
        con.execute("PRAGMA foreign_keys=ON")
        for table in ("requests", "samples"):
            con.execute(f"DELETE FROM {table} WHERE cell_id=?", (first[1][0],))
        con.execute("DELETE FROM cells WHERE id=?", (first[1][0],))
    con.close()
    capsys.readouterr()
    assert main(["bench", "--resume", run_id, "--db", db]) == 0
    again = cells(db)
    assert again[0] == first[0] and [k for _, k, _ in again] == ["8:4/c=1", "8:4/c=2"]
    assert main(["sweep", "--resume", run_id, "--db", db]) == 2
    assert f"run {run_id} is a bench run" in capsys.readouterr().err


def test_sweep_dry_run_of_a_stored_run_plans_without_running(ref, tmp_path, capsys):
    db = str(tmp_path / "r.db")
    assert main(["sweep", "--base-url", ref, "--pairs", "8:4", "--concurrency", "1", "--num-prompts", "2",
                 "--db", db]) == 0
    run_id = sqlite3.connect(db).execute("SELECT id FROM runs").fetchone()[0]
    capsys.readouterr()
    assert main(["sweep", "--resume", run_id, "--dry-run", "--db", db]) == 0
    assert "plan: 1 cells" in capsys.readouterr().out and len(cells(db)) == 1


@pytest.mark.parametrize("arrival, burstiness", [("poisson", 1.0), ("constant", "inf")])
def test_a_saved_rate_is_imported_as_the_same_load(ref, tmp_path, arrival, burstiness):
    """--save-result of `--request-rate 40 --max-concurrency 2` writes vLLM's rate, cap and burstiness
    (inf: constant gaps), and `tokenbench import` reads back that rate with that cap, never c=2."""
    from tokenbench.formats.importers import import_file
    from tokenbench.judge.views import load_run
    from tokenbench.store.db import Store
    args = ["bench", "--base-url", ref, "--input-len", "16", "--output-len", "4", "--request-rate", "40",
            "--max-concurrency", "2", "--arrival", arrival, "--num-prompts", "8", "--save-result", "--save-detailed",
            "--result-dir", str(tmp_path / "out"), "--no-store"]
    assert main(args) == 0
    (path,) = (tmp_path / "out").iterdir()
    doc = json.loads(path.read_text())
    assert (doc["request_rate"], doc["max_concurrency"], doc["burstiness"]) == (40.0, 2, burstiness)
    store = Store(tmp_path / "r.db")
    try:
        [cell] = load_run(store, import_file(store, path), requests=False).cells
    finally:
        store.close()
    assert (cell.concurrency, cell.request_rate, cell.summary.max_concurrency, cell.summary.arrival) == \
        (None, 40.0, 2, arrival)
