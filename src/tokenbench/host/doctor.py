"""Host settings that move inference numbers: read them, compare with a profile, set them if permitted.

Read from sysfs/procfs under an injectable `root` (tests point it at a temp tree):

    cpu_governor             /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor   (absent in most VMs)
    swappiness               /proc/sys/vm/swappiness
    numa_balancing           /proc/sys/kernel/numa_balancing                          (absent without NUMA)
    sched_migration_cost_ns  /proc/sys/kernel/sched_migration_cost_ns, or on kernels >= 5.13
                             /sys/kernel/debug/sched/migration_cost_ns (debugfs, root only)
    shm_gb                   size of the /dev/shm filesystem
    hugepages                /proc/sys/vm/nr_hugepages

`apply()` writes what differs and says, per item, what it could not set and why (permission, read-only
filesystem, absent on this kernel, rejected value). /dev/shm is never resized here.
"""

from __future__ import annotations

import errno
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from tokenbench.spec.deploy_profile import HostTuning

Value = str | int | float | None

GOVERNOR_GLOB = "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"
SYSCTLS = {   # key -> candidate paths (relative to root), first present wins
    "swappiness": ("proc/sys/vm/swappiness",),
    "numa_balancing": ("proc/sys/kernel/numa_balancing",),
    "sched_migration_cost_ns": ("proc/sys/kernel/sched_migration_cost_ns", "sys/kernel/debug/sched/migration_cost_ns"),
    "hugepages": ("proc/sys/vm/nr_hugepages",),
}
LABELS = {"cpu_governor": "CPU frequency governor", "swappiness": "vm.swappiness",
          "numa_balancing": "kernel.numa_balancing", "sched_migration_cost_ns": "kernel.sched_migration_cost_ns",
          "shm_gb": "/dev/shm size (GB)", "hugepages": "vm.nr_hugepages"}
ORDER = tuple(LABELS)
FIXES = {"cpu_governor": "`sudo cpupower frequency-set -g {v}`",
         "swappiness": "`sudo sysctl vm.swappiness={v}`",
         "numa_balancing": "`sudo sysctl kernel.numa_balancing={v}`",
         "sched_migration_cost_ns": "`sudo sysctl kernel.sched_migration_cost_ns={v}` (kernels >= 5.13: write "
                                    "/sys/kernel/debug/sched/migration_cost_ns)",
         "shm_gb": "`sudo mount -o remount,size={v:g}G /dev/shm`, or give the container --shm-size {v:g}g",
         "hugepages": "`sudo sysctl vm.nr_hugepages={v}`"}


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    current: Value
    recommended: Value
    source: str          # where it was read (or why it could not be)

    @property
    def label(self) -> str:
        return LABELS[self.key]

    @property
    def status(self) -> str:
        """ok | differs | unknown (not readable here) | - (no recommendation)."""
        if self.recommended is None:
            return "-"
        if self.current is None:
            return "unknown"
        if self.key == "shm_gb":
            return "ok" if float(self.current) >= float(self.recommended) else "differs"
        return "ok" if str(self.current) == str(self.recommended) else "differs"

    @property
    def fix(self) -> str:
        """How to set the recommended value (`--apply` does it where it can), or "" when nothing is recommended."""
        if self.recommended is None:
            return ""
        how = FIXES[self.key].format(v=self.recommended)
        return how if self.key == "shm_gb" else f"{how}, or `tokenbench doctor PROFILE --apply`"


@dataclass(frozen=True, slots=True)
class Outcome:
    key: str
    changed: bool
    message: str


