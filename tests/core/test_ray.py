"""Issue 8: the same workload through a local Ray cluster gives the same counts as one process."""

import asyncio

import pytest

from tokenbench.load.bench import run_bench
from tokenbench.load.target import resolve
from tokenbench.spec.bench import BenchSpec
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'tokenbench[ray]'")
from ray_cluster import local_cluster  # noqa: E402  (needs ray)

pytestmark = pytest.mark.engine


@pytest.fixture
def ray_head(tmp_path, monkeypatch):
    with local_cluster(tmp_path, monkeypatch, ['{"node_a": 1}']) as address:
        yield address


def test_ray_workers_match_one_process(ray_head):
    with ReferenceProcess(ReferenceConfig(ttft_ms=30, itl_ms=10)) as ref:
        spec = BenchSpec(target={"base_url": ref.url}, workload={"input_len": 16, "output_len": 20},
                         cells=[{"concurrency": 4, "num_prompts": 16}])
        target = resolve(spec.target)
        [one] = asyncio.run(run_bench(spec, target, lambda r: None))
        [viaray] = asyncio.run(run_bench(spec, target, lambda r: None, workers=2, ray_address=ray_head))
    assert viaray.summary.to_dict()["completed"] == one.summary.to_dict()["completed"] == 16
    assert sorted(r.index for r in viaray.records) == list(range(16))
    assert {r.worker for r in viaray.records} == {0, 1}
    assert viaray.summary.to_dict()["total_output_tokens"] == 16 * 20
    assert viaray.summary.to_dict()["mean_tpot_ms"] == pytest.approx(one.summary.to_dict()["mean_tpot_ms"], rel=0.15)
    assert viaray.summary.to_dict()["mean_ttft_ms"] == pytest.approx(one.summary.to_dict()["mean_ttft_ms"], rel=0.5)
    # converted to the driver's clock: every request lies within the cell's window
    assert all(r.intended_ns <= r.sent_ns < r.end_ns for r in viaray.records)
    assert len(viaray.summary.to_dict()["clock_offsets_ns"]) == 2
