"""`doctor` on an NVIDIA host, with a stand-in nvidia-smi (a test double on PATH) that prints real `-q` and
`topo -m` captures: every GPU row has a value, a status and a fix; what differs is said per GPU; a missing or
failing nvidia-smi gives unknown rows that say why."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.monitor.standins import SMI, standin_nvidia_smi
from tokenbench.cli.main import main
from tokenbench.deploy.profiles import load_profile
from tokenbench.host import nvidia


@pytest.fixture
def on_path(monkeypatch):
    def put(smi):
        monkeypatch.setenv("PATH", f"{smi.folder}{os.pathsep}{os.environ['PATH']}")
        return smi
    return put


def rows(checks):
    return {c.key: c for c in checks}


def test_doctor_lists_the_gpu_rows_with_values(tmp_path, on_path, capsys):
    on_path(standin_nvidia_smi(tmp_path))
    assert main(["doctor", "nvidia-vllm", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    gpus = {r["key"]: r for r in doc["gpus"]}
    assert set(gpus) == {"driver", "cuda", "persistence", "clocks", "power_limit", "ecc", "mig", "topology", "numa"}
    assert gpus["driver"]["current"] == "550.90.12" and gpus["cuda"]["current"] == "12.4"
    assert (gpus["persistence"]["current"], gpus["persistence"]["status"]) == ("Enabled", "ok")
    assert gpus["power_limit"]["current"] == "700 W (default 700, max 700)" and gpus["power_limit"]["status"] == "ok"
    assert gpus["mig"]["current"] == "Disabled" and gpus["clocks"]["current"].startswith("SM 345/1980 MHz")
    assert all(r["current"] and r["fix"] for r in doc["gpus"])
    # the same CPU/NUMA/shm rows as an Ascend profile, now with recommendations and fixes
    host = {r["key"]: r for r in doc["settings"]}
    assert host["cpu_governor"]["recommended"] == "performance" and "cpupower" in host["cpu_governor"]["fix"]
    assert host["numa_balancing"]["recommended"] == 0 and host["shm_gb"]["recommended"] == 16


def test_doctor_table_shows_the_gpus(tmp_path, on_path, capsys):
    on_path(standin_nvidia_smi(tmp_path))
    assert main(["doctor"]) == 0                      # no profile: the GPUs of a host with nvidia-smi
    out = capsys.readouterr().out
    assert "NVIDIA GPUs" in out and "persistence mode" in out and "550.90.12" in out


def test_what_differs_is_said_per_gpu_with_its_fix(tmp_path, on_path):
    text = tmp_path / "q.txt"
    q = (SMI / "h100-sxm-x8-gls-q.txt").read_text()
    q = q.replace("Persistence Mode                      : Enabled", "Persistence Mode                      : Disabled", 1)
    q = q.replace("        Current Power Limit               : 700.00 W", "        Current Power Limit               : 500.00 W", 1)
    q = q.replace("        SW Power Cap                      : Not Active", "        SW Power Cap                      : Active", 1)
    text.write_text(q)
    on_path(standin_nvidia_smi(tmp_path, query_log=str(text), topo="g6e-12xlarge-topo.txt"))
    found = rows(nvidia.check(load_profile("nvidia-vllm", ("parallelism.tp=4",))))
    assert found["persistence"].status == "differs" and found["persistence"].current.startswith("GPU 0: Disabled")
    assert found["power_limit"].status == "differs" and "nvidia-smi -i 0 -pl 700" in found["power_limit"].fix
    assert found["clocks"].status == "differs" and "held by GPU 0: SW Power Cap" in found["clocks"].current
    # tp=4 on GPUs linked through the host bridge only: not NVLink
    assert found["topology"].status == "differs" and "GPU0-GPU1 NODE" in found["topology"].fix


def test_tensor_parallel_groups_on_nvlink_are_ok(tmp_path, on_path):
    on_path(standin_nvidia_smi(tmp_path, query_log="h100-sxm-x8-gls-q.txt", topo="p4d-24xlarge-topo.txt"))
    found = rows(nvidia.check(load_profile("nvidia-vllm", ("parallelism.tp=4", "parallelism.dp=2"))))
    assert found["topology"].status == "ok" and found["topology"].current == "GPUs 0,1,2,3: NV12; GPUs 4,5,6,7: NV12"
    assert "GPU 4: NUMA 1 (CPUs 24-47,72-95)" in found["numa"].current


def test_no_or_failing_nvidia_smi_gives_unknown_rows_saying_why(tmp_path, on_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    found = nvidia.check(None)
    assert {c.status for c in found} == {"unknown"} and "not found on PATH" in found[0].source
    smi = on_path(standin_nvidia_smi(tmp_path))
    smi.outage(60)
    failed = nvidia.check(None)
    assert {c.status for c in failed} == {"unknown"} and "exited with 15" in failed[0].source
    assert not nvidia.applies(load_profile("study-b-vllm-ascend-910b"))


def _all_na(q: str) -> str:
    """Every setting doctor reads answered N/A (as a consumer GPU, a VM or WSL answers some of them)."""
    q = re.sub(r"(\n\s*(Current|Pending)\s*: )(Enabled|Disabled)", r"\1N/A", q)
    q = re.sub(r"(Persistence Mode\s*: )\S+", r"\1N/A", q)
    q = re.sub(r"((Current|Default|Max|Requested|Min|Enforced) Power Limit\s*: )[^\n]+", r"\1N/A", q)
    return re.sub(r"((Graphics|SM|Memory|Video)\s*: )\d+ MHz", r"\1N/A", q)


def _cut(q: str) -> str:
    """The lines of those settings left out altogether (an older or newer nvidia-smi names them otherwise)."""
    gone = r"MIG|ECC|Persistence|Power Limit|Clocks|MHz|CUDA Version|Driver Version"
    return "\n".join(line for line in q.splitlines() if not re.search(gone, line))


VARIANTS = {"gtx680 capture": (SMI / "gtx680-gls-q.txt").read_text(),
            "every setting N/A": _all_na((SMI / "h200-gls-q.txt").read_text()),
            "settings left out": _cut((SMI / "h200-gls-q.txt").read_text()),
            "no GPU listed": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
            "empty": ""}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_setting_nvidia_smi_does_not_tell_is_unknown_never_ok_or_differs(name, tmp_path, on_path, capsys):
    text = tmp_path / "q.txt"
    text.write_text(VARIANTS[name])
    on_path(standin_nvidia_smi(tmp_path, query_log=str(text), topo=str(text) if name == "empty" else
                               "p4d-24xlarge-topo.txt"))
    assert main(["doctor", "nvidia-vllm", "--json"]) == 0
    gpus = {r["key"]: r for r in json.loads(capsys.readouterr().out)["gpus"]}
    for key, row in gpus.items():
        told = row["current"] not in (None, "", nvidia.NOT_TOLD) and "?" not in (row["current"] or "")
        assert told or row["status"] in ("unknown", "-"), (key, row)
        assert row["status"] == "unknown" or row["current"], (key, row)
        assert row["fix"], key
    if name in ("no GPU listed", "empty"):
        assert {r["status"] for r in gpus.values()} == {"unknown"} and "listed no GPU" in gpus["driver"]["source"]
    assert main(["doctor", "nvidia-vllm"]) == 0                     # the table too: values or unknown, no traceback
    assert "Traceback" not in capsys.readouterr().out
