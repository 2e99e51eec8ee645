"""Issue 20: Ray actors spread over a cluster's nodes. A local cluster of two nodes (two `ray start`
processes on 127.0.0.1, each with its own custom resource) runs one cell on four workers; each worker
reports the node it ran on, and they are dealt evenly over the two nodes."""

import pytest

from tokenbench.load import ray_workers
from tokenbench.spec.study import StudySpec
from tokenbench.study.run import measure
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'tokenbench[ray]'")
from .ray_cluster import local_cluster  # noqa: E402  (needs ray)

pytestmark = pytest.mark.slow


@pytest.fixture
def two_nodes(tmp_path, monkeypatch):
    with local_cluster(tmp_path, monkeypatch, ['{"node_a": 1}', '{"node_b": 1}']) as address:
        yield address


@pytest.mark.timeout(420)
def test_workers_run_on_both_nodes(two_nodes, monkeypatch):
    monkeypatch.setattr(ray_workers, "BATCH", 5)        # several batches per worker
    by_resource = {name: node["NodeID"] for node in ray.nodes() if node["Alive"]
                   for name in ("node_a", "node_b") if name in node["Resources"]}
    assert set(by_resource) == {"node_a", "node_b"}
    with ReferenceProcess(ReferenceConfig(ttft_ms=20, itl_ms=5)) as ref:
        spec = StudySpec(target={"base_url": ref.url}, pairs=[(16, 8)], concurrency=[4], requests={"num_prompts": 24},
                         client={"workers": 4, "ray_address": two_nodes})
        [cell] = measure(spec).results
    nodes = cell.summary.to_dict()["ray_nodes"]
    # SPREAD deals the four workers evenly (Ray places resource-less actors at random without it)
    assert sorted(nodes) == sorted([*by_resource.values()] * 2)
    assert sorted(r.index for r in cell.records) == list(range(24))     # every batch arrived, none twice
    assert {r.worker for r in cell.records} == {0, 1, 2, 3}
    assert cell.summary.to_dict()["completed"] == 24
