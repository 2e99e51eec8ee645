"""The package layout cannot shadow anything: no module bears a standard-library name, and scripts run
by path in another interpreter sit in `standalone/` (not an import package) and never import tokenbench."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import tokenbench

PKG = Path(tokenbench.__file__).parent


def test_no_module_is_named_like_the_standard_library():
    clashes = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
               if p.stem in sys.stdlib_module_names and p.stem != "__init__"]
    clashes += [str(p.relative_to(PKG)) for p in PKG.rglob("*") if p.is_dir() and p.name in sys.stdlib_module_names]
    assert clashes == []


def test_standalone_scripts_are_not_a_package_and_import_nothing_of_tokenbench():
    scripts = sorted((PKG / "standalone").glob("*.py"))
    assert scripts and not (PKG / "standalone" / "__init__.py").exists()
    for script in scripts:
        tree = ast.parse(script.read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not any(m.split(".")[0] == "tokenbench" for m in imported), script.name


TESTS = Path(__file__).parent
SUITES = {"engines": "real engines and their rendered containers, per engine",
          "reliability": "failures end to end, across packages",
          "fixtures": "data the tests read"}


def test_tests_mirror_the_packages():
    """Each folder of tests/ is named after the tokenbench package it tests, or is one of the suites that
    cross packages: a newcomer finds a module's tests where the module is."""
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - packages - set(SUITES) == set()


def test_no_test_folder_can_shadow_an_installed_module():
    """Every folder holding test modules is a package up to tests/ itself, so pytest imports them as
    tests.<folder>...: none becomes a top-level module (a tests/vllm folder on sys.path would be
    imported in place of vllm by an engine test)."""
    for test in TESTS.rglob("test_*.py"):
        for folder in test.relative_to(TESTS).parents:
            assert (TESTS / folder / "__init__.py").exists(), f"{TESTS / folder} is not a package"
