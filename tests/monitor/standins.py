"""Test doubles for tools that cannot exist on this machine, named as such: a stand-in nvidia-smi (an
executable on PATH) and a stand-in NVML (a `pynvml` module). Both report a constant power per GPU, so the
energy of any window is known exactly; the stand-in nvidia-smi also stops answering (fails, or hangs past
the sampler's timeout) while the clock is inside an outage written to its control file, and prints real
`nvidia-smi -q` / `topo -m` / table captures (tests/fixtures/monitor/nvidia-smi/) for `doctor`."""

from __future__ import annotations

import stat
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path

from .helpers import FIXTURES

SMI = FIXTURES / "nvidia-smi"

_SCRIPT = '''\
"""stand-in nvidia-smi (a test double): constant power per GPU; real captures for -q, topo -m and the table."""
import os, sys, time
CFG = {cfg!r}
window = open(CFG["control"]).read().split() if os.path.exists(CFG["control"]) else []
if len(window) == 3 and int(window[0]) <= time.monotonic_ns() < int(window[1]):
    if window[2] == "hang":
        time.sleep(30)
    sys.stderr.write("Unable to determine the device handle for GPU0000:18:00.0: Unknown Error\\n")
    sys.exit(15)
args = sys.argv[1:]
for flag, path in CFG["files"].items():
    if args == flag.split() and path:
        sys.stdout.write(open(path).read())
        sys.exit(0)
if args and args[0].startswith("--query-gpu="):
    for i in range(CFG["gpus"]):
        sys.stdout.write(f"{{i}}, NVIDIA H200, GPU-standin-{{i}}, 87, 70123, 143771, {{CFG['watts']:.2f}}, 61\\n")
    sys.exit(0)
sys.stderr.write("stand-in nvidia-smi: not a command it answers: " + " ".join(args) + "\\n")
sys.exit(2)
'''


@dataclass
class StandInSmi:
    """The stand-in's executable (its folder goes first on PATH) and its outage control."""

    path: Path
    control: Path

    @property
    def folder(self) -> Path:
        return self.path.parent

    def outage(self, seconds: float, mode: str = "fail") -> tuple[int, int]:
        """Stop answering from now for `seconds` (`fail`: exit 15 at once; `hang`: sleep past the timeout);
        the outage's (start, end) on the requests' clock."""
        start = time.monotonic_ns()
        end = start + int(seconds * 1e9)
        self.control.write_text(f"{start} {end} {mode}\n")
        return start, end


def standin_nvidia_smi(tmp: Path, gpus: int = 1, watts: float = 400.0, query_log: str | None = "h200-gls-q.txt",
                       topo: str | None = "p4d-24xlarge-topo.txt", table: str | None = "h200-gls-table.txt"
                       ) -> StandInSmi:
    """Write the stand-in nvidia-smi into tmp/bin (a fresh folder) and return it."""
    folder = tmp / "standin-bin"
    folder.mkdir(exist_ok=True)
    files = {"-q": query_log, "topo -m": topo, "": table}
    cfg = {"gpus": gpus, "watts": watts, "control": str(tmp / "standin-outage"),
           "files": {flag: str(SMI / name) if name else None for flag, name in files.items()}}
    path = folder / "nvidia-smi"
    path.write_text(f"#!{sys.executable} -S\n" + _SCRIPT.format(cfg=cfg))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return StandInSmi(path, tmp / "standin-outage")


def standin_pynvml(gpus: int = 1, watts: float = 400.0, clock=time.monotonic_ns,
                   outage: list[int] | None = None) -> types.ModuleType:
    """A stand-in NVML module (`pynvml`): constant power, and the total-energy counter that power gives since
    the clock's zero (mJ). While the clock is within `outage` ([start, end) ns, set at any time) every reading
    fails with NVMLError."""
    nv = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def live(value):
        def read(*args):
            if outage and outage[0] <= clock() < outage[1]:
                raise NVMLError("GPU is lost")
            return value(*args)
        return read

    memory = types.SimpleNamespace(total=143771 * 2**20, free=73648 * 2**20, used=70123 * 2**20)
    nv.NVMLError = NVMLError
    nv.NVML_TEMPERATURE_GPU = 0
    nv.nvmlInit = lambda: None
    nv.nvmlDeviceGetCount = lambda: gpus
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetName = lambda h: "NVIDIA H200"
    nv.nvmlDeviceGetUUID = lambda h: f"GPU-standin-{h}"
    nv.nvmlDeviceGetMemoryInfo = live(lambda h: memory)
    nv.nvmlDeviceGetUtilizationRates = live(lambda h: types.SimpleNamespace(gpu=87, memory=40))
    nv.nvmlDeviceGetPowerUsage = live(lambda h: int(watts * 1000))
    nv.nvmlDeviceGetTemperature = live(lambda h, sensor: 61)
    nv.nvmlDeviceGetTotalEnergyConsumption = live(lambda h: int(watts * clock() / 1e6))     # W x ns / 1e6 = mJ
    return nv
