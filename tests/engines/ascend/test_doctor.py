"""`tokenbench doctor`: real values on this machine; check/apply against a fake sysfs/procfs tree.

Never applies anything to this machine's real /proc or /sys: every --apply here targets a temp root.
Lack of permission is real, not mocked: the tree is made read-only and, when the tests run as root
(who ignores file modes), the apply runs in a forked child that has given up CAP_DAC_OVERRIDE: it still
reads the checkout and its venv wherever they are (even under a directory only root can traverse), but
the read-only tree refuses its writes as it would any user's.
"""

from __future__ import annotations

import ctypes
import errno
import io
import json
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.host import doctor
from tokenbench.spec.deploy_profile import HostTuning

from .ascend_helpers import STUDY_A

CAP_DAC_OVERRIDE = 1                                     # linux/capability.h
TUNING = HostTuning(cpu_governor="performance", swappiness=0, numa_balancing=0, sched_migration_cost_ns=50000,
                    shm_min_gb=0.001, hugepages=0)


def fake_root(base: Path, cpus: int = 4) -> Path:
    root = base / "root"
    for i in range(cpus):
        f = root / f"sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor"
        f.parent.mkdir(parents=True)
        f.write_text("powersave\n")
    for rel, value in (("proc/sys/vm/swappiness", "60"), ("proc/sys/kernel/numa_balancing", "1"),
                       ("proc/sys/vm/nr_hugepages", "0")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(value + "\n")
    (root / "dev/shm").mkdir(parents=True)
    return root


def read_only(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        path.chmod(0o555 if path.is_dir() else 0o444)
    root.chmod(0o555)


@pytest.fixture
def read_only_root(tmp_path):
    """A fake tree made read-only; writable again afterwards, so the temp dir can be removed."""
    root = fake_root(tmp_path)
    read_only(root)
    yield root
    for p in [root, *root.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_dac_override() -> None:
    """Take CAP_DAC_OVERRIDE from this (root) process for good (capset(2)): file modes then bind it when it
    writes, as they bind any user, while CAP_DAC_READ_SEARCH still lets it read every file and module,
    wherever the checkout is and whoever may traverse it."""
    libc = ctypes.CDLL(None, use_errno=True)
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()        # _LINUX_CAPABILITY_VERSION_3
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    data[0].effective &= ~(1 << CAP_DAC_OVERRIDE)
    data[0].permitted &= ~(1 << CAP_DAC_OVERRIDE)
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def unprivileged(fn) -> tuple[object, str]:
    """Run fn() without write permission on the tree: directly when not root, else in a forked child that
    has given up CAP_DAC_OVERRIDE. Returns (fn's JSON-able result, what it printed)."""
    if os.geteuid() != 0:
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(out):
            return fn(), out.getvalue()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                          # child: drop the override, run, report, exit
        code = 1
        try:
            os.close(r)
            drop_dac_override()
            out = io.StringIO()
            with redirect_stdout(out), redirect_stderr(out):
                result = fn()
            os.write(w, json.dumps([result, out.getvalue()]).encode())
            code = 0
        except BaseException as exc:                      # report it to the parent
            os.write(w, json.dumps(["child failed", repr(exc)]).encode())
        finally:
            os._exit(code)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    result, printed = json.loads(data)
    assert os.waitstatus_to_exitcode(status) == 0, f"the unprivileged child failed: {printed}"
    return result, printed


def test_this_machine_reports_current_values(capsys):
    values = doctor.current_values()
    assert set(values) == set(doctor.ORDER)
    swappiness = Path("/proc/sys/vm/swappiness")
    if swappiness.exists():
        assert values["swappiness"] == int(swappiness.read_text())
    for s in doctor.check():                             # every item has a value or says why not
        assert s.current is not None or s.source.startswith(("absent", "unreadable"))
        assert s.status == "-"                           # no profile: nothing recommended
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "vm.swappiness" in out and "/dev/shm" in out
    assert main(["doctor", STUDY_A, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["key"]: r for r in data["settings"]}
    assert rows["swappiness"]["recommended"] == 0 and rows["sched_migration_cost_ns"]["recommended"] == 50000


def test_check_against_a_profile(tmp_path):
    root = fake_root(tmp_path)
    settings = {s.key: s for s in doctor.check(TUNING, root)}
    assert (settings["cpu_governor"].current, settings["cpu_governor"].status) == ("powersave", "differs")
    assert settings["swappiness"].status == "differs" and settings["numa_balancing"].current == 1
    assert settings["sched_migration_cost_ns"].current is None
    assert settings["sched_migration_cost_ns"].status == "unknown"
    assert "absent" in settings["sched_migration_cost_ns"].source
    assert settings["hugepages"].status == "ok" and settings["shm_gb"].status == "ok"


def test_mixed_governors(tmp_path):
    root = fake_root(tmp_path)
    (root / "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor").write_text("performance\n")
    value, _ = doctor.Host(root).read("cpu_governor")
    assert value == "performance x1, powersave x3"


def test_sched_migration_cost_in_debugfs(tmp_path):
    root = fake_root(tmp_path)
    f = root / "sys/kernel/debug/sched/migration_cost_ns"
    f.parent.mkdir(parents=True)
    f.write_text("500000\n")
    assert doctor.Host(root).read("sched_migration_cost_ns") == (500000, str(f))


def test_apply_where_permitted(tmp_path):
    root = fake_root(tmp_path)
    outcomes = {o.key: o for o in doctor.apply(TUNING, root)}
    assert outcomes["cpu_governor"].changed and outcomes["swappiness"].message == "set 60 -> 0"
    assert outcomes["numa_balancing"].changed and not outcomes["hugepages"].changed
    assert "absent" in outcomes["sched_migration_cost_ns"].message
    assert "already" in outcomes["shm_gb"].message
    assert all(f.read_text().strip() == "performance" for f in doctor.Host(root).governor_files())
    assert (root / "proc/sys/vm/swappiness").read_text().strip() == "0"


def test_apply_without_permission_explains(read_only_root):
    root = read_only_root
    outcomes, _ = unprivileged(lambda: [[o.key, o.changed, o.message] for o in doctor.apply(TUNING, root)])
    by_key = {k: (changed, msg) for k, changed, msg in outcomes}
    for key in ("cpu_governor", "swappiness", "numa_balancing"):
        changed, msg = by_key[key]
        assert not changed and "permission denied" in msg and "run as root" in msg
    assert "absent" in by_key["sched_migration_cost_ns"][1]
    assert (root / "proc/sys/vm/swappiness").read_text().strip() == "60"     # nothing changed


def test_cli_apply_without_permission(read_only_root):
    root = read_only_root
    code, printed = unprivileged(lambda: main(["doctor", STUDY_A, "--apply", "--root", str(root)]))
    assert code == 1
    assert "permission denied" in printed and "not applied" in printed
    assert "kernel.sched_migration_cost_ns" in printed


def test_apply_needs_a_profile(capsys):
    assert main(["doctor", "--apply"]) == 2
    assert "needs a PROFILE" in capsys.readouterr().err


@pytest.mark.parametrize("code,needle", [(errno.EROFS, "read-only"), (errno.EINVAL, "rejected"),
                                         (errno.ENOENT, "absent"), (errno.EPERM, "permission denied")])
def test_write_error_messages(code, needle):
    assert needle in doctor._write_error(OSError(code, os.strerror(code)), Path("/proc/sys/x"), 1)
