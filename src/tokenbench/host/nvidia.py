"""GPU settings that move inference numbers on an NVIDIA host, read with `nvidia-smi -q` and `nvidia-smi
topo -m` (parsed by monitor/nvidia_text.py): driver and CUDA versions, persistence mode, clocks (and what
holds them down), the power limit, ECC, MIG and the links between the GPUs a tensor-parallel group uses.
Each row says what it found, what is recommended, and the fix. Nothing here changes a setting.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass

from tokenbench.monitor._text import clip
from tokenbench.monitor.nvidia_text import GpuFacts, SmiLog, Topology, parse_query_log, parse_topology
from tokenbench.spec.deploy_profile import Profile

Runner = Callable[[list[str]], str]
TIMEOUT_S = 15.0
DRIVER_FIX = ("the engine's CUDA build needs a driver whose CUDA version (the `CUDA Version` nvidia-smi prints) is "
              "at least its own; upgrade the driver, or use an engine image built for this CUDA")


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuCheck:
    key: str
    label: str
    current: str | None
    recommended: str | None
    status: str            # ok | differs | unknown | - (nothing to recommend)
    source: str
    fix: str


class NvidiaSmiError(Exception):
    """nvidia-smi is missing or failed; the message says which."""


def run_nvidia_smi(args: list[str]) -> str:
    if shutil.which("nvidia-smi") is None:
        raise NvidiaSmiError("nvidia-smi not found on PATH")
    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=False, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NvidiaSmiError(f"nvidia-smi {' '.join(args)} could not run: {exc}") from exc
    if done.returncode != 0:
        first = (done.stderr or done.stdout).strip().splitlines()[:1] or ["no output"]
        raise NvidiaSmiError(f"nvidia-smi {' '.join(args)} exited with {done.returncode}: {first[0][:200]}")
    return done.stdout


def applies(profile: Profile | None) -> bool:
    """GPU rows for an NVIDIA profile, or without a profile on a host with nvidia-smi."""
    if profile is not None:
        return profile.accelerator == "nvidia"
    return shutil.which("nvidia-smi") is not None


NOT_TOLD = "not told by nvidia-smi -q"
_NA = ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]")


def _told(gpus: list[GpuFacts], value: Callable[[GpuFacts], str | float | None]) -> bool:
    """Whether nvidia-smi gave the setting for some GPU (N/A and Not Supported give nothing)."""
    return any((v := value(g)) is not None and str(v).strip() not in _NA for g in gpus)


def _by_gpu(gpus: list[GpuFacts], value: Callable[[GpuFacts], str | None]) -> str | None:
    """'Enabled x8', or 'GPU 0: Enabled; GPU 1: Disabled' when they differ."""
    values = [value(g) or "N/A" for g in gpus]
    if not values:
        return None
    if len(set(values)) == 1:
        return values[0] + (f" x{len(values)}" if len(values) > 1 else "")
    return "; ".join(f"GPU {g.reading.index}: {v}" for g, v in zip(gpus, values, strict=True))


def _mhz(v: float | None) -> str:
    return "?" if v is None else f"{v:g}"


def _versions(log: SmiLog) -> list[GpuCheck]:
    return [GpuCheck(key="driver", label="NVIDIA driver", current=log.driver or NOT_TOLD, recommended=None,
                     status="-" if log.driver else "unknown", source="nvidia-smi -q", fix=DRIVER_FIX),
            GpuCheck(key="cuda", label="CUDA version (driver's highest)", current=log.cuda or NOT_TOLD,
                     recommended=None, status="-" if log.cuda else "unknown", source="nvidia-smi -q", fix=DRIVER_FIX)]


def _status(told: bool, differs: bool) -> str:
    return "unknown" if not told else "differs" if differs else "ok"


def _persistence(gpus: list[GpuFacts]) -> GpuCheck:
    told = _told(gpus, lambda g: g.persistence)
    differs = any(g.persistence not in ("Enabled", *_NA) for g in gpus if g.persistence is not None)
    return GpuCheck(key="persistence", label="persistence mode",
                    current=_by_gpu(gpus, lambda g: g.persistence) if told else NOT_TOLD, recommended="Enabled",
                    status=_status(told, differs), source="nvidia-smi -q",
                    fix="`sudo nvidia-smi -pm 1` (or run nvidia-persistenced): without it the driver tears the GPU "
                    "down between processes and the next start pays for it")


def _clocks(gpus: list[GpuFacts]) -> GpuCheck:
    held = [f"GPU {g.reading.index}: {', '.join(g.throttles)}" for g in gpus if g.throttles]
    told = _told(gpus, lambda g: g.sm_clock_mhz or g.sm_clock_max_mhz or g.mem_clock_mhz or g.mem_clock_max_mhz)
    now = _by_gpu(gpus, lambda g: f"SM {_mhz(g.sm_clock_mhz)}/{_mhz(g.sm_clock_max_mhz)} MHz, memory "
                                  f"{_mhz(g.mem_clock_mhz)}/{_mhz(g.mem_clock_max_mhz)} MHz") if told else NOT_TOLD
    current = f"{now}; held by {'; '.join(held)}" if held else now
    return GpuCheck(key="clocks", label="clocks (now/max) and what holds them", current=current,
                    recommended="no clock event reason active but idle",
                    status="differs" if held else _status(told, False), source="nvidia-smi -q",
                    fix="`nvidia-smi -q -d PERFORMANCE` names the reason: cooling (thermal), the power limit (next "
                    "row) or a clock lock (`sudo nvidia-smi -rgc` removes a lock set with -lgc)")


def _power(gpus: list[GpuFacts]) -> GpuCheck:
    low = [g for g in gpus if g.power_limit_w is not None and g.power_default_w is not None
           and g.power_limit_w < g.power_default_w]
    known = any(g.power_limit_w is not None for g in gpus)
    now = _by_gpu(gpus, lambda g: None if g.power_limit_w is None else
                  f"{g.power_limit_w:g} W (default {_mhz(g.power_default_w)}, max {_mhz(g.power_max_w)})") \
        if known else NOT_TOLD
    fix = "; ".join(f"`sudo nvidia-smi -i {g.reading.index} -pl {g.power_default_w:g}`" for g in low)
    return GpuCheck(key="power_limit", label="power limit", current=now, recommended="the default limit",
                    status="differs" if low else "ok" if known else "unknown", source="nvidia-smi -q",
                    fix=fix or "a limit below the default caps throughput: `sudo nvidia-smi -i N -pl W` sets it")


def _ecc(gpus: list[GpuFacts]) -> GpuCheck:
    pending = [g for g in gpus if g.ecc and g.ecc_pending and g.ecc != g.ecc_pending]
    told = _told(gpus, lambda g: g.ecc)
    return GpuCheck(key="ecc", label="ECC mode",
                    current=_by_gpu(gpus, lambda g: g.ecc) if told else "N/A (not supported or not told)",
                    recommended=None, status="differs" if pending else "-", source="nvidia-smi -q",
                    fix="a change of ECC mode is pending: reboot (or reset the GPU) before measuring" if pending else
                    "ECC (on for data-centre GPUs) reserves memory and bandwidth: state it with the results; "
                    "`sudo nvidia-smi -e 0|1` changes it after a reset")


def _mig(gpus: list[GpuFacts]) -> GpuCheck:
    on = [g for g in gpus if g.mig == "Enabled"]
    mig = _by_gpu(gpus, lambda g: g.mig) if _told(gpus, lambda g: g.mig) else "N/A (not supported or not told)"
    return GpuCheck(key="mig", label="MIG mode", current=mig, recommended="Disabled (N/A: not supported)",
                    status="differs" if on else "ok", source="nvidia-smi -q",
                    fix="a MIG slice is a fraction of the GPU and its figures are not the whole GPU's: `sudo "
                    "nvidia-smi -i N -mig 0`, then reset the GPU")


def tp_groups(profile: Profile | None) -> list[list[int]]:
    """The GPUs of each tensor-parallel group the profile runs (each DP replica its own)."""
    if profile is None or profile.parallelism.tp <= 1:
        return []
    tp, dp = profile.parallelism.tp, profile.parallelism.dp
    devices = profile.devices or list(range(tp * dp))
    return [devices[r * tp:(r + 1) * tp] for r in range(dp) if len(devices) >= (r + 1) * tp]


def _links(topo: Topology, groups: list[list[int]]) -> tuple[str, list[str]]:
    """What links each group's GPUs, and the pairs that are not NVLink."""
    seen, slow = [], []
    for group in groups:
        kinds = sorted({topo.link(a, b) or "?" for a in group for b in group if a < b})
        seen.append(f"GPUs {','.join(map(str, group))}: {'/'.join(kinds)}")
        slow += [f"GPU{a}-GPU{b} {topo.link(a, b) or '?'}" for a in group for b in group
                 if a < b and not (topo.link(a, b) or "").startswith("NV")]
    return "; ".join(seen), slow


