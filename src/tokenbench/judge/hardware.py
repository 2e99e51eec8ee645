"""The device table (hardware.yaml) and how a run's hardware is found in what it stored."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from tokenbench.errors import UsageError
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import ServerFacts

TABLE = Path(__file__).with_name("hardware.yaml")


@dataclass(frozen=True)
class Device:
    key: str
    name: str
    bandwidth_gbs: float
    bf16_tflops: float
    source: str
    confidence: str = "datasheet"


def _read(path: Path) -> dict:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read hardware table {path}: {exc}",
                         "give a YAML file with a 'devices:' map") from None
    devices = doc.get("devices")
    if not isinstance(devices, dict):
        raise UsageError(f"{path} has no 'devices:' map", "see tokenbench/judge/hardware.yaml for the format")
    return devices


@cache
def _builtin() -> dict:
    return _read(TABLE)


def table(extra: str | Path | None = None) -> dict[str, dict]:
    """Built-in devices, overridden/extended by a user file."""
    return {**_builtin(), **(_read(Path(extra)) if extra else {})}


def _device(key: str, row: dict, cpu_count: int | None) -> Device:
    tflops = row.get("bf16_tflops")
    if tflops is None:
        tflops = row.get("tflops_per_core", 0) * (cpu_count or 1)
    try:
        return Device(key, row.get("name", key), float(row["bandwidth_gbs"]), float(tflops),
                      str(row.get("source", "")).strip(), row.get("confidence", "datasheet"))
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"hardware '{key}' needs numeric bandwidth_gbs and bf16_tflops (or tflops_per_core)",
                         "fix the hardware table") from None


def lookup(name: str | None, extra: str | Path | None = None, cpu_count: int | None = None) -> Device | None:
    """A device by key or by the longest alias contained in `name` ('Ascend 910B4' -> ascend-910b4)."""
    if not name:
        return None
    rows = table(extra)
    low = name.lower()
    if low in rows:
        return _device(low, rows[low], cpu_count)
    best = max(((len(a), k) for k, r in rows.items() for a in r.get("aliases", []) if a in low), default=None)
    return _device(best[1], rows[best[1]], cpu_count) if best else None


def known(extra: str | Path | None = None) -> list[str]:
    return sorted(table(extra))


def hardware_name(profile: Profile | None, facts: ServerFacts, environment: dict) -> str | None:
    """What the run says it ran on: the facts' hardware, an accelerator name in the environment, or the
    CPU when the profile's accelerator is 'cpu'."""
    if facts.hardware:
        return str(facts.hardware)
    for acc in environment.get("accelerators") or []:
        name = acc.get("name") if isinstance(acc, dict) else acc
        if name:
            return str(name)
    if profile is not None and profile.accelerator == "cpu":
        return "cpu"
    return None


PIPELINE_ARGS = ("pipeline-parallel-size", "pp-size", "pp")      # vLLM, SGLang (`--pp-size`), the short form


def pipeline_stages(profile: Profile) -> int:
    """PP: the engine's pipeline-parallel size from the profile's flags (1 when not given)."""
    args = profile.effective_args()
    for key in PIPELINE_ARGS:
        value = args.get(key, args.get(key.replace("-", "_")))
        if isinstance(value, (int, str)) and not isinstance(value, bool) and str(value).isdigit():
            return max(1, int(value))
    return 1


def device_count(profile: Profile | None, facts: ServerFacts) -> int:
    """Devices serving: the facts' count (an import states it), the profile's device list, else TP x DP x PP."""
    if facts.devices:
        return int(facts.devices)
    if profile is None:
        return 1
    if profile.devices:
        return len(profile.devices)
    return profile.parallelism.tp * profile.parallelism.dp * pipeline_stages(profile)
