"""The host's CPU package energy counters (Linux powercap, RAPL): `intel-rapl:N/energy_uj` of each package
zone (AMD's RAPL is exposed under the same names), read as joules and unwrapped at `max_energy_range_uj`,
so each zone's series only ever rises. Sub-zones (core, uncore, dram) are left out: they are parts of the
package or beside it, and a sum with them would count twice. Where the host exposes no counter, or only to
root (Linux 5.10 and later make `energy_uj` root-only), `note` says so and `read()` returns nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

POWERCAP = "/sys/class/powercap"
_ZONE = re.compile(r"^intel-rapl:\d+$")
_UJ = 1e-6


class Rapl:
    def __init__(self, root: str | Path = POWERCAP) -> None:
        self.root = Path(root)
        self.note: str | None = None
        self._zones: dict[str, tuple[Path, float]] = {}     # name -> (energy_uj file, range in J)
        self._last: dict[str, float] = {}
        self._total: dict[str, float] = {}
        self._find()

    def _find(self) -> None:
        dirs = sorted(p for p in self._dirs() if (p / "name").is_file())
        packages = [p for p in dirs if _text(p / "name").startswith("package")]
        if not packages:
            self.note = (f"the host exposes no RAPL package counter ({self.root}/intel-rapl:N absent: a VM, a "
                         "container without /sys/class/powercap, or a CPU without RAPL)")
            return
        for p in packages:
            self._zones[_text(p / "name")] = (p / "energy_uj", _number(p / "max_energy_range_uj") * _UJ)
        if not self.read():
            first = packages[0] / "energy_uj"
            self.note = (f"RAPL counters not readable ({first}: root only since Linux 5.10): run as root, or "
                         f"`sudo chmod a+r {self.root}/intel-rapl:*/energy_uj`")
            self._zones.clear()

    def _dirs(self) -> list[Path]:
        try:
            return [p for p in self.root.iterdir() if _ZONE.match(p.name)]
        except OSError:
            return []

    def read(self) -> dict[str, float]:
        """Each package zone's energy so far (J, unwrapped); a zone that cannot be read now is left out."""
        out = {}
        for zone, (path, span) in self._zones.items():
            try:
                raw = int(path.read_text().split()[0]) * _UJ
            except (OSError, ValueError, IndexError):
                continue
            last = self._last.get(zone)
            step = 0.0 if last is None else _step(last, raw, span)
            self._last[zone] = raw
            self._total[zone] = self._total.get(zone, raw) + step
            out[zone] = self._total[zone]
        return out


def _step(last: float, raw: float, span: float) -> float:
    """The energy between two readings: a counter that fell wrapped at `span` (unknown span: from 0)."""
    if raw >= last:
        return raw - last
    return raw + span - last if span > last else raw


def _text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _number(path: Path) -> float:
    try:
        return float(_text(path) or 0)
    except ValueError:
        return 0.0