def _topology(topo: Topology, profile: Profile | None, source: str) -> list[GpuCheck]:
    groups = tp_groups(profile)
    every = sorted({a for a, _ in topo.links} | set(topo.cpus))
    if not every:
        return _unknown([("topology", "links between GPUs"), ("numa", "GPU NUMA / CPU affinity")],
                        f"{source} listed no GPU")
    kinds = sorted(set(topo.links.values()))
    if groups:
        now, slow = _links(topo, groups)
        link = GpuCheck(key="topology", label="links within each TP group", current=now,
                        recommended="NVLink (NV#) between TP ranks", status="differs" if slow else "ok", source=source,
                        fix=f"put the tensor-parallel ranks on NVLink-connected GPUs (profile `devices`); not NVLink: "
                        f"{', '.join(slow)}" if slow else "tensor parallelism's all-reduces run over NVLink")
    else:
        link = GpuCheck(key="topology", label="links between GPUs",
                        current=f"{'/'.join(kinds) or 'one GPU'} ({len(every)} GPUs)", recommended=None, status="-",
                        source=source, fix="with tensor parallelism (tp > 1) keep its ranks on NVLink (NV#) GPUs")
    numa = "; ".join(f"GPU {g}: NUMA {topo.numa.get(g, '?')} (CPUs {topo.cpus.get(g, '?')})" for g in every)
    return [link, GpuCheck(key="numa", label="GPU NUMA / CPU affinity", current=numa or None, recommended=None,
                           status="-", source=source,
                           fix="run the server's CPU threads on its GPUs' NUMA node (`numactl --cpunodebind=N`) and "
                           "the client elsewhere (--client-cpus)")]


