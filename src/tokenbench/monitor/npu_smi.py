"""Offline parser of `npu-smi info` (the table) -> chips and processes -> samples.

Tolerance rules (see docs/monitoring.md): rows are split on `|`, never read by column position; each
chip is a pair of rows (a head row `NPU Name | Health | Power Temp ...` and a sub row
`Chip [Phy-ID] | Bus-Id | AICore Memory HBM`); the values in the third cell are matched to the header
names of that table (`Power(W)`, `HBM-Usage(MB)` ...), so added, dropped or widened columns across
driver releases 23.x-26.x do not shift them. `a / b` is one used/total pair whatever the spacing.
`-`, `NA`, `N/A` are unknown (None), never 0. A row of four or more cells whose second cell is a
number is a process row (`NPU Chip | pid | name | MB [| pid in container]`), header or not.
Anything outside `|` rows is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tokenbench.errors import UsageError
from tokenbench.monitor._text import clip, integer, number
from tokenbench.monitor.samples import Sample, make_samples

_BUS_ID = re.compile(r"[0-9A-Fa-fx]{4,8}:[0-9A-Fa-fx]{2}:[0-9A-Fa-fx]{2}\.[0-9A-Fa-fx]")
_FIELD = re.compile(r"([^\s/|]+)\s*/\s*([^\s/|]+)|(\S+)")
_IDLE = re.compile(r"No running processes found in NPU\s+(\d+)", re.IGNORECASE)
_VERSION = re.compile(r"npu-smi\s+(\d[\w.\-]*)")
_HEADER_KEYS = (("power", "power"), ("temp", "temp"), ("hugepages", "hugepages"),
                ("aicore", "aicore"), ("util", "aicore"), ("hbm", "hbm"), ("memory", "ddr"))
_DEFAULT_HEAD = ("power", "temp", "hugepages")
_DEFAULT_SUB = ("aicore", "ddr", "hbm")
_PROC_KEYS = (("in container", "container_pid"), ("process id", "pid"),
              ("process name", "name"), ("memory", "mem"), ("npu", "npu"))
_DEFAULT_PROC = ("npu", "pid", "name", "mem", "container_pid")

Field = str | tuple[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class NpuChip:
    npu: int
    chip: int | None
    phy_id: int | None          # the Phy-ID (A3) or Device column of the sub row, when shown
    name: str
    health: str
    bus_id: str
    power_w: float | None       # A3 boards report power on chip 0 only; the other chip shows '-'
    temp_c: float | None
    aicore_pct: float | None
    hbm_used_mb: float | None
    hbm_total_mb: float | None
    ddr_used_mb: float | None   # the Memory-Usage column
    ddr_total_mb: float | None


@dataclass(frozen=True, slots=True)
class NpuProcess:
    npu: int
    chip: int | None
    pid: int
    name: str                   # empty when npu-smi cannot see the process name (containers)
    mem_mb: float | None


@dataclass(frozen=True, slots=True)
class NpuSmiInfo:
    version: str | None
    chips: tuple[NpuChip, ...]
    processes: tuple[NpuProcess, ...]
    idle_npus: tuple[int, ...]


def parse_npu_smi(text: str) -> NpuSmiInfo:
    """Parse `npu-smi info` output; UsageError when it holds no device rows."""
    reader = _Reader()
    for line in text.splitlines():
        reader.feed(line)
    if not reader.chips:
        raise UsageError(
            f"no npu-smi device rows found (text starts with {clip(text)!r})",
            "pass the table printed by `npu-smi info`, not another npu-smi subcommand or tool",
        )
    return NpuSmiInfo(reader.version, tuple(reader.chips), tuple(reader.processes),
                      tuple(reader.idle))


def npu_samples(info: NpuSmiInfo, t_ns: int) -> list[Sample]:
    """Samples for every chip and every process of one `npu-smi info` reading."""
    samples: list[Sample] = []
    for chip in info.chips:
        samples += make_samples(t_ns, "npu", _chip_values(chip), _chip_labels(chip))
    for proc in info.processes:
        labels = {"device": str(proc.npu), "chip": _str(proc.chip), "pid": str(proc.pid),
                  "process": proc.name}
        samples += make_samples(t_ns, "npu", {"proc_mem_mb": proc.mem_mb}, labels)
    return samples


def _chip_values(chip: NpuChip) -> dict[str, float | None]:
    has_hbm = bool(chip.hbm_total_mb)
    used, total = (chip.hbm_used_mb, chip.hbm_total_mb) if has_hbm else (chip.ddr_used_mb, chip.ddr_total_mb)
    values: dict[str, float | None] = {
        "util_pct": chip.aicore_pct,
        "mem_used_mb": used if total else None,
        "mem_total_mb": total or None,
        "power_w": chip.power_w,
        "temp_c": chip.temp_c,
        "health_ok": (1.0 if chip.health.upper() == "OK" else 0.0) if chip.health else None,
    }
    if has_hbm and chip.ddr_total_mb:
        values |= {"ddr_used_mb": chip.ddr_used_mb, "ddr_total_mb": chip.ddr_total_mb}
    return values


def _chip_labels(chip: NpuChip) -> dict[str, str]:
    labels = {"device": str(chip.npu), "chip": _str(chip.chip), "name": chip.name,
              "health": chip.health, "bus_id": chip.bus_id}
    if chip.phy_id is not None:
        labels["phy_id"] = str(chip.phy_id)
    return labels


def _str(value: int | None) -> str:
    return "" if value is None else str(value)


class _Reader:
    """Line-by-line state: which table we are in, its header names, a head row awaiting its sub row."""

    def __init__(self) -> None:
        self.version: str | None = None
        self.chips: list[NpuChip] = []
        self.processes: list[NpuProcess] = []
        self.idle: list[int] = []
        self.mode = "device"
        self.head_keys: tuple[str, ...] = _DEFAULT_HEAD
        self.sub_keys: tuple[str, ...] = _DEFAULT_SUB
        self.proc_keys: tuple[str, ...] = _DEFAULT_PROC
        self.pending: dict[str, object] | None = None
        self.last_head: dict[str, object] | None = None

    def feed(self, line: str) -> None:
        if self.version is None and (found := _VERSION.search(line)):
            self.version = found.group(1)
        if idle := _IDLE.search(line):
            self.idle.append(int(idle.group(1)))
            self.mode = "process"
            return
        cells = _cells(line)
        if cells is None or self._header(cells):
            return
        if self.mode == "process" or (len(cells) >= 4 and integer(cells[1]) is not None):
            self._process_row(cells)
        else:
            self._device_row(cells)

    def _header(self, cells: list[str]) -> bool:
        joined = " ".join(cells).lower()
        if "process id" in joined:
            self.mode, self.proc_keys = "process", _proc_keys(cells)
        elif len(cells) >= 3 and cells[1].lower() == "health":
            self.mode, self.head_keys = "device", _value_keys(cells[2], _DEFAULT_HEAD)
        elif len(cells) >= 3 and cells[1].lower() == "bus-id":
            self.mode, self.sub_keys = "device", _value_keys(cells[2], _DEFAULT_SUB)
        else:
            return False
        return True

    def _device_row(self, cells: list[str]) -> None:
        if len(cells) < 3:
            return
        ints = [integer(tok) for tok in cells[0].split()]
        if _BUS_ID.fullmatch(cells[1]) or (self.pending and ints and None not in ints):
            self._sub_row(cells, ints)
        elif ints and ints[0] is not None:
            self._head_row(cells, ints[0])

    def _head_row(self, cells: list[str], npu: int) -> None:
        name = " ".join(cells[0].split()[1:])
        values = _assign(_fields(cells[2]), self.head_keys, _DEFAULT_HEAD)
        self.pending = {"npu": npu, "name": name, "health": cells[1], **values}
        self.last_head = self.pending

    def _sub_row(self, cells: list[str], ints: list[int | None]) -> None:
        if self.pending is not None:
            head, self.pending = self.pending, None
        elif self.last_head is not None:
            # another chip row under the same head row: board power/temperature are not its own
            head = {**self.last_head, "power": None, "temp": None}
        else:
            return
        sub = _assign(_fields(cells[2]), self.sub_keys, _DEFAULT_SUB)
        self.chips.append(_chip(head, sub, ints, cells[1]))

    def _process_row(self, cells: list[str]) -> None:
        row = dict(zip(self.proc_keys, cells, strict=False))
        ids = [integer(tok) for tok in row.get("npu", "").split()]
        pid = integer(row.get("pid", ""))
        if not ids or ids[0] is None or pid is None:
            return
        chip = ids[1] if len(ids) > 1 else None
        self.processes.append(NpuProcess(ids[0], chip, pid, row.get("name", ""),
                                         number(row.get("mem", ""))))


def _chip(head: dict[str, object], sub: dict[str, Field], ints: list[int | None], bus: str) -> NpuChip:
    hbm_used, hbm_total = _pair(sub.get("hbm"))
    ddr_used, ddr_total = _pair(sub.get("ddr"))
    return NpuChip(
        npu=int(str(head["npu"])), chip=ints[0] if ints else None,
        phy_id=ints[1] if len(ints) > 1 else None,
        name=str(head["name"]), health=str(head["health"]), bus_id=bus,
        power_w=_scalar(head.get("power")), temp_c=_scalar(head.get("temp")),
        aicore_pct=_scalar(sub.get("aicore")),
        hbm_used_mb=hbm_used, hbm_total_mb=hbm_total, ddr_used_mb=ddr_used, ddr_total_mb=ddr_total,
    )


def _cells(line: str) -> list[str] | None:
    stripped = line.strip()
    if not stripped.startswith("|"):
        return None
    return [cell.strip() for cell in stripped.strip("|").split("|")]


def _fields(cell: str) -> list[Field]:
    """'162.6  34  0    / 0' -> ['162.6', '34', ('0', '0')]."""
    return [(m.group(1), m.group(2)) if m.group(3) is None else m.group(3)
            for m in _FIELD.finditer(cell)]


def _value_keys(header: str, default: tuple[str, ...]) -> tuple[str, ...]:
    names = [tok.lower() for tok in header.split() if "(" in tok]
    keys = tuple(next((key for word, key in _HEADER_KEYS if word in name), name) for name in names)
    return keys or default


def _assign(fields: list[Field], keys: tuple[str, ...], default: tuple[str, ...]) -> dict[str, Field]:
    """Match values to header names; if the counts disagree, fall back to the classic layout."""
    if len(fields) != len(keys) and len(fields) == len(default):
        keys = default
    return dict(zip(keys, fields, strict=False))


def _proc_keys(cells: list[str]) -> tuple[str, ...]:
    keys = []
    for cell in cells:
        low = cell.lower()
        keys.append(next((key for word, key in _PROC_KEYS if word in low), low))
    return tuple(keys)


def _scalar(field: object) -> float | None:
    return number(field) if isinstance(field, str) else None


def _pair(field: object) -> tuple[float | None, float | None]:
    if isinstance(field, tuple):
        return number(field[0]), number(field[1])
    return None, None
