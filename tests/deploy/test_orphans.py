
"""A deployment owned by a tokenbench that died (SIGKILL mid-sweep) is reaped by the next launch:
a container is removed by name (it outlives the docker client), the state file goes; deployments
of a live owner and of `deploy up` (no owner) are left alone."""

from __future__ import annotations

import dataclasses
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tokenbench.deploy import lifecycle, local, profiles, state
from tokenbench.deploy.state import DeploymentState

from .helpers import SLEEPER, gone, write_profile

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test


def _docker(tmp_path: Path) -> Path:
    """A `docker` CLI stand-in (no container can run here) that records every call."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "docker"
    script.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/docker-calls\nexit 0\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bindir


def _dead_process() -> tuple[int, float]:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    started = local.create_time(proc.pid)
    proc.wait()
    return proc.pid, started


def _state(name: str, port: int, owner: tuple[int | None, float | None], runs_in: str = "container",
           pid: int | None = None) -> DeploymentState:
    pid, started = pid or _dead_process()[0], 0.0
    return DeploymentState(id=f"{name}-{port}", profile=name, engine="vllm", pid=pid, pgid=pid,
                           create_time=started, host="127.0.0.1", port=port, base_url=f"http://127.0.0.1:{port}",
                           log_path="/dev/null", started_at="2026-11-30T00:00:00+00:00",
                           argv=["docker", "run", "--rm", "--name", f"tokenbench-{name}-{port}", "img"],
                           runs_in=runs_in, owner_pid=owner[0], owner_create_time=owner[1])


def test_orphans_of_a_dead_owner_are_reaped_and_others_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_docker(tmp_path)}:{os.environ['PATH']}")
    directory = tmp_path / "state"
    me = (os.getpid(), local.create_time(os.getpid()))
    state.save(directory, _state("orphan", 31001, _dead_process()))
    state.save(directory, _state("live-owner", 31002, me))
    state.save(directory, _state("deploy-up", 31003, (None, None)))
    said: list[str] = []
    assert lifecycle.reap_orphans(directory, said.append) == ["orphan-31001"]
    assert (tmp_path / "docker-calls").read_text().split("\n")[0] == "rm -f tokenbench-orphan-31001"
    assert sorted(s.id for s in state.load_all(directory)) == ["deploy-up-31003", "live-owner-31002"]
    assert "gone" in said[0]


def test_a_reused_owner_pid_is_not_mistaken_for_the_owner(tmp_path, monkeypatch):
    """Same pid, different creation time: the owner is gone even though the pid runs."""
    monkeypatch.setenv("PATH", f"{_docker(tmp_path)}:{os.environ['PATH']}")
    directory = tmp_path / "state"
    state.save(directory, _state("recycled", 31004, (os.getpid(), 1.0)))
    assert lifecycle.reap_orphans(directory) == ["recycled-31004"]


def test_the_next_launch_reaps_and_owned_deployments_record_their_owner(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_docker(tmp_path)}:{os.environ['PATH']}")
    directory = tmp_path / "state"
    state.save(directory, _state("orphan", 31005, _dead_process()))
    prof = profiles.load_profile(str(write_profile(tmp_path, "sleeper", code=SLEEPER)))
    dep = lifecycle.launch(prof, directory, how=lifecycle.LaunchOptions(owned=True))
    try:
        [st] = state.load_all(directory)
        assert st.id == dep.state.id and st.owner_pid == os.getpid()
        assert "rm -f tokenbench-orphan-31005" in (tmp_path / "docker-calls").read_text()
    finally:
        dep.stop()


def test_a_local_orphan_still_running_is_stopped(tmp_path, monkeypatch):
    """Had the engine outlived its owner (no PR_SET_PDEATHSIG off Linux), the reaper stops its group."""
    directory = tmp_path / "state"
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        st = dataclasses.replace(_state("local", 31006, _dead_process(), runs_in="local", pid=engine.pid),
                                 create_time=local.create_time(engine.pid), argv=["python"])
        state.save(directory, st)
        assert lifecycle.reap_orphans(directory, grace_s=2) == ["local-31006"]
        engine.wait(timeout=10)
        assert gone(engine.pid)
    finally:
        if engine.poll() is None:
            os.killpg(engine.pid, signal.SIGKILL)
