"""`tokenbench import` reads every file tokenbench writes: the JSON result (`--output FILE` / `--output -`),
the recovery file a failed database write leaves (the same form), `export` JSON (with and without
requests) and `export --format csv`. Each becomes a run whose cells have the source's columns, status,
message and figures, and its requests where the file has them; the format is told from the content."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.errors import UsageError
from tokenbench.formats.importers import FORMATS, detect, import_file
from tokenbench.judge.status import judge
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.store.db import Store
from tokenbench.store.journal import Journal
from tokenbench.store.records import to_dict
from tokenbench.store.rows import CellRow
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .report_fixtures import FIXTURES, build_run

EXAMPLES = Path(__file__).parents[2] / "examples"


def figures(summary: CellSummary, given_only: bool) -> dict:
    """The summary's figures, NaN read as None (JSON has no NaN); `given_only`: None dropped too (a CSV
    writes None, NaN and a missing key alike, as an empty value)."""
    out = {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in summary.to_dict().items()}
    return {k: v for k, v in out.items() if v is not None} if given_only else out


def add_odd_cells(store: Store, run_id: str) -> None:
    """Cells whose summaries hold every kind of value a file must carry: a skipped cell (no figures), an
    interrupted one (its group), lists and dicts, a NaN, a mean asked length, an open-loop rate, another
    tool's key, text that looks like JSON."""
    [config] = [c for c in store.configs(run_id) if c.name == "slots4"]
    flat = {**store.cells(run_id)[0].summary.to_dict(), "input_len": 16.5, "concurrency": None,
            "request_rate": 2.5, "interrupted_planned": 10, "interrupted_cut": 9, "clock_offsets_ns": [3, -4],
            "ray_nodes": ["n1", "n2"], "derived": ["output_throughput = request_throughput x output_len"],
            "notes": "[1, 2]", "source": "12", "p99.9_ttft_ms": 12.5, "mean_itl_ms": float("nan"),
            "failed_by_kind": {"timeout": 1}, "server_unreachable": True}
    cut = CellRow(key="16:32/r=2.5", input_len=16, output_len=32, status="interrupted",
                  summary=CellSummary.from_dict(flat), request_rate=2.5,
                  message="interrupted by the user, \"after\" 1 of 10,\nsecond line")
    skipped = CellRow(key="512:64/c=8", input_len=512, output_len=64, status="skipped", summary=CellSummary(),
                      concurrency=8, message="skipped: saturated", kv_demand=4608, kv_capacity=2048, over_capacity=True)
    store.save_cell(run_id, config.id, cut, store.requests(store.cells(run_id)[0].id or 0))
    store.save_cell(run_id, config.id, skipped, [])


def result_file(store: Store, run_id: str, path: Path) -> Path:
    """The JSON result as `bench`/`sweep` write it (and a recovery file: the same writer)."""
    doc = {"run_id": run_id, "kind": "sweep", "spec": store.run(run_id).spec,
           "tool": {"name": "tokenbench", "version": "0.1.0"}, "environment": store.run(run_id).environment}
    journal = Journal(store, run_id, doc, path)
    journal.seed_from_store()
    journal.write()
    return path


def assert_same_run(src: Store, run_id: str, dst: Store, imported: str, *, csv: bool, requests: bool) -> None:
    a, b = src.cells(run_id), dst.cells(imported)
    assert [(c.config, c.columns()) for c in b] == [(c.config, c.columns()) for c in a]
    for mine, theirs in zip(a, b, strict=True):
        assert figures(theirs.summary, csv) == figures(mine.summary, csv), mine.key
        assert judge(theirs.status, theirs.message, theirs.summary) == judge(mine.status, mine.message, mine.summary)
        want = [to_dict(r) for r in src.requests(mine.id or 0)] if requests else []
        assert [to_dict(r) for r in dst.requests(theirs.id or 0)] == want
    run = dst.run(imported)
    assert run.kind == "import" and run.status == "done"
    if not csv:
        assert run.environment == src.run(run_id).environment
        assert [(c.name, c.facts) for c in dst.configs(imported)] == [(c.name, c.facts) for c in src.configs(run_id)]
        assert run.spec["import"]["run"] == run_id and run.spec["concurrency"] == src.run(run_id).spec["concurrency"]


@pytest.fixture
def source(store):
    run_id = build_run(store)
    add_odd_cells(store, run_id)
    return store, run_id


@pytest.mark.parametrize("form", ["result", "export-json", "export-json-requests", "export-csv"])
def test_each_file_tokenbench_writes_imports_with_the_sources_figures(source, tmp_path, form, capsys):
    src, run_id = source
    path = tmp_path / f"{form}.out"               # no telling suffix: the content says what it is
    if form == "result":
        result_file(src, run_id, path)
    else:
        fmt = ["--format", "csv"] if form == "export-csv" else []
        asked = ["--requests"] if form.endswith("requests") else []
        assert main(["export", run_id, "--db", str(src.path), "-o", str(path), *fmt, *asked]) == 0
    dst = tmp_path / "imported.db"
    assert main(["import", str(path), "--db", str(dst)]) == 0
    imported = capsys.readouterr().out.strip()
    assert_same_run(src, run_id, Store(dst), imported, csv=form == "export-csv",
                    requests=form in ("result", "export-json-requests"))
    assert detect(path) == "tokenbench"


