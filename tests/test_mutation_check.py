"""scripts/mutation_check.py: the mutants it makes of a numeric formula (floats and large integers a tenth off,
small integers off by one, ** made *), the same draw for the same seed, the modules it checks existing and named
in docs/architecture.md ("Mutation check") area by area, and every argued equivalent one it makes of them
(an argument left behind by a change of the code fails here)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def mc():
    spec = importlib.util.spec_from_file_location("mutation_check", ROOT / "scripts" / "mutation_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_check"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["mutation_check"]


SOURCE = '''
def f(x, xs):
    if x <= 3:
        return x * 1e6 + 0.05
    return max(xs) ** 2 - 1_000_000 + 0.0
'''


def _texts(mc, kind: str) -> set[str]:
    return {m.text for m in mc.candidates("m.py", SOURCE) if f":{kind}:" in m.ident}


def test_numbers_are_mutated_a_tenth_off_or_by_one(mc):
    assert _texts(mc, "const") == {"(4)", "(2)", "(1100000.0)", "(900000.0)", "(0.055)", "(0.045)", "(3)", "(1)",
                                   "(1100000)", "(900000)", "(1.0)", "(-1.0)"}


def test_operators_comparisons_calls_and_branches_are_mutated(mc):
    assert "(x < 3)" in _texts(mc, "cmp")
    assert {"(x / 1000000.0)", "(max(xs) * 2)", "(max(xs) ** 2 + 1000000)"} <= _texts(mc, "arith")
    assert "(min(xs))" in _texts(mc, "call") and "(not x <= 3)" in _texts(mc, "branch")
    for m in mc.candidates("m.py", SOURCE):
        compile(m.apply(SOURCE), "mutant", "exec")


def test_a_draw_is_the_same_for_the_same_seed_and_module(mc):
    every = mc.candidates("m.py", SOURCE)
    assert mc.pick(every, 3, 5) == mc.pick(every, 3, 5)
    assert len(mc.pick(every, 3, 5)) == 5 and len({m.ident for m in every}) == len(every)


def test_every_module_checked_exists_and_the_docs_name_each_under_its_area(mc):
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("### Mutation check"):]
    documented = {}
    for area, cell in re.findall(r"^\| (\w+) \| (`tokenbench\..*) \|$", section, re.M):
        documented[area] = set(re.findall(r"`(tokenbench\.[\w.]+)`", cell))
    listed = {}
    for area, name in mc.MODULES:
        listed.setdefault(area, set()).add(name)
        assert (ROOT / mc.module_file(name)).is_file(), name
    assert documented == listed


@pytest.mark.slow                  # every mutant of the modules argued about is compiled: seconds on 2 cores
def test_each_argued_equivalent_is_a_mutant_the_script_makes_of_a_module_it_checks(mc):
    files = {mc.module_file(name) for _, name in mc.MODULES}
    argued = mc.equivalents(mc.EQUIVALENT)
    assert {module for module, _ in argued} <= files
    made = {f: {m.ident for m in mc.candidates(f, (ROOT / f).read_text())} for f in {module for module, _ in argued}}
    for (module, ident), reason in argued.items():
        assert ident in made[module] and len(reason) > 40, ident
