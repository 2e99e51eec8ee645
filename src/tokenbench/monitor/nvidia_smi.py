"""Offline parser of `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` -> samples.

With a header line the columns are read by name (units such as ` [MiB]` stripped, aliases like
`gpu_uuid` accepted, unknown columns ignored); without one they must be in the order of `query`
(default: the query the sampler runs). Values may carry units (`36 %`, `106.56 W`); `[N/A]`, `N/A`,
`[Not Supported]` are unknown (None), never 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tokenbench.errors import UsageError
from tokenbench.monitor._text import clip, integer, number
from tokenbench.monitor.samples import Sample, make_samples

QUERY = ("index", "name", "uuid", "utilization.gpu", "memory.used", "memory.total",
         "power.draw", "temperature.gpu")
COMMAND = ("nvidia-smi", "--query-gpu=" + ",".join(QUERY), "--format=csv,noheader,nounits")

_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_index": "index"}
POWER_COLUMNS = ("power.draw", "power.draw.average", "power.draw.instant")   # the first one given wins
_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuReading:
    index: int
    name: str
    uuid: str
    util_pct: float | None
    mem_used_mb: float | None
    mem_total_mb: float | None
    power_w: float | None
    temp_c: float | None
    energy_j: float | None = None      # NVML's total energy since the driver loaded (no CSV field has it)


def parse_nvidia_smi(text: str, query: tuple[str, ...] = QUERY) -> list[GpuReading]:
    """Parse CSV from nvidia-smi; UsageError if no line has the expected columns."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise UsageError("the nvidia-smi text is empty", "pass the CSV printed by `nvidia-smi --query-gpu=...`")
    columns, rows = (_header(lines[0]), lines[1:]) if _is_header(lines[0]) else (_norm_all(query), lines)
    readings = [_reading(dict(zip(columns, cells, strict=False)), n) for n, cells in enumerate(_rows(rows, len(columns)))]
    if not readings:
        raise UsageError(
            f"no nvidia-smi row has the {len(columns)} expected columns (text starts with {clip(text)!r})",
            "capture with --format=csv (header included), or pass the --query-gpu list it was run with "
            "(`tokenbench parse nvidia-smi FILE --query ...`)",
        )
    return readings


def gpu_samples(readings: list[GpuReading], t_ns: int) -> list[Sample]:
    samples: list[Sample] = []
    for gpu in readings:
        labels = {"device": str(gpu.index), "name": gpu.name, "uuid": gpu.uuid}
        values = {"util_pct": gpu.util_pct, "mem_used_mb": gpu.mem_used_mb, "mem_total_mb": gpu.mem_total_mb,
                  "power_w": gpu.power_w, "temp_c": gpu.temp_c, "energy_j": gpu.energy_j}
        samples += make_samples(t_ns, "gpu", values, labels)
    return samples


def _is_header(line: str) -> bool:
    known = set(QUERY) | set(_ALIASES) | set(POWER_COLUMNS) | {"memory.free", "timestamp", "pci.bus_id"}
    return any(name in known for name in _header(line))


def _header(line: str) -> tuple[str, ...]:
    return _norm_all(tuple(_UNIT.sub("", cell.strip()) for cell in line.split(",")))


def _norm_all(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_ALIASES.get(name.strip().lower(), name.strip().lower()) for name in names)


def _rows(lines: list[str], width: int) -> list[list[str]]:
    """Lines split on commas; lines of another width (error messages, truncation) are skipped."""
    split = ([cell.strip() for cell in line.split(",")] for line in lines)
    return [cells for cells in split if len(cells) == width]


def _power(row: dict[str, str]) -> float | None:
    for column in POWER_COLUMNS:
        value = number(row.get(column, ""))
        if value is not None:
            return value
    return None


def _reading(row: dict[str, str], position: int) -> GpuReading:
    total = number(row.get("memory.total", ""))
    used = number(row.get("memory.used", ""))
    free = number(row.get("memory.free", ""))
    if used is None and total is not None and free is not None:
        used = total - free
    index = integer(row.get("index", ""))
    return GpuReading(
        index=position if index is None else index,
        name=row.get("name", ""), uuid=row.get("uuid", ""),
        util_pct=number(row.get("utilization.gpu", "")),
        mem_used_mb=used, mem_total_mb=total,
        power_w=_power(row),
        temp_c=number(row.get("temperature.gpu", "")),
    )
