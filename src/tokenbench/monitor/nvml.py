"""Optional NVML reader through `pynvml` (package nvidia-ml-py). Never required: without it the
NVIDIA sampler runs `nvidia-smi --query-gpu ... --format=csv`. Readings have the same shape as the
CSV parser's, so both paths produce identical samples.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from tokenbench.errors import MeasurementError
from tokenbench.monitor.nvidia_smi import GpuReading

_MB = 1024 * 1024


def init() -> bool:
    """True when pynvml imports and NVML initialises (a driver is present)."""
    try:
        nv = importlib.import_module("pynvml")
    except ImportError:
        return False
    try:
        nv.nvmlInit()
    except nv.NVMLError:
        return False
    return True


def readings() -> list[GpuReading]:
    nv = importlib.import_module("pynvml")
    try:
        count = nv.nvmlDeviceGetCount()
        return [_reading(nv, index) for index in range(count)]
    except nv.NVMLError as exc:
        raise MeasurementError(f"NVML failed: {exc}", "check the NVIDIA driver with `nvidia-smi`") from exc


def _reading(nv: ModuleType, index: int) -> GpuReading:
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    memory = _optional(nv, nv.nvmlDeviceGetMemoryInfo, handle)
    util = _optional(nv, nv.nvmlDeviceGetUtilizationRates, handle)
    power_mw = _optional(nv, nv.nvmlDeviceGetPowerUsage, handle)
    temp = _optional(nv, nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU)
    energy = getattr(nv, "nvmlDeviceGetTotalEnergyConsumption", None)      # Volta and later; newer bindings
    energy_mj = None if energy is None else _optional(nv, energy, handle)
    return GpuReading(
        index=index,
        name=_text(_optional(nv, nv.nvmlDeviceGetName, handle)),
        uuid=_text(_optional(nv, nv.nvmlDeviceGetUUID, handle)),
        util_pct=None if util is None else float(util.gpu),
        mem_used_mb=None if memory is None else memory.used / _MB,
        mem_total_mb=None if memory is None else memory.total / _MB,
        power_w=None if power_mw is None else power_mw / 1000.0,
        temp_c=None if temp is None else float(temp),
        energy_j=None if energy_mj is None else energy_mj / 1000.0,
    )


def _optional(nv: ModuleType, call: Callable[..., Any], *args: Any) -> Any:
    """One NVML query; None when this GPU does not support it (e.g. memory on unified-memory parts)."""
    try:
        return call(*args)
    except nv.NVMLError:
        return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
