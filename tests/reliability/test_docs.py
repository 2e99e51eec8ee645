
"""docs/reliability.md cannot go stale: every test it names exists (file, function, parametrize id),
and every reference-server fault and every request error kind has its row."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tokenbench.client.records import ERROR_KINDS
from tokenbench.errors import EXIT_CODES
from tokenbench.testing.faults import FAULT_KINDS

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "reliability.md").read_text()
REF = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+)(?:\[([^\]]+)\])?)?`")


def test_every_named_test_exists():
    refs = REF.findall(DOC)
    assert len(refs) >= 40
    for path, name, param in refs:
        source = (ROOT / path).read_text()
        if not name:
            continue
        functions = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
        assert name in functions, f"{path}::{name} does not exist"
        if param:
            assert f'"{param}"' in source or f"'{param}'" in source, f"{path}::{name}[{param}]: no such case"


def test_every_fault_and_error_kind_has_a_row():
    matrix = DOC.split("## Fault matrix", 1)[1].split("## Server death", 1)[0]
    rows = [line for line in matrix.splitlines() if line.startswith("| `")]
    for fault in FAULT_KINDS:
        assert any(line.startswith(f"| `{fault}`") for line in rows), f"fault {fault} has no row"
    for kind in ERROR_KINDS:
        assert f"`{kind}`" in matrix, f"error kind {kind} is not in the matrix"


def test_exit_codes_are_documented():
    table = DOC.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", table, re.MULTILINE))
    assert {int(k): v for k, v in rows.items()} == EXIT_CODES
