"""The rendered `docker run` for the two studies: golden files plus explicit checks that every device,
volume, environment variable and launch flag of each study is there, exactly."""

from __future__ import annotations

import shlex

import pytest
import yaml

from tokenbench.deploy import container
from tokenbench.errors import UsageError

from .ascend_helpers import STUDY_A, STUDY_B, check_golden, load

# Quoted from shared/seeds/000_460c11619f17c32f.txt (Study A)
A_LAUNCH = ("python -m sglang.launch_server --model-path /models/FlagRelease/MiniCPM5-2B --served-model-name "
            "MiniCPM52 --dtype bfloat16 --host 0.0.0.0 --port 31000 --trust-remote-code --device npu "
            "--cuda-graph-max-bs 128 --disable-radix-cache")
A_ENV = {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1", "SGLANG_FL_PREFER": "vendor",
         "SGLANG_FL_PER_OP": "silu_and_mul=flagos", "STREAMS_PER_DEVICE": "32",
         "SGLANG_ENABLE_OVERLAP_PLAN_STREAM": "1", "SGLANG_NPU_USE_MULTI_STREAM": "1",
         "SGLANG_FLAGGEMS_RECORD": "1", "SGLANG_FLAGGEMS_LOG_PATH": "/tmp/gems_aten.txt",
         "SGLANG_FL_FLAGOS_BLACKLIST": "argmax,index_put_,_index_put_impl_,index_select,max,sum,fill_scalar_,index,"
                                      "floor_divide"}
A_VOLUMES = ["/usr/local/sbin:/usr/local/sbin", "/usr/local/Ascend/driver:/usr/local/Ascend/driver",
             "/usr/local/Ascend/firmware:/usr/local/Ascend/firmware",
             "/etc/ascend_install.info:/etc/ascend_install.info", "/var/queue_schedule:/var/queue_schedule",
             "/models:/models", "/etc/localtime:/etc/localtime:ro"]
A_TUNING = ["echo performance | tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
            "sysctl -w vm.swappiness=0", "sysctl -w kernel.numa_balancing=0",
            "sysctl -w kernel.sched_migration_cost_ns=50000"]
A_SOURCES = ["source /usr/local/Ascend/ascend-toolkit/set_env.sh", "source /usr/local/Ascend/nnal/atb/set_env.sh"]
A_IMAGE = ("harbor.baai.ac.cn/flagrelease-public/minicpm5-2b-ascend001-gems5.3.0-treenone-cx0.13.0-pluginnone-"
           "vllmnone-sglang0.5.11-sglangfl0.1.0-cp311-ptnpu28-cann85-a64-25.5.0:202609070118")

# Quoted from shared/seeds/001_fc00801375f8142d.txt (Study B): docker run volumes, compose command
B_VOLUMES = ["/usr/local/Ascend/driver/:/usr/local/Ascend/driver/",
             "/usr/local/Ascend/add-ons/:/usr/local/Ascend/add-ons/", "/usr/local/sbin/:/usr/local/sbin/",
             "/var/log/npu/slog/:/var/log/npu/slog"]
B_COMPOSE_COMMAND = "--host 0.0.0.0 --port 30000 --gpu-memory-utilization 0.85 --data-parallel-size 4"

CASES = {   # golden name -> (profile, overrides, port)
    "study-a-tp1.txt": (STUDY_A, (), 31000),
    "study-a-tp2.txt": (STUDY_A, ("parallelism.tp=2",), 31000),
    "study-b-single.txt": (STUDY_B, (), 9005),
    "study-b-dp4.txt": (STUDY_B, ("parallelism.dp=4",), 30000),
    "nvidia-sglang.txt": ("nvidia-sglang", (), 31000),
    "nvidia-vllm-dp2.txt": ("nvidia-vllm", ("parallelism.dp=2",), 9005),
}


def values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, item in enumerate(argv[:-1]) if item == flag]


def flag_map(argv: list[str]) -> dict[str, str | bool]:
    """--key value / bare --flag items of an engine command line (positional items ignored)."""
    out: dict[str, str | bool] = {}
    for i, item in enumerate(argv):
        if item.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            out[item] = nxt if nxt is not None and not nxt.startswith("--") else True
    return out


def script_of(argv: list[str]) -> list[str]:
    assert argv[argv.index("--entrypoint") + 1] == "bash" and "-lc" in argv
    return argv[argv.index("-lc") + 1].splitlines()


def engine_of(argv: list[str]) -> list[str]:
    last = script_of(argv)[-1]
    assert last.startswith("exec ")
    return shlex.split(last[len("exec "):])


@pytest.mark.parametrize("golden", sorted(CASES))
def test_golden_command(golden):
    name, overrides, port = CASES[golden]
    argv = container.deploy_dry_run(load(name, *overrides, f"port={port}"), port)
    check_golden(golden, container.format_command(argv) + "\n")
    assert shlex.split(container.format_command(argv).replace("\\\n", " ")) == argv   # pasteable, same argv


@pytest.mark.parametrize("golden,overrides", [("study-a-tp2.compose.yaml", ("parallelism.tp=2",)),
                                              ("study-b-dp4.compose.yaml", ("parallelism.dp=4", "port=30000"))])
