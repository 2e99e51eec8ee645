"""Shared helpers for the Ascend / container tests: built-in profiles loaded from their YAML files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.loader import load_file

PROFILES = Path(__file__).parents[3] / "src" / "tokenbench" / "deploy" / "profiles"
GOLDEN = Path(__file__).parent / "golden"
FIXTURES = Path(__file__).parent / "fixtures"
STUDY_A = "study-a-minicpm5-sglang-flagos-910b4"
STUDY_B = "study-b-vllm-ascend-910b"


def load(name: str, *overrides: str) -> Profile:
    return load_file(Profile, PROFILES / f"{name}.yaml", list(overrides))


def check_golden(name: str, text: str) -> None:
    """Compare with tests/engines/ascend/golden/NAME; TOKENBENCH_UPDATE_GOLDEN=1 rewrites it (and fails)."""
    path = GOLDEN / name
    if os.environ.get("TOKENBENCH_UPDATE_GOLDEN") == "1":
        path.write_text(text)
        pytest.fail(f"golden {path.name} rewritten; review the diff and rerun without TOKENBENCH_UPDATE_GOLDEN")
    assert path.is_file(), f"no golden {path}; run once with TOKENBENCH_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} differs from the golden (TOKENBENCH_UPDATE_GOLDEN=1 to update)"
