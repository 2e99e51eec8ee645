"""Offline parsers of nvidia-smi's human-readable outputs -> the CSV parser's GpuReading (and, for `-q`,
each GPU's settings, which `doctor` checks):

- `nvidia-smi -q` (also `-a`): a log of indented `Key : Value` lines per `GPU <bus id>` section; sections
  and keys are matched by name, so the layouts of old and new drivers read alike (`Power Readings` /
  `GPU Power Readings`, `Power Limit` / `Current Power Limit`, `Clocks Throttle Reasons` / `Clocks Event
  Reasons`, `Temperature/Gpu` / `GPU Current Temp`);
- `nvidia-smi` (the default table): per GPU a head row `index name persistence | bus id ...` and a row
  `fan temp perf power/cap | used / total memory | util compute`, in the 79- and 89-column layouts;
- `nvidia-smi dmon`: `#`-lines name the columns (`gpu pwr gtemp|temp ... sm mem ... fb ...`), each other
  line is one GPU at one tick; `-` is unknown.
Formats and tolerance rules: docs/monitoring.md ("Parser tolerance rules").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tokenbench.monitor._text import integer, number
from tokenbench.monitor.nvidia_smi import QUERY, GpuReading, parse_nvidia_smi

_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f])\s*$")
_PAIR = re.compile(r"^(\s*)(\S.*?)\s+:\s?(.*)$")
_HEAD = re.compile(r"^(\s*)(\S.*?)\s*$")
_NOT_THROTTLES = {"idle", "applications clocks setting", "display clock setting", "sync boost"}


@dataclass(frozen=True, kw_only=True)
class GpuFacts:
    """One GPU of `nvidia-smi -q`: its reading and the settings that move inference numbers."""

    reading: GpuReading
    bus_id: str = ""
    persistence: str | None = None          # Enabled | Disabled
    mig: str | None = None                  # current MIG mode: Enabled | Disabled | N/A
    mig_pending: str | None = None
    ecc: str | None = None                  # current ECC mode
    ecc_pending: str | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    power_limit_w: float | None = None      # the limit in force
    power_default_w: float | None = None
    power_max_w: float | None = None
    throttles: tuple[str, ...] = ()         # clock event reasons active, other than idle and settings


@dataclass(frozen=True)
class SmiLog:
    """`nvidia-smi -q`: the driver, the highest CUDA version it supports, and every GPU."""

    driver: str | None
    cuda: str | None
    gpus: list[GpuFacts] = field(default_factory=list)


def parse_any(text: str, query: tuple[str, ...] = QUERY) -> tuple[str, list[GpuReading]]:
    """(format, readings) of any nvidia-smi capture: `-q`, the default table, `dmon`, else CSV (`query`: the
    columns of a CSV captured without a header)."""
    if looks_like_query_log(text):
        return "query", [g.reading for g in parse_query_log(text).gpus]
    if looks_like_dmon(text):
        return "dmon", parse_dmon(text)
    if looks_like_table(text):
        return "table", parse_table(text)
    return "csv", parse_nvidia_smi(text, query)


def looks_like_query_log(text: str) -> bool:
    return "NVSMI LOG" in text or any(_GPU.match(line) for line in text.splitlines())


def looks_like_table(text: str) -> bool:
    return "NVIDIA-SMI" in text or "Pwr:Usage/Cap" in text


def looks_like_dmon(text: str) -> bool:
    return any(re.match(r"^\s*#\s*(?:Date\s+Time\s+)?gpu\b", line, re.I) for line in text.splitlines())


# ---- nvidia-smi -q ----

def _sections(text: str) -> tuple[dict[str, str], list[tuple[str, dict[str, str]]]]:
    """The top-level keys, and per GPU section (its bus id) a map 'Section/Sub/Key' -> value."""
    top: dict[str, str] = {}
    gpus: list[tuple[str, dict[str, str]]] = []
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        if (gpu := _GPU.match(line.strip())) and not line[:1].isspace():
            gpus.append((gpu.group(1), {}))
            stack = []
            continue
        found = _PAIR.match(line) or _HEAD.match(line)
        if not found or not line.strip() or set(line.strip()) == {"="}:
            continue
        depth, key = len(found.group(1)), found.group(2).strip()
        stack = [(d, k) for d, k in stack if d < depth]
        stack.append((depth, key))
        if found.re is _PAIR:
            target = gpus[-1][1] if gpus else top
            target["/".join(k for _, k in stack)] = found.group(3).strip()
    return top, gpus


def _first(values: dict[str, str], *keys: str) -> str | None:
    for key in keys:
        if key in values and values[key].strip():
            return values[key].strip()
    return None


def _num(values: dict[str, str], *keys: str) -> float | None:
    text = _first(values, *keys)
    return None if text is None else number(text)


def _power(values: dict[str, str], what: str) -> float | None:
    return _num(values, *(f"{section}/{what}" for section in ("GPU Power Readings", "Power Readings")))


def _throttles(values: dict[str, str]) -> tuple[str, ...]:
    out = []
    for key, value in values.items():
        head, _, reason = key.partition("/")
        if head in ("Clocks Event Reasons", "Clocks Throttle Reasons") and value.strip().lower() == "active":
            name = reason.rsplit("/", 1)[-1]
            if name.lower() not in _NOT_THROTTLES:
                out.append(name)
    return tuple(out)


def _facts(position: int, bus_id: str, v: dict[str, str]) -> GpuFacts:
    reading = GpuReading(
        index=position, name=_first(v, "Product Name") or "", uuid=_first(v, "GPU UUID") or "",
        util_pct=_num(v, "Utilization/Gpu"),
        mem_used_mb=_num(v, "FB Memory Usage/Used"), mem_total_mb=_num(v, "FB Memory Usage/Total"),
        power_w=_power(v, "Power Draw") or _power(v, "Average Power Draw") or _power(v, "Instantaneous Power Draw"),
        temp_c=_num(v, "Temperature/GPU Current Temp", "Temperature/Gpu"))
    return GpuFacts(reading=reading, bus_id=bus_id, persistence=_first(v, "Persistence Mode"),
                    mig=_first(v, "MIG Mode/Current"), mig_pending=_first(v, "MIG Mode/Pending"),
                    ecc=_first(v, "ECC Mode/Current"), ecc_pending=_first(v, "ECC Mode/Pending"),
                    sm_clock_mhz=_num(v, "Clocks/SM"), sm_clock_max_mhz=_num(v, "Max Clocks/SM"),
                    mem_clock_mhz=_num(v, "Clocks/Memory"), mem_clock_max_mhz=_num(v, "Max Clocks/Memory"),
                    power_limit_w=(_power(v, "Current Power Limit") or _power(v, "Enforced Power Limit")
                                   or _power(v, "Power Limit")),
                    power_default_w=_power(v, "Default Power Limit"), power_max_w=_power(v, "Max Power Limit"),
                    throttles=_throttles(v))


def parse_query_log(text: str) -> SmiLog:
    """`nvidia-smi -q` -> the driver, CUDA version and each GPU (in the order printed: nvidia-smi's index)."""
    top, gpus = _sections(text)
    return SmiLog(_first(top, "Driver Version"), _first(top, "CUDA Version"),
                  [_facts(n, bus, values) for n, (bus, values) in enumerate(gpus)])


# ---- nvidia-smi (the default table) ----

_HEAD_ROW = re.compile(r"^\s*(\d+)\s+(.+?)\s+(On|Off)\s*$")
_STATS = re.compile(r"(?P<temp>\d+)C\s+\S+\s+(?P<power>\d+(?:\.\d+)?|N/A)\s*W?\s*/\s*(?:\d+(?:\.\d+)?|N/A)\s*W?")
_MEMORY = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_UTIL = re.compile(r"(\d+)\s*%")
_BUS = re.compile(r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table_reading(index: int, name: str, stats: list[str]) -> GpuReading:
    found = _STATS.search(stats[0])
    memory = _MEMORY.search(stats[1]) if len(stats) > 1 else None
    util = _UTIL.search(stats[2]) if len(stats) > 2 else None
    return GpuReading(index=index, name=name, uuid="", util_pct=number(util.group(1)) if util else None,
                      mem_used_mb=number(memory.group(1)) if memory else None,
                      mem_total_mb=number(memory.group(2)) if memory else None,
                      power_w=number(found.group("power")) if found else None,
                      temp_c=number(found.group("temp")) if found else None)


def parse_table(text: str) -> list[GpuReading]:
    """The GPUs of the default `nvidia-smi` table (its process table and MIG device table are left out)."""
    lines = [line for line in text.splitlines() if line.strip().startswith("|")]
    out = []
    for head, stats in zip(lines, lines[1:], strict=False):
        cells = _cells(head)
        found = _HEAD_ROW.match(cells[0]) if len(cells) >= 3 else None
        if found and _BUS.search(cells[1]):
            out.append(_table_reading(int(found.group(1)), found.group(2), _cells(stats)))
    return out


def table_versions(text: str) -> tuple[str | None, str | None]:
    """(driver, CUDA) from the table's banner."""
    driver = re.search(r"Driver Version:\s*([\w.\-]+)", text)
    cuda = re.search(r"CUDA Version:\s*([\w.\-]+)", text)
    return (driver.group(1) if driver else None), (cuda.group(1) if cuda else None)


# ---- nvidia-smi dmon ----

_DMON = {"pwr": "power_w", "gtemp": "temp_c", "temp": "temp_c", "sm": "util_pct", "fb": "mem_used_mb"}


def parse_dmon(text: str) -> list[GpuReading]:
    """One reading per GPU per tick; the columns are the last `#` header's (`-o DT` date and time included)."""
    names: list[str] = []
    out = []
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0].startswith("#"):
            head = [w for w in " ".join(words).lstrip("#").split()]
            if head and head[0].lower() in ("gpu", "date"):
                names = [w.lower() for w in head]
            continue
        if len(words) != len(names) or "gpu" not in names:
            continue
        row = dict(zip(names, words, strict=True))
        index = integer(row["gpu"])
        if index is None:
            continue
        values = {field: number(row[col]) for col, field in _DMON.items() if col in row}
        out.append(GpuReading(index=index, name="", uuid="", util_pct=values.get("util_pct"),
                              mem_used_mb=values.get("mem_used_mb"), mem_total_mb=None, power_w=values.get("power_w"),
                              temp_c=values.get("temp_c")))
    return out


# ---- nvidia-smi topo -m ----

@dataclass(frozen=True)
class Topology:
    """`nvidia-smi topo -m`: the link between each pair of GPUs (`NV12`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`)
    and each GPU's CPU and NUMA affinity (NICs and the legend left out)."""

    links: dict[tuple[int, int], str] = field(default_factory=dict)
    cpus: dict[int, str] = field(default_factory=dict)
    numa: dict[int, str] = field(default_factory=dict)

    def link(self, a: int, b: int) -> str | None:
        return self.links.get((a, b))


def _gpu_index(name: str) -> int | None:
    return integer(name[3:]) if name.startswith("GPU") else None


def _topo_header(rows: list[list[str]]) -> list[str]:
    """The column names: the row naming `CPU Affinity`, else the first `GPU0 GPU1 ...` row."""
    for row in rows:
        if "CPU Affinity" in row or (row[:1] == ["GPU0"] and row[1:2] not in ([], ["X"])):
            return row
    return []


def parse_topology(text: str) -> Topology:
    """The GPU rows of `topo -m` (cells split on tabs or runs of spaces; the header names the columns)."""
    rows = [[c.strip() for c in re.split(r"\t+|\s{2,}", line.strip())] for line in text.splitlines() if line.strip()]
    names = _topo_header(rows)
    topo = Topology()
    for row in rows:
        me = _gpu_index(row[0])
        if me is None or row is names or len(row) != len(names) + 1:
            continue
        for name, value in zip(names, row[1:], strict=True):
            other = _gpu_index(name)
            if other is not None and other != me:
                topo.links[(me, other)] = value
            elif name == "CPU Affinity":
                topo.cpus[me] = value
            elif name == "NUMA Affinity":
                topo.numa[me] = value
    return topo
