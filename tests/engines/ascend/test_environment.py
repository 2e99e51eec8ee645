"""Environment capture: accelerators from npu-smi / nvidia-smi output, CANN from its install files,
the container image's tag, host tuning; nothing fails when a tool or file is absent."""

from __future__ import annotations

from pathlib import Path

from tokenbench.host import environment

from .ascend_helpers import STUDY_A, load

NPU_SMI = Path(__file__).parents[2] / "fixtures/monitor/npu-smi/25.2.0-910b4-1-masked-bus-truncated.txt"

# ascend_toolkit_install.info as printed in public vllm-ascend bug reports (CANN 8.2.RC1, aarch64)
TOOLKIT_INFO = """package_name=Ascend-cann-toolkit
version=8.2.RC1
innerversion=V100R001C22SPC001B231
compatible_version=[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C23]
arch=aarch64
os=linux
path=/usr/local/Ascend/ascend-toolkit/8.2.RC1/aarch64-linux
"""
VERSION_CFG = "runtime_running_version=[7.3.0.1.231:8.0.RC2]\ntoolkit_running_version=[7.3.0.1.231:8.0.RC2]\n"


def fake_run(outputs: dict[str, str]):
    return lambda argv: outputs.get(argv[0])


def test_npu_smi():
    acc = environment.accelerators(fake_run({"npu-smi": NPU_SMI.read_text()}))
    assert len(acc) == 1
    a = acc[0]
    assert a["kind"] == "ascend" and a["name"] == "Ascend 910B4-1" and a["driver"] == "25.2.0"
    assert a["count"] >= 2


def test_nvidia_smi():
    out = "NVIDIA H200, 570.86.15\nNVIDIA H200, 570.86.15\n"
    acc = environment.accelerators(fake_run({"nvidia-smi": out}))
    assert acc == [{"kind": "nvidia", "name": "NVIDIA H200", "model": "NVIDIA H200", "count": 2,
                    "driver": "570.86.15", "source": " ".join(environment.NVIDIA_QUERY)}]


def test_no_tools_no_failure(tmp_path):
    assert environment.accelerators(fake_run({})) == []
    assert environment.accelerators(fake_run({"npu-smi": "npu-smi: command failed\n"})) == []
    assert environment.cann_version(tmp_path) is None and environment.ascend_driver(tmp_path) is None


def test_cann_from_install_info(tmp_path):
    info = tmp_path / "usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info"
    info.parent.mkdir(parents=True)
    info.write_text(TOOLKIT_INFO)
    cann = environment.cann_version(tmp_path)
    assert cann["version"] == "8.2.RC1" and cann["arch"] == "aarch64" and cann["source"] == str(info)


def test_cann_from_version_cfg_and_driver(tmp_path):
    cfg = tmp_path / "usr/local/Ascend/ascend-toolkit/latest/version.cfg"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(VERSION_CFG)
    drv = tmp_path / "usr/local/Ascend/driver/version.info"
    drv.parent.mkdir(parents=True)
    drv.write_text("Version=25.5.0\nascendhal_version=7.35.23\n")
    assert environment.cann_version(tmp_path)["version"] == "8.0.RC2"
    assert environment.ascend_driver(tmp_path) == "25.5.0"


def test_capture_with_a_container_profile(tmp_path):
    env = environment.capture(load(STUDY_A), root=tmp_path, run=fake_run({}))
    assert env["container"]["components"]["sglang"] == "0.5.11"
    assert env["container"]["components"]["cann"] == "8.5"
    assert set(env["host_tuning"]) == {"cpu_governor", "swappiness", "numa_balancing", "sched_migration_cost_ns",
                                       "shm_gb", "hugepages"}
    assert env["accelerators"] == [] and "cann" not in env
    for key in ("os", "kernel", "cpu", "memory_gb", "packages"):
        assert key in env


def test_capture_on_this_machine():
    env = environment.capture()
    assert env["host_tuning"]["swappiness"] is None or isinstance(env["host_tuning"]["swappiness"], int)
    assert isinstance(env["accelerators"], list)
