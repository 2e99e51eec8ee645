"""Engine knowledge lives in the adapters (deploy/engines/): no other module tests an engine's name, and no
data file outside deploy/ is keyed by one (the /metrics names once sat in monitor/engines.yaml)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import yaml

import tokenbench
from tokenbench.spec.deploy_profile import Engine

PKG = Path(tokenbench.__file__).parent
NAMES = set(typing.get_args(Engine))
# names that are not the engine under test: other tools' result formats, vLLM's own benchmark client, other
# benchmark clients' command lines (peers/) and which client's meaning a length range ratio has (range_ratio_style)
NOT_ENGINES = {"formats/importers.py", "host/image_tag.py", "spec/bench.py", "workload/lengths.py"}
NOT_ENGINES_UNDER = ("deploy/engines/", "peers/")


def _strings(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def engine_tests(tree: ast.AST) -> list[int]:
    """Lines that compare with an engine name or key a mapping by one."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and _strings(ast.Tuple(elts=[node.left, *node.comparators])) & NAMES:
            lines.append(node.lineno)
        if isinstance(node, ast.Dict) and {k.value for k in node.keys if isinstance(k, ast.Constant)} & NAMES:
            lines.append(node.lineno)
    return lines


def test_no_engine_name_is_tested_outside_the_adapters():
    found = {}
    for path in PKG.rglob("*.py"):
        rel = str(path.relative_to(PKG))
        if rel.startswith(NOT_ENGINES_UNDER) or rel in NOT_ENGINES:
            continue
        lines = engine_tests(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[rel] = lines
    assert found == {}, f"engine names tested outside deploy/engines/: {found}"


def data_keys(node: object) -> set[str]:
    """Every mapping key at any depth of a loaded YAML/JSON document."""
    if isinstance(node, dict):
        return {str(k) for k in node} | {k for v in node.values() for k in data_keys(v)}
    if isinstance(node, list):
        return {k for v in node for k in data_keys(v)}
    return set()


def test_no_data_file_outside_deploy_is_keyed_by_an_engine_name():
    """monitor/, report/ and the rest read engine facts through the adapters, not from tables of their own."""
    found = {}
    for path in [*PKG.rglob("*.yaml"), *PKG.rglob("*.json")]:
        rel = str(path.relative_to(PKG))
        if rel.startswith("deploy/"):
            continue
        keys = data_keys(yaml.safe_load(path.read_text(encoding="utf-8"))) & NAMES
        if keys:
            found[rel] = sorted(keys)
    assert found == {}, f"data keyed by engine names outside deploy/: {found}"


def test_the_check_finds_what_it_looks_for():
    assert engine_tests(ast.parse('if facts.engine == "vllm": pass\nRESET = {"sglang": "/flush_cache"}')) == [1, 2]
    assert data_keys(yaml.safe_load("signals:\n  - llamacpp: {prefix: 'llamacpp:'}\n")) & NAMES == {"llamacpp"}


def test_every_adapter_provides_the_protocol():
    from tokenbench.deploy import engines
    for name in NAMES:
        module = engines.engine_module(name)
        assert all(callable(getattr(module, f, None)) for f in engines.REQUIRED), name
        assert all(hasattr(module, f) for f in engines.REQUIRED_DATA), name
        assert {"running", "waiting"} <= set(module.METRIC_NAMES["signals"]), name
        assert module.METRIC_NAMES["prefix"].endswith(":"), name
    assert engines.reset_cache_path("vllm") and engines.reset_cache_path("reference") is None