def test_golden_compose(golden, overrides):
    name = STUDY_A if golden.startswith("study-a") else STUDY_B
    text = container.render_compose(load(name, *overrides))
    check_golden(golden, text)
    service = next(iter(yaml.safe_load(text)["services"].values()))
    assert service["entrypoint"] == ["bash", "-lc"]
    assert service["command"][0].splitlines()[-1].startswith("exec ")


@pytest.mark.parametrize("tp,devices,visible", [(1, ["/dev/davinci0"], "0"),
                                                (2, ["/dev/davinci0", "/dev/davinci1"], "0,1")])
def test_study_a_exact(tp, devices, visible):
    argv = container.deploy_dry_run(load(STUDY_A, f"parallelism.tp={tp}"), 31000)
    assert argv[:2] == ["docker", "run"]
    assert values(argv, "--device") == devices + ["/dev/davinci_manager", "/dev/hisi_hdc"]
    assert values(argv, "-v") == A_VOLUMES
    env = dict(item.split("=", 1) for item in values(argv, "-e"))
    assert env == {**A_ENV, "ASCEND_RT_VISIBLE_DEVICES": visible}
    for flag in ("--privileged", "--init"):
        assert flag in argv
    assert values(argv, "--network") == values(argv, "--ipc") == ["host"]
    assert values(argv, "--shm-size") == ["512g"]
    assert argv[argv.index("--entrypoint") + 2] == A_IMAGE
    assert script_of(argv)[:-1] == A_TUNING + A_SOURCES
    engine = engine_of(argv)
    study = shlex.split(A_LAUNCH)
    assert engine[:3] == study[:3]
    assert flag_map(engine) == {**flag_map(study), **({"--tp": "2"} if tp == 2 else {})}


@pytest.mark.parametrize("dp,port", [(1, 9005), (4, 30000)])
def test_study_b_exact(dp, port):
    argv = container.deploy_dry_run(load(STUDY_B, f"parallelism.dp={dp}", f"port={port}"), port)
    npus = [f"/dev/davinci{i}" for i in range(dp)]
    assert values(argv, "--device") == npus + ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    assert values(argv, "-v")[:4] == B_VOLUMES
    assert "--privileged" in argv and values(argv, "--shm-size") == ["500g"]
    assert values(argv, "-p") == [f"{port}:{port}"]
    assert "quay.io/ascend/vllm-ascend:v0.10.2rc1" in argv
    env = dict(item.split("=", 1) for item in values(argv, "-e"))
    assert env == {"ASCEND_RT_VISIBLE_DEVICES": ",".join(str(i) for i in range(dp))}
    engine = engine_of(argv)
    assert engine[:3] == ["vllm", "serve", "/models/MinerU2.5-2509-1.2B"]
    flags = flag_map(engine)
    if dp == 4:
        assert flags == flag_map(shlex.split(B_COMPOSE_COMMAND))
    else:
        assert flags == {"--host": "0.0.0.0", "--port": "9005"}


def test_nvidia_devices_and_visible_ids():
    argv = container.deploy_dry_run(load("nvidia-vllm", "parallelism.dp=2"), 9005)
    assert values(argv, "--gpus") == ['"device=0,1"']          # the quotes are docker's CSV syntax
    assert "CUDA_VISIBLE_DEVICES=0,1" in values(argv, "-e")
    argv = container.deploy_dry_run(load("nvidia-sglang", "devices=[2,3]", "parallelism.tp=2"), 31000)
    assert values(argv, "--gpus") == ['"device=2,3"']
    assert "CUDA_VISIBLE_DEVICES=0,1" in values(argv, "-e")     # renumbered from 0 inside the container
    assert argv[argv.index("--entrypoint") + 1] == "python3"     # no setup: no shell at all
    assert flag_map(argv)["--tp"] == "2"


def test_privileged_ascend_keeps_host_ids():
    argv = container.deploy_dry_run(load(STUDY_A, "devices=[4,5]", "parallelism.tp=2"), 31000)
    assert values(argv, "--device")[:2] == ["/dev/davinci4", "/dev/davinci5"]
    assert "ASCEND_RT_VISIBLE_DEVICES=4,5" in values(argv, "-e")


def test_env_visible_devices_conflict_is_refused():
    with pytest.raises(UsageError, match="ASCEND_RT_VISIBLE_DEVICES"):
        container.deploy_dry_run(load(STUDY_A, "parallelism.tp=2", "env.ASCEND_RT_VISIBLE_DEVICES=0"), 31000)


def test_bridge_network_needs_a_reachable_host():
    with pytest.raises(UsageError, match="cannot be reached") as err:
        container.deploy_dry_run(load(STUDY_B, "host=127.0.0.1"), 9005)
    assert "0.0.0.0" in err.value.hint


def test_compose_escapes_dollars():
    text = container.render_compose(load("nvidia-vllm", "env.X=$HOME"), 9005)
    assert yaml.safe_load(text)["services"]["tokenbench-nvidia-vllm-9005"]["environment"]["X"] == "$$HOME"
