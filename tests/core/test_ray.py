"""Issue 8: the same workload through a local Ray cluster gives the same counts as one process."""

import asyncio
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tokenbench.load.bench import run_bench
from tokenbench.load.target import resolve
from tokenbench.spec.bench import BenchSpec
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'tokenbench[ray]'")
pytestmark = pytest.mark.engine
RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    port = free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    tmp = tmp_path_factory.mktemp("ray")
    subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2",
                    "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={tmp}"],
                   check=True, env=env, capture_output=True, timeout=180)
    yield f"127.0.0.1:{port}"
    if ray.is_initialized():
        ray.shutdown()
    subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)
    shutil.rmtree(tmp, ignore_errors=True)


def test_ray_workers_match_one_process(ray_head):
    with ReferenceProcess(ReferenceConfig(ttft_ms=30, itl_ms=10)) as ref:
        spec = BenchSpec(target={"base_url": ref.url}, workload={"input_len": 16, "output_len": 20},
                         cells=[{"concurrency": 4, "num_prompts": 16}])
        target = resolve(spec.target)
        [one] = asyncio.run(run_bench(spec, target, lambda r: None))
        [viaray] = asyncio.run(run_bench(spec, target, lambda r: None, workers=2, ray_address=ray_head))
    assert viaray.summary["completed"] == one.summary["completed"] == 16
    assert sorted(r.index for r in viaray.records) == list(range(16))
    assert {r.worker for r in viaray.records} == {0, 1}
    assert viaray.summary["total_output_tokens"] == 16 * 20
    assert viaray.summary["mean_tpot_ms"] == pytest.approx(one.summary["mean_tpot_ms"], rel=0.15)
    assert viaray.summary["mean_ttft_ms"] == pytest.approx(one.summary["mean_ttft_ms"], rel=0.5)
    # converted to the driver's clock: every request lies within the cell's window
    assert all(r.intended_ns <= r.sent_ns < r.end_ns for r in viaray.records)
    assert len(viaray.summary["clock_offsets_ns"]) == 2
