"""A cell's result has one maker: outside the store and other tools' formats, only metrics/summary.py (the
figures from the tally, the mean over repeats) and metrics/cell.py (`finish`) build or amend a
CellSummary; a cell's Verdict is made in metrics/verdict.py only; and the cell types from the measured
result to the report are two (CellResult, CellRow), each field declared once."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path
from typing import get_type_hints

import tokenbench
from tokenbench.judge.views import RunData
from tokenbench.load.cell import CellJob, CellResult
from tokenbench.store.rows import CellRow

PKG = Path(tokenbench.__file__).parent
ASIDE = ("store", "formats")


def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(PKG)): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PKG.rglob("*.py"))
            if p.relative_to(PKG).parts[0] not in ASIDE}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _makes_summary(call: ast.Call) -> bool:
    """CellSummary(...), CellSummary.<anything>(...), x.with_(...), or a model_copy of a summary."""
    f = call.func
    if isinstance(f, ast.Name) and f.id == "CellSummary":
        return True
    if not isinstance(f, ast.Attribute):
        return False
    if f.attr == "with_" or (isinstance(f.value, ast.Name) and f.value.id == "CellSummary"):
        return True
    return f.attr == "model_copy" and any("summary" in n.lower() for n in _names(f.value))


def _calls(tree: ast.Module, test) -> bool:
    return any(isinstance(n, ast.Call) and test(n) for n in ast.walk(tree))


def test_two_modules_build_or_amend_a_summary():
    makers = {name for name, tree in _modules().items() if _calls(tree, _makes_summary)}
    assert makers == {"metrics/summary.py", "metrics/cell.py"}


def _cell_verdict_names(tree: ast.Module) -> set[str]:
    """The names a module gives the cell's Verdict type (metrics/verdict.Verdict; a comparison of two cells is
    metrics/uncertainty.Comparison)."""
    return {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            and n.module == "tokenbench.metrics.verdict" for a in n.names if a.name == "Verdict"}


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


def test_the_verdict_is_made_in_one_module():
    """Only metrics/verdict.py makes or amends a cell's Verdict (Verdict(...), .failed(...), replace(verdict))."""
    def makers(name: str, tree: ast.Module) -> bool:
        own = _cell_verdict_names(tree) | ({"Verdict"} if name == "metrics/verdict.py" else set())
        def makes(call: ast.Call) -> bool:
            f = call.func
            named = isinstance(f, ast.Name) and f.id in own
            amended = isinstance(f, ast.Attribute) and f.attr == "failed" and "verdict" in str(_names(f.value))
            replaced = isinstance(f, ast.Name) and f.id == "replace" and "verdict" in str(_names(call)).lower()
            return named or amended or replaced
        return _calls(tree, makes)
    assert {name for name, tree in _modules().items() if makers(name, tree)} == {"metrics/verdict.py"}


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