def test_a_request_csv_is_refused_with_the_export_that_imports(source, tmp_path, capsys):
    src, run_id = source
    path = tmp_path / "requests.csv"
    assert main(["export", run_id, "--db", str(src.path), "--format", "csv", "--requests", "-o", str(path)]) == 0
    assert main(["import", str(path), "--db", str(tmp_path / "i.db")]) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert "holds requests" in line and "tokenbench export RUN --requests" in line


@pytest.mark.parametrize("path, fmt", [(FIXTURES / "vllm-bench-serve.json", "vllm"),
                                       (FIXTURES / "sglang-bench-serving.jsonl", "sglang"),
                                       (FIXTURES / "study-a-headline.csv", "csv"),
                                       (EXAMPLES / "study-b-published.csv", "csv")])
def test_other_tools_files_are_told_from_their_content(path, fmt, tmp_path, store):
    renamed = tmp_path / "results.txt"
    renamed.write_bytes(path.read_bytes())
    assert detect(renamed) == fmt
    assert store.run(import_file(store, renamed)).spec["import"]["format"] == fmt


@pytest.mark.parametrize("text", ["hello\n", "{}", '{"cells": []}', "a,b,c\n1,2,3\n", "[1, 2]"])
def test_an_unknown_file_is_one_line_naming_every_format(tmp_path, text, capsys):
    path = tmp_path / "mystery.json"
    path.write_text(text)
    assert main(["import", str(path), "--db", str(tmp_path / "i.db")]) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert line.startswith("error: cannot tell the format of") and "--format" in line
    assert all(f in line for f in FORMATS) and "recovery file" in line and "export JSON or CSV" in line


def test_a_damaged_own_file_names_the_cell(source, tmp_path):
    src, run_id = source
    path = result_file(src, run_id, tmp_path / "r.json")
    doc = json.loads(path.read_text())
    del doc["cells"][1]["key"]
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=r"r\.json: cell 2 is not as tokenbench writes it"):
        import_file(Store(tmp_path / "i.db"), path)


@pytest.mark.slow
def test_a_real_bench_imports_from_stdout_export_and_recovery_with_its_figures(tmp_path, capsys, monkeypatch):
    """Over real HTTP against the reference server: `bench --output -` (stdout is the JSON alone), its
    `export` JSON with requests and CSV, each imported into a fresh database, equal the stored run; then a
    bench whose database fills after its first cell leaves a recovery file that imports with every cell."""
    db = tmp_path / "src.db"
    bench = ["--input-len", "16", "--output-len", "4", "--concurrency", "1,2", "--num-prompts", "4",
             "--allow-client-lag"]
    with ReferenceProcess(ReferenceConfig(ttft_ms=3, itl_ms=2)) as ref:
        assert main(["bench", "--base-url", ref.url, *bench, "--db", str(db), "--output", "-"]) == 0
        stdout = capsys.readouterr().out
        real_save = Store.save_cell

        def full_after_one(self, run_id, *args, **kw):
            if self.cells(run_id):
                with self._guard("store a cell"):
                    raise OSError(28, "No space left on device")
            return real_save(self, run_id, *args, **kw)

        monkeypatch.setattr(Store, "save_cell", full_after_one)
        assert main(["bench", "--base-url", ref.url, *bench, "--db", str(tmp_path / "full.db")]) == 6
        monkeypatch.undo()
    run_id = json.loads(stdout)["run_id"]
    files = {"stdout": tmp_path / "stdout.json", "json": tmp_path / "e.json", "csv": tmp_path / "e.csv"}
    files["stdout"].write_text(stdout)
    assert main(["export", run_id, "--db", str(db), "--requests", "-o", str(files["json"])]) == 0
    assert main(["export", run_id, "--db", str(db), "--format", "csv", "-o", str(files["csv"])]) == 0
    capsys.readouterr()
    src = Store(db)
    for name, path in files.items():
        assert main(["import", str(path), "--db", str(tmp_path / f"{name}.db")]) == 0
        imported = capsys.readouterr().out.strip()
        assert_same_run(src, run_id, Store(tmp_path / f"{name}.db"), imported, csv=name == "csv", requests=name != "csv")
    [recovery] = tmp_path.glob("tokenbench-recovery-*.json")
    doc = json.loads(recovery.read_text())
    assert [c["key"] for c in doc["cells"]] == ["16:4/c=1", "16:4/c=2"]
    dst = Store(tmp_path / "recovered.db")
    imported = import_file(dst, recovery)
    kept = Store(tmp_path / "full.db")
    [first] = kept.cells(doc["run_id"])
    cells = dst.cells(imported)
    assert [c.key for c in cells] == ["16:4/c=1", "16:4/c=2"]
    assert len(dst.requests(cells[1].id or 0)) == 4          # the cell the database refused: only here
    assert cells[0].summary == first.summary and cells[0].columns() == first.columns()
    for cell, written in zip(cells, doc["cells"], strict=True):
        assert figures(cell.summary, False) == figures(CellSummary.from_dict(written["summary"]), False)
        assert [to_dict(r) for r in dst.requests(cell.id or 0)] == written["requests"]
