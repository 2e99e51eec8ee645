"""The local lifecycle with fake engines (no model is loaded): clear errors before and after launch,
teardown of the whole process group, state that other invocations can use."""

from __future__ import annotations

import socket
import subprocess
import time

import psutil
import pytest

from tokenbench.cli.main import main
from tokenbench.deploy import lifecycle, profiles, state
from tokenbench.errors import DeployError

from .helpers import CRASHER, FORKER, SLEEPER, STUBBORN, gone, states, tokenbench_argv, write_profile

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test


def load(tmp_path, code=CRASHER, *overrides, **extra):
    return profiles.load_profile(str(write_profile(tmp_path, code=code, **extra)), list(overrides))


def test_port_in_use_fails_before_launch(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = load(tmp_path, CRASHER, f"port={port}")
        with pytest.raises(DeployError) as exc:
            lifecycle.start(p)
    assert f"port {port} on 127.0.0.1 is already in use" in exc.value.message and "--set port" in exc.value.hint
    assert not (tmp_path / "state").exists()          # nothing was launched or recorded


def test_missing_model_fails_before_launch(tmp_path):
    p = load(tmp_path, CRASHER, f"model.path={tmp_path / 'missing.gguf'}")
    with pytest.raises(DeployError, match="missing.gguf' does not exist"):
        lifecycle.start(p)
    assert not (tmp_path / "state").exists()


def test_engine_exiting_at_start_shows_code_and_log_tail(tmp_path):
    with pytest.raises(DeployError) as exc:
        lifecycle.start(load(tmp_path, CRASHER))
    msg = exc.value.message
    assert "exited with code 3 before it was ready" in msg
    assert "fatal: cannot load the weights (test marker)" in msg      # the log tail
    assert states(tmp_path / "state") == []


def test_readiness_timeout_stops_the_engine(tmp_path):
    p = load(tmp_path, "import time; print('still loading', flush=True); time.sleep(60)",
             "readiness.timeout_s=0.5")
    before = _children()
    t0 = time.monotonic()
    with pytest.raises(DeployError) as exc:
        lifecycle.start(p)
    assert 0.5 <= time.monotonic() - t0 < 30              # the timeout, not the engine's 60 s
    assert "not ready" in exc.value.message and "still loading" in exc.value.message
    assert "readiness.timeout_s" in exc.value.hint
    assert _children() <= before


def test_nonexistent_command(tmp_path):
    p = load(tmp_path, None, "command=[/nonexistent/engine]")
    with pytest.raises(DeployError, match="cannot start '/nonexistent/engine'"):
        lifecycle.start(p)


def test_teardown_escalates_to_sigkill_and_reaches_escaped_descendants(tmp_path):
    dep = lifecycle.launch(load(tmp_path, STUBBORN))
    _wait_log(dep.log_path, "ignoring SIGTERM")
    t0 = time.monotonic()
    dep.stop(grace_s=0.5)
    assert 0.5 <= time.monotonic() - t0 < 60 and gone(dep.state.pid)    # the grace, not the engine's 120 s

    dep = lifecycle.launch(load(tmp_path, FORKER))
    grandchild = int(_wait_log(dep.log_path, "grandchild").split()[1])
    assert psutil.Process(grandchild).status() != psutil.STATUS_ZOMBIE
    dep.stop(grace_s=2)
    assert gone(dep.state.pid) and gone(grandchild)
    assert states(tmp_path / "state") == []


def test_state_lets_another_invocation_see_and_stop_it(tmp_path, capsys):
    dep = lifecycle.launch(load(tmp_path, "import time; print('hello from the engine', flush=True); "
                                          "time.sleep(60)", "name=fake2"))
    try:
        _wait_log(dep.log_path, "hello")
        [st] = state.load_all(tmp_path / "state")
        assert (st.profile, st.pid, st.pgid, st.port) == ("fake2", dep.state.pid, dep.state.pid, dep.state.port)
        assert main(["deploy", "status"]) == 0
        out = capsys.readouterr().out
        assert st.id in out and "/health" in out       # alive, but not answering HTTP
        assert main(["deploy", "logs", "-n", "5"]) == 0
        assert "hello from the engine" in capsys.readouterr().out
        assert main(["deploy", "down", "nope"]) == 2
        assert main(["deploy", "down", "fake2"]) == 0
        assert gone(dep.state.pid)
        assert main(["deploy", "status"]) == 0
        assert "no deployments" in capsys.readouterr().err
    finally:
        dep.stop()


def test_down_all_and_stale_entries(tmp_path, capsys):
    a = lifecycle.launch(load(tmp_path, "import time; time.sleep(60)", "name=a"))
    b = lifecycle.launch(load(tmp_path, "import time; time.sleep(60)", "name=b"))
    b.stop()
    state.save(b.directory, b.state)          # a record whose process is gone
    assert main(["deploy", "status"]) == 0
    assert "exited" in capsys.readouterr().out
    assert main(["deploy", "down"]) == 2      # two recorded: which one?
    assert main(["deploy", "down", "--all"]) == 0
    assert gone(a.state.pid) and states(tmp_path / "state") == []


def test_cli_up_errors_have_exit_code_4(tmp_path, capsys):
    path = write_profile(tmp_path, code=CRASHER)
    assert main(["deploy", "up", str(path)]) == 4
    err = capsys.readouterr().err
    assert "exited with code 3" in err and "test marker" in err
    assert main(["deploy", "up", str(path), "--set", "paralelism.slots=2"]) == 2
    assert "unknown key 'paralelism'" in capsys.readouterr().err


def test_dry_run_prints_the_command(tmp_path, capsys):
    path = write_profile(tmp_path, code=None)
    assert main(["deploy", "up", str(path), "--dry-run", "--set", "port=8555"]) == 0
    out = capsys.readouterr().out
    assert "tokenbench.local_engines.llamacpp_server" in out and "--port 8555" in out
    assert states(tmp_path / "state") == []


def _wait_log(path, text: str, timeout_s: float = 20) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in path.read_text().splitlines() if path.exists() else []:
            if text in line:
                return line
        time.sleep(0.05)
    raise AssertionError(f"'{text}' never appeared in {path}")


def _children() -> set[int]:
    return {c.pid for c in psutil.Process().children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE}


def test_down_with_nothing_recorded(capsys):
    assert main(["deploy", "down"]) == 0
    assert "nothing to stop" in capsys.readouterr().err
    assert main(["deploy", "logs"]) == 2


@pytest.mark.slow
def test_status_from_another_directory_sees_the_deployment(tmp_path, monkeypatch):
    """State lives per user (XDG_STATE_HOME), not under the current directory: a deployment started in
    the project folder is listed by `tokenbench deploy status` run from elsewhere."""
    monkeypatch.delenv("TOKENBENCH_STATE")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir(), elsewhere.mkdir()
    monkeypatch.chdir(project)
    dep = lifecycle.launch(load(tmp_path, SLEEPER, "name=far"))
    try:
        out = subprocess.run(tokenbench_argv("deploy", "status"), cwd=elsewhere, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert dep.state.id in out.stdout + out.stderr
        assert (tmp_path / "xdg-state" / "tokenbench" / "deployments" / f"{dep.state.id}.json").is_file()
        assert not list(project.iterdir())            # nothing written under the working directory
    finally:
        dep.stop()