def _unknown(keys: list[tuple[str, str]], why: str) -> list[GpuCheck]:
    return [GpuCheck(key=k, label=label, current=None, recommended=None, status="unknown", source=why,
                     fix="install the NVIDIA driver (it ships nvidia-smi), or run "
"where the GPUs are") for k, label in keys]


EVERY_ROW = [("driver", "NVIDIA driver"), ("persistence", "persistence mode"), ("clocks", "clocks"),
             ("power_limit", "power limit"), ("ecc", "ECC mode"), ("mig", "MIG mode"),
             ("topology", "links between GPUs")]


def check(profile: Profile | None = None, run: Runner = run_nvidia_smi) -> list[GpuCheck]:
    """Every GPU row; rows nvidia-smi could not give are `unknown`, saying why."""
    try:
        text = run(["-q"])
        log = parse_query_log(text)
    except NvidiaSmiError as exc:
        return _unknown(EVERY_ROW, str(exc))
    if not log.gpus:
        return _unknown(EVERY_ROW, f"nvidia-smi -q listed no GPU (it printed {clip(text)!r})")
    rows = [*_versions(log), _persistence(log.gpus), _clocks(log.gpus), _power(log.gpus), _ecc(log.gpus),
            _mig(log.gpus)]
    try:
        return rows + _topology(parse_topology(run(["topo", "-m"])), profile, "nvidia-smi topo -m")
    except NvidiaSmiError as exc:
        return rows + _unknown([("topology", "links between GPUs")], str(exc))


def as_records(checks: list[GpuCheck]) -> list[dict]:
    return [asdict(c) for c in checks]
