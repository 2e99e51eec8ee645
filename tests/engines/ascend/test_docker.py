"""Quoting (profile values cannot inject arguments) and the no-docker path (clear error, nothing left)."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.deploy import container
from tokenbench.errors import DeployError

from .ascend_helpers import STUDY_A, load


def _evil_profile(with_shell: bool):
    sets = ["model.served_name='x; rm -rf /'", "args={}", "env={}", "host_tuning=null",
            "args.foo='--foo --bar'", "args.bar='$(touch PWNED)'", "extra_args=['a''b\"c']",
            "env.EVIL='x; rm -rf /'", f"setup={['true'] if with_shell else []}"]
    return load(STUDY_A, *sets)


@pytest.mark.parametrize("with_shell", [False, True])
def test_values_stay_single_arguments(tmp_path, with_shell):
    profile = _evil_profile(with_shell)
    argv = container.deploy_dry_run(profile, 31000)
    assert "EVIL=x; rm -rf /" in argv                    # one -e item, docker gets it verbatim
    if not with_shell:
        for value in ("x; rm -rf /", "--foo --bar", "$(touch PWNED)", "a'b\"c"):
            assert value in argv                          # each one argv item, no shell anywhere
        return
    script = argv[argv.index("-lc") + 1]
    # run the container's script here with `exec` pointed at printf: each argument on its own line
    probe = script.replace("\nexec ", "\nexec printf '<%s>\\n' ")
    out = subprocess.run(["bash", "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    items = [line[1:-1] for line in out.splitlines()]
    for value in ("x; rm -rf /", "--foo --bar", "$(touch PWNED)", "a'b\"c"):
        assert value in items
    assert not (tmp_path / "PWNED").exists()


def _fake_docker(tmp_path: Path, version_ok: bool, ps_output: str = "") -> Path:
    """A `docker` on PATH that records its calls; `version` fails like a CLI with no daemon."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "docker-calls"
    script = bindir / "docker"
    version = ('echo "28.2.2"; exit 0' if version_ok else
               'echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. '
               'Is the docker daemon running?" >&2; exit 1')
    script.write_text(f"""#!/bin/sh
echo "$@" >> {calls}
case "$1" in
  version) {version} ;;
  ps) printf '%s' "{ps_output}"; exit 0 ;;
  rm) exit 0 ;;
  run) echo "docker: Error response from daemon: error gathering device information" >&2; exit 125 ;;
esac
exit 0
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bindir


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "docker-calls"
    return path.read_text().splitlines() if path.exists() else []


def test_no_docker_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    ok, why = container.docker_available()
    assert not ok and "not installed" in why


def test_no_docker_engine_refuses_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_fake_docker(tmp_path, version_ok=False)}:{os.environ['PATH']}")
    log = tmp_path / "logs" / "server.log"
    with pytest.raises(DeployError) as err:
        container.start(load(STUDY_A), 31000, log)
    assert "no docker engine is reachable" in err.value.message
    assert "Cannot connect to the Docker daemon" in err.value.message
    assert "docker daemon" in err.value.hint and "--dry-run" in err.value.hint
    assert _calls(tmp_path) == ["version --format {{.Server.Version}}"]    # nothing created, no run
    assert not log.exists() and not log.parent.exists()


@pytest.mark.skipif(shutil.which("docker") is None or container.docker_available()[0],
                    reason="needs the docker CLI without a reachable engine (as on the dev machines)")
def test_real_docker_cli_without_engine(tmp_path):
    with pytest.raises(DeployError, match="no docker engine is reachable"):
        container.start(load(STUDY_A), 31000, tmp_path / "server.log")
    assert not (tmp_path / "server.log").exists()


def test_deploy_up_without_engine_fails_cleanly(tmp_path, monkeypatch, capsys):
    """Through the CLI and the lifecycle: non-zero exit, a one-line cause naming docker, no state left."""
    monkeypatch.setenv("PATH", f"{_fake_docker(tmp_path, version_ok=False)}:{os.environ['PATH']}")
    monkeypatch.setenv("TOKENBENCH_STATE", str(tmp_path / "state"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = main(["deploy", "up", STUDY_A, "--set", f"port={port}", "--set", "readiness.timeout_s=20"])
    err = capsys.readouterr().err
    assert code == DeployError.exit_code and "docker" in err.lower()
    state = tmp_path / "state"
    assert not state.exists() or not list(state.glob("*.json"))


@pytest.mark.parametrize("ps,needle", [("running tokenbench-x", "already running"),
                                       ("exited", "not started by tokenbench")])
def test_name_conflicts_are_refused(tmp_path, monkeypatch, ps, needle):
    monkeypatch.setenv("PATH", f"{_fake_docker(tmp_path, True, ps)}:{os.environ['PATH']}")
    with pytest.raises(DeployError, match=needle):
        container.preflight(load(STUDY_A), 31000)
    assert not any(c.startswith("rm") for c in _calls(tmp_path))


def test_stopped_leftover_of_ours_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_fake_docker(tmp_path, True, 'exited ' + STUDY_A)}:{os.environ['PATH']}")
    container.preflight(load(STUDY_A), 31000)
    assert f"rm -f tokenbench-{STUDY_A}-31000" in _calls(tmp_path)


def test_cleanup_removes_the_named_container(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_fake_docker(tmp_path, True)}:{os.environ['PATH']}")

    class St:
        argv = container.deploy_dry_run(load(STUDY_A), 31000)

    container.cleanup(St())
    assert _calls(tmp_path) == [f"rm -f tokenbench-{STUDY_A}-31000"]
