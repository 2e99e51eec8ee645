"""A private local Ray cluster for tests: `ray start` processes on 127.0.0.1, bounded in time, stopped
by process group (never `ray stop`, which would stop every Ray cluster of the user on this machine)."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import ray

RAY = str(Path(sys.executable).with_name("ray"))
START_S = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    """One Ray node in the foreground (--block) in its own process group, so stopping it stops only it."""
    with open(log, "wb") as out:
        return subprocess.Popen([RAY, "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                                 "--disable-usage-stats", *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _stop(procs: list[subprocess.Popen]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.2)


def _check(deadline: float, procs: list[subprocess.Popen]) -> None:
    if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
        raise RuntimeError(f"the two-node Ray cluster did not come up within {START_S} s (or a node died)")
    time.sleep(0.5)


def _wait_port(port: int, deadline: float, procs: list[subprocess.Popen]) -> None:
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        _check(deadline, procs)


def _wait_nodes(address: str, n: int, deadline: float, procs: list[subprocess.Popen]) -> None:
    ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    while sum(1 for node in ray.nodes() if node["Alive"]) < n:
        _check(deadline, procs)


@contextlib.contextmanager
def local_cluster(tmp_path: Path, monkeypatch, resources: list[str]) -> Iterator[str]:
    """A private Ray cluster of len(resources) nodes on 127.0.0.1 (one `ray start --block` each, with
    that --resources value), the driver connected; yields its address. Always stopped (process groups)."""
    port, deadline = free_port(), time.monotonic() + START_S
    for name, value in (("RAY_USAGE_STATS_ENABLED", "0"), ("RAY_AUTH_MODE", "disabled"), ("HOME", str(tmp_path))):
        monkeypatch.setenv(name, value)      # no token or settings from the user's ~/.ray: a private cluster
    env = dict(os.environ)
    address = f"127.0.0.1:{port}"
    short = tempfile.mkdtemp(prefix="tbray", dir="/tmp")     # Ray's unix sockets need a short path
    procs = [_node(["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={short}",
                    f"--resources={resources[0]}"], env, tmp_path / "head.log")]
    try:
        _wait_port(port, deadline, procs)
        for i, more in enumerate(resources[1:]):
            procs.append(_node([f"--address={address}", f"--resources={more}"], env, tmp_path / f"node{i}.log"))
        _wait_nodes(address, len(resources), deadline, procs)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        _stop(procs)
        shutil.rmtree(short, ignore_errors=True)