class Host:
    """The sysfs/procfs view of one machine, rooted at `root` ("/" for this one)."""

    def __init__(self, root: str | Path = "/") -> None:
        self.root = Path(root)

    def governor_files(self) -> list[Path]:
        return sorted(self.root.glob(GOVERNOR_GLOB), key=lambda p: int(p.parent.parent.name[3:]))

    def sysctl_path(self, key: str) -> Path | None:
        for rel in SYSCTLS[key]:
            path = self.root / rel
            if _exists(path):
                return path
        return None

    def read(self, key: str) -> tuple[Value, str]:
        """(value, source); value None with the reason as source when it cannot be read."""
        if key == "cpu_governor":
            return self._governor()
        if key == "shm_gb":
            return self._shm()
        path = self.sysctl_path(key)
        if path is None:
            tried = " nor ".join(str(self.root / rel) for rel in SYSCTLS[key])
            return None, f"absent (neither {tried} exists)" if len(SYSCTLS[key]) > 1 else f"absent (no {tried})"
        try:
            return int(path.read_text().split()[0]), str(path)
        except (OSError, ValueError, IndexError) as exc:
            return None, f"unreadable {path}: {_why(exc)}"

    def _governor(self) -> tuple[Value, str]:
        files = self.governor_files()
        if not files:
            return None, "absent (no cpufreq in sysfs: a VM or a host without frequency scaling)"
        values = []
        for f in files:
            try:
                values.append(f.read_text().strip())
            except OSError as exc:
                return None, f"unreadable {f}: {_why(exc)}"
        distinct = sorted(set(values))
        value = distinct[0] if len(distinct) == 1 else ", ".join(f"{v} x{values.count(v)}" for v in distinct)
        return value, f"{self.root / GOVERNOR_GLOB} ({len(files)} CPUs)"

    def _shm(self) -> tuple[Value, str]:
        path = self.root / "dev" / "shm"
        try:
            st = os.statvfs(path)
        except OSError as exc:
            return None, f"unreadable {path}: {_why(exc)}"
        return round(st.f_blocks * st.f_frsize / 1e9, 1), str(path)


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:              # debugfs without permission
        return False


def recommended(tuning: HostTuning | None) -> dict[str, Value]:
    if tuning is None:
        return {k: None for k in ORDER}
    return {"cpu_governor": tuning.cpu_governor, "swappiness": tuning.swappiness,
            "numa_balancing": tuning.numa_balancing, "sched_migration_cost_ns": tuning.sched_migration_cost_ns,
            "shm_gb": tuning.shm_min_gb, "hugepages": tuning.hugepages}


def check(tuning: HostTuning | None = None, root: str | Path = "/") -> list[Setting]:
    """Current value of every setting beside the profile's recommendation."""
    host, rec = Host(root), recommended(tuning)
    return [_setting(host, k, rec[k]) for k in ORDER]


def _setting(host: Host, key: str, rec: Value) -> Setting:
    value, source = host.read(key)
    return Setting(key, value, rec, source)


def current_values(root: str | Path = "/") -> dict[str, Value]:
    """The values in effect, for run records (None where not readable)."""
    host = Host(root)
    return {k: host.read(k)[0] for k in ORDER}


def as_records(settings: list[Setting]) -> list[dict]:
    return [{**asdict(s), "label": s.label, "status": s.status, "fix": s.fix} for s in settings]


# ---- apply ----

def apply(tuning: HostTuning, root: str | Path = "/") -> list[Outcome]:
    """Try to set every recommended value that differs; one Outcome per recommended setting."""
    host = Host(root)
    out = []
    for s in check(tuning, root):
        if s.recommended is None:
            continue
        if s.status == "ok":
            out.append(Outcome(s.key, False, f"already {s.current}"))
        elif s.key == "shm_gb":
            out.append(Outcome(s.key, False, f"not resized by tokenbench (now {s.current} GB): run "
                               f"`mount -o remount,size={s.recommended:g}G /dev/shm` as root, or give the "
                               "container --shm-size"))
        else:
            out.append(_write(host, s))
    return out


def _write(host: Host, s: Setting) -> Outcome:
    paths = host.governor_files() if s.key == "cpu_governor" else [p for p in [host.sysctl_path(s.key)] if p]
    if not paths:
        return Outcome(s.key, False, f"not set: {s.source}")
    for path in paths:
        try:
            with open(path, "w") as f:
                f.write(f"{s.recommended}\n")
        except OSError as exc:
            return Outcome(s.key, False, f"not set: {_write_error(exc, path, s.recommended)}")
    after, _ = host.read(s.key)
    if str(after) != str(s.recommended):
        return Outcome(s.key, False, f"wrote {s.recommended} but the kernel now reports {after}")
    return Outcome(s.key, True, f"set {s.current} -> {after}")


def _write_error(exc: OSError, path: Path, value: Value) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied writing {path}: run as root (sudo tokenbench doctor PROFILE --apply)"
    if exc.errno == errno.EROFS:
        return (f"{path} is read-only here (a container's /proc/sys and /sys are): run on the host, or in a "
                "--privileged container")
    if exc.errno == errno.ENOENT:
        return f"absent: {path} does not exist on this kernel"
    if exc.errno == errno.EINVAL:
        return f"the kernel rejected '{value}' for {path} (not a valid value here)"
    return f"{path}: {_why(exc)}"


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)
