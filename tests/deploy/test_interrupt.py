"""Ctrl-C (SIGINT) or SIGTERM to tokenbench leaves no engine process: during the readiness wait
(fake engine that never gets ready) and during a benchmark (the real engine), where SIGINT first stores
the cut cell as interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from .helpers import SLEEPER, gone, script, states, tokenbench_argv, wait_for_state, write_profile

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test

SIGNALS = [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")]


def _spawn(argv: list[str]) -> subprocess.Popen:
    # SIGINT may be inherited as ignored (a background job); the real Ctrl-C case has it on.
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _interrupt(proc: subprocess.Popen, sig: int, timeout_s: float = 15) -> tuple[int, str]:
    """Send `sig`; the process must exit within timeout_s (the engine stops first, so whatever the
    interrupted code still does fails fast)."""
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"tokenbench did not exit within {timeout_s} s of {sig!r}:\n{out}") from exc
    return proc.returncode, out


def _wait_output(proc: subprocess.Popen, marker: str, timeout_s: float = 60) -> list[str]:
    """Read the child's output until a line contains `marker` (in a thread, so it cannot hang)."""
    lines: list[str] = []
    found = threading.Event()

    def reader():
        for line in proc.stdout:
            lines.append(line)
            if marker in line:
                found.set()
                return

    threading.Thread(target=reader, daemon=True).start()
    if not found.wait(timeout_s):
        proc.kill()
        raise AssertionError(f"'{marker}' never appeared:\n{''.join(lines)}")
    return lines


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("mode", ["--foreground", "detached"])
def test_interrupt_during_readiness_wait(tmp_path, sig, mode):
    path = write_profile(tmp_path, code=SLEEPER)
    extra = [mode] if mode != "detached" else []
    proc = _spawn(tokenbench_argv("deploy", "up", str(path), *extra))
    engine = wait_for_state(tmp_path / "state")["pid"]
    assert not gone(engine, timeout_s=0.3)
    code, out = _interrupt(proc, sig)
    assert code == 130, out
    assert gone(engine), f"engine {engine} survived {sig!r}"
    assert states(tmp_path / "state") == []


BENCH_SCRIPT = script("""
    import sys
    from tokenbench.deploy.lifecycle import deployed
    from tokenbench.deploy.profiles import load_profile
    from tokenbench.spec.study import StudySpec
    from tokenbench.study.run import measure
    from tokenbench.study.settings import StudyEvents

    with deployed(load_profile("cpu-smollm2-llamacpp")) as dep:
        spec = StudySpec(target={"base_url": dep.base_url}, pairs=[(16, 600)], concurrency=[2],
                         requests={"num_prompts": 8}, warmup_requests=1)
        started = lambda cell: print("BENCH STARTED", flush=True)
        measure(spec, events=StudyEvents(log=lambda m: None, cell_started=started))
    print("finished without interruption", flush=True)
""")


@pytest.mark.engine
@pytest.mark.parametrize("sig", SIGNALS)
def test_interrupt_during_benchmark(tmp_path, sig):
    proc = _spawn([sys.executable, "-c", BENCH_SCRIPT])
    _wait_output(proc, "BENCH STARTED")
    engine = wait_for_state(tmp_path / "state")["pid"]
    time.sleep(1.0)                                   # requests are streaming now
    code, out = _interrupt(proc, sig)
    assert code != 0 and "finished without interruption" not in out
    # SIGINT: the cell stops and is stored as interrupted (docs/reliability.md, "Interruptions"), then the
    # study says so; SIGTERM stops at once (the engine first)
    assert ("Interrupted: interrupted by the user in cell" if sig == signal.SIGINT else "KeyboardInterrupt") in out
    assert gone(engine), f"engine {engine} survived {sig!r}"
    assert states(tmp_path / "state") == []


@pytest.mark.engine
def test_sigterm_during_demo_benchmark(tmp_path):
    proc = _spawn(tokenbench_argv("demo", "--pairs", "16:400", "--concurrency", "2", "--num-prompts", "8"))
    _wait_output(proc, "3/4 benchmark")
    engine = wait_for_state(tmp_path / "state")["pid"]
    time.sleep(1.5)
    code, out = _interrupt(proc, signal.SIGTERM)
    assert code == 130, out
    assert gone(engine), f"engine {engine} survived SIGTERM"
    assert states(tmp_path / "state") == []
    assert os.path.exists(tmp_path / "results" / "tokenbench.db")      # the interrupted run is recorded
