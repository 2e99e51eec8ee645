"""A cell's result has one maker: outside the store and other tools' formats, only metrics/summary.py (the
figures from the tally, the mean over repeats) and metrics/cell.py (`finish`) build or amend a CellSummary; a
cell's Verdict is made and amended in metrics/verdict.py only; a group is amended by string (model_copy) only
in metrics/ (elsewhere through its own named methods). Checked by behaviour: a real bench, sweep and capacity
search against the reference server (real sockets), their reports, a comparison, an export and its import,
with every maker recorded as it runs (tests/metrics/makers.py), whatever name it gives the class or the record.
And the cell types from the measured result to the report are two (CellResult, CellRow), each field declared
once."""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import fields
from pathlib import Path
from typing import get_type_hints

import pytest

import tokenbench
from tests.metrics.makers import Makers
from tokenbench.cli.main import main
from tokenbench.judge.views import RunData
from tokenbench.load.cell import CellJob, CellResult
from tokenbench.metrics.cell_summary import CellSummary as Alias
from tokenbench.metrics.summary import summarize
from tokenbench.metrics.verdict import Verdict
from tokenbench.spec.bench import Load
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

PKG = Path(tokenbench.__file__).parent
HERE = __name__


def _four_ways(s: Alias, v: Verdict) -> None:
    """What a name-reading check misses: an aliased class, a receiver not named `summary`, a verdict replaced,
    a verdict's amendment called elsewhere."""
    Alias(completed=1)
    s.with_()
    dataclasses.replace(v, message="x")
    v.failed("died", "x")


def test_the_recorder_puts_each_make_down_to_its_maker_whatever_the_names():
    s, v = summarize([], Load(concurrency=1, num_prompts=1), 8, 4), Verdict(status="ok")
    with Makers() as makers:
        _four_ways(s, v)
        summarize([], Load(concurrency=1, num_prompts=1), 8, 4)
    mine = {(m.record, m.how) for m in makers.outside() if (m.module, m.function) == (HERE, "_four_ways")}
    assert mine == {("CellSummary", "__init__"), ("CellSummary", "model_copy"), ("Verdict", "Verdict.__init__")}
    assert sum(n for m, n in makers.seen.items() if m.function == "_four_ways" and m.record == "Verdict") == 2
    assert ("tokenbench.metrics.summary", "of_tally") in makers.makers("CellSummary")
    assert all(m.function == "_four_ways" for m in makers.outside())


@pytest.mark.slow
def test_only_the_makers_make_a_summary_or_a_verdict_in_a_bench_a_sweep_and_a_capacity_search(tmp_path):
    db, again = str(tmp_path / "r.db"), str(tmp_path / "again.db")
    with Makers() as makers:
        with ReferenceProcess(ReferenceConfig(ttft_ms=2, itl_ms=1)) as ref, \
                ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1, faults={"http_500": 1.0})) as failing:
            cell = ["--input-len", "16", "--output-len", "4", "--num-prompts", "6", "--db", db]
            assert main(["bench", "--base-url", ref.url, *cell, "--concurrency", "2"]) == 0
            assert main(["bench", "--base-url", failing.url, *cell, "--concurrency", "1", "--no-probe"]) != 0
            assert main(["sweep", "--base-url", ref.url, "--pairs", "16:4,32:4", "--concurrency", "1,2",
                         "--num-prompts", "4", "--repeats", "2", "--db", db]) == 0
            assert main(["sweep", "--base-url", ref.url, "--pairs", "16:8", "--find-capacity", "--slo",
                         "tpot:mean<=500", "--capacity-max", "4", "--capacity-budget", "4", "--sustain-s", "1",
                         "--num-prompts", "4", "--db", db]) == 0
        runs = [r.id for r in Store(db).runs()]
        for run in runs:
            assert main(["report", run, "--db", db, "--output", str(tmp_path / run)]) == 0
        assert main(["compare", runs[0], runs[2], "--db", db, "--output", str(tmp_path / "cmp")]) == 0
        assert main(["export", runs[2], "--db", db, "--format", "json", "-o", str(tmp_path / "s.json")]) == 0
        assert main(["import", str(tmp_path / "s.json"), "--db", again]) == 0
    assert makers.outside() == []
    summary, verdict = makers.makers("CellSummary"), makers.makers("Verdict")
    assert {("tokenbench.metrics.summary", "of_tally"), ("tokenbench.metrics.cell", "_figures"),
            ("tokenbench.metrics.summary", "mean_of_repeats"), ("tokenbench.store.rows", "CellRow.from_db"),
            ("tokenbench.store.rows", "CellRow.from_json")} <= summary       # what ran was seen
    assert verdict == {("tokenbench.metrics.verdict", "cell_verdict")}
    assert ("tokenbench.metrics.summary_groups", "MonitorFigures.checked") in makers.makers("group")


def _modules() -> dict[str, ast.Module]:
    """Every module of the package but the store's and the formats' (which read and write the stored form)."""
    return {str(p.relative_to(PKG)): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PKG.rglob("*.py"))
            if p.relative_to(PKG).parts[0] not in ("store", "formats")}


def _top_names(tree: ast.Module) -> set[str]:
    """The classes and names a module defines at its top level."""
    targets = [t for n in tree.body if isinstance(n, ast.Assign) for t in n.targets]
    targets += [n.target for n in tree.body if isinstance(n, ast.AnnAssign)]
    return {n.name for n in tree.body if isinstance(n, ast.ClassDef)} | {t.id for t in targets if isinstance(t, ast.Name)}


def test_verdict_names_one_type():
    """`Verdict` is the cell's (metrics/verdict.py): no other module defines a type of that name, so a reader
    (and an import) cannot take a comparison's or a tune's judgement for it."""
    store = {f"store/{p.name}": ast.parse(p.read_text(encoding="utf-8")) for p in (PKG / "store").glob("*.py")}
    assert {name for name, tree in {**_modules(), **store}.items() if "Verdict" in _top_names(tree)} == \
        {"metrics/verdict.py"}


def _classes() -> dict[str, ast.ClassDef]:
    every = {f"{path}:{n.name}": n for path, tree in _modules().items() for n in ast.walk(tree)
             if isinstance(n, ast.ClassDef)}
    store = {f"store/{p.name}:{n.name}": n for p in (PKG / "store").glob("*.py")
             for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if isinstance(n, ast.ClassDef)}
    return {**every, **store}


def test_two_cell_types_from_the_measured_result_to_the_report():
    """What was measured (CellResult) and what was stored (CellRow): the report and the judgements read the
    stored row itself (a merged cell's repeats are its field), no type derives from either, and no other class
    declares the row's columns again."""
    row = {f.name for f in fields(CellRow)}
    assert {"summary", "verdict"} <= {f.name for f in fields(CellResult)} and {"repeats", "eager"} <= row
    derived = [name for name, c in _classes().items() if {"CellRow", "CellResult"} & {ast.unparse(b) for b in c.bases}]
    assert derived == []
    again = {name for name, c in _classes().items()
             if len(row & {s.target.id for s in c.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)})
             > len(row) // 2}
    assert again == {"store/rows.py:CellRow"}
    assert get_type_hints(RunData)["cells"] == list[CellRow]


def test_a_cell_job_carries_what_the_cell_needs_not_the_study():
    names = {f.name: f.type for f in fields(CellJob)}
    assert not any("StudySpec" in str(t) for t in names.values())
    assert {"workload", "load", "request", "policy"} <= set(names)
