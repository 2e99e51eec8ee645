"""A local engine process: started in its own process group, stopped with SIGTERM to the group,
then SIGKILL after a grace period, including any descendant that left the group."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from tokenbench.errors import DeployError

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the parent dies, even by SIGKILL (Linux prctl)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass(frozen=True)
class Placement:
    """Where an engine process runs: its CPUs (None: wherever this process may) and its niceness added."""

    cpus: frozenset[int] | None = None
    nice: int = 0


def _before_exec(die_with_parent: bool, placement: Placement) -> Callable[[], None] | None:
    """What the child does before exec: die with its parent, move to its CPUs, lower its priority (every
    thread the engine starts inherits both)."""
    tie = die_with_parent and sys.platform == "linux"
    if not tie and placement == Placement():
        return None

    def run() -> None:
        if tie:
            _die_with_parent()
        if placement.cpus:
            os.sched_setaffinity(0, placement.cpus)
        if placement.nice:
            os.nice(placement.nice)
    return run


def spawn(argv: list[str], env: dict[str, str], log_path: Path, die_with_parent: bool = False,
          placement: Placement = Placement()) -> subprocess.Popen:
    """Start in a new session; `die_with_parent` ties the engine's life to this process (sweeps, demo),
    so not even a SIGKILL of tokenbench leaves an orphan engine behind; `placement` pins it to CPUs and
    lowers its priority."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        try:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env={**os.environ, **env}, start_new_session=True, close_fds=True,
                                    preexec_fn=_before_exec(die_with_parent, placement))
        except OSError as exc:
            raise DeployError(f"cannot start '{argv[0]}': {exc.strerror or exc}",
                              "check the profile's command and that the engine is installed") from exc


def create_time(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def leader(pid: int, started: float) -> psutil.Process | None:
    """The process `pid` if it is still the one we started (same creation time) and not a zombie."""
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - started) > 0.01 or proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.Error:
        return None


def members(pid: int, pgid: int, started: float) -> list[psutil.Process]:
    """The leader, its descendants, and whatever else still runs in its process group."""
    found: dict[int, psutil.Process] = {}
    lead = leader(pid, started)
    if lead is not None:
        found[pid] = lead
        for child in _children(lead):
            found[child.pid] = child
    for proc in psutil.process_iter(["create_time"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["create_time"] >= started - 0.01:
                found.setdefault(proc.pid, proc)
        except (OSError, psutil.Error):
            continue
    return [p for p in found.values() if _alive(p)]


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal(procs: list[psutil.Process], pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass


def terminate(pid: int, pgid: int, started: float, grace_s: float = 10.0) -> None:
    """SIGTERM to the group and its descendants; SIGKILL to what is left after `grace_s`."""
    procs = members(pid, pgid, started)
    if not procs:
        return
    _signal(procs, pgid, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    if not alive:
        return
    _signal(alive, pgid, signal.SIGKILL)
    _, alive = psutil.wait_procs(alive, timeout=5)
    if alive:
        raise DeployError(f"processes {', '.join(str(p.pid) for p in alive)} survived SIGKILL",
                          "they are probably stuck in the kernel (D state); check `ps` and the device driver")
