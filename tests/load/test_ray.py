"""Issue 8: the same workload through a local Ray cluster gives the same counts as one process."""

import pytest

from tests.contention import Waited, mean_allowance_ms
from tokenbench.spec.study import StudySpec
from tokenbench.study.run import measure
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'tokenbench[ray]'")
from .ray_cluster import local_cluster  # noqa: E402  (needs ray)

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    """One private cluster for this module's tests (starting one takes 20-60 s on a busy 2-core machine):
    each test's cells start and end their own actors, and the interrupted one runs last."""
    with pytest.MonkeyPatch.context() as mp, local_cluster(tmp_path_factory.mktemp("ray"), mp, ['{"node_a": 1}']) as address:
        yield address


def test_ray_workers_match_one_process(ray_head):
    with ReferenceProcess(ReferenceConfig(ttft_ms=30, itl_ms=10)) as ref:
        spec = StudySpec(target={"base_url": ref.url}, pairs=[(16, 20)], concurrency=[4], requests={"num_prompts": 16})
        with Waited(descendants=True, every_s=0.25) as waited:   # this process, the server, the cluster
            [one] = measure(spec).results
            spec.client.workers, spec.client.ray_address = 2, ray_head
            [viaray] = measure(spec).results
    assert viaray.summary.completed == one.summary.completed == 16
    assert sorted(r.index for r in viaray.records) == list(range(16))
    assert {r.worker for r in viaray.records} == {0, 1}
    assert viaray.summary.total_output_tokens == 16 * 20
    allow = mean_allowance_ms(waited.ms, 4, 16)         # what other work on the machine can have moved
    tpot, ttft = one.summary.mean_tpot_ms, one.summary.mean_ttft_ms
    assert viaray.summary.mean_tpot_ms == pytest.approx(tpot, abs=0.15 * tpot + allow / 19)
    assert viaray.summary.mean_ttft_ms == pytest.approx(ttft, abs=0.5 * ttft + allow)
    # converted to the driver's clock: every request lies within the cell's window
    assert all(r.intended_ns <= r.sent_ns < r.end_ns for r in viaray.records)
    assert len(viaray.summary.to_dict()["clock_offsets_ns"]) == 2


def test_ray_actors_send_one_schedule(ray_head):
    """--ray with 2 actors at a constant 20/s: the driver's t0, converted to each actor's clock by its
    measured offset, starts both; actor k sends slots k, k+2, ... of the one schedule, and the intended
    times, converted back, are that schedule's (50 ms apart, whichever actor sent)."""
    with ReferenceProcess(ReferenceConfig(ttft_ms=10, itl_ms=5)) as ref:
        spec = StudySpec(target={"base_url": ref.url}, pairs=[(16, 4)], rates=[20.0], arrival="constant",
                         requests={"num_prompts": 40}, warmup_requests=0)
        spec.client.workers, spec.client.ray_address = 2, ray_head
        with Waited(descendants=True, every_s=0.25) as waited:
            [cell] = measure(spec).results
        recv = [a["recv_ns"] for a in ref.arrivals()["arrivals"]]
    intended = sorted(r.intended_ns for r in cell.records)
    assert [t - intended[0] for t in intended] == [i * 50_000_000 for i in range(40)]
    assert {r.worker for r in cell.records} == {0, 1}
    late = [r.sent_ns - r.intended_ns for r in sorted(cell.records, key=lambda r: r.intended_ns)]
    errors = [((b - a) - 50e6 - (late[i + 1] - late[i])) / 1e6 for i, (a, b) in enumerate(zip(recv, recv[1:], strict=False))]
    assert max(map(abs, errors)) <= 5.0 + waited.ms


def test_sigint_stops_the_ray_actors_and_keeps_what_finished(ray_head, tmp_path):
    """Ctrl-C at the driver (a real SIGINT to its process group): the actors stop with what finished, and
    the cell is stored interrupted (docs/reliability.md, "Interruptions")."""
    from tests.reliability.helpers import Child, cells, db_problems, wait_arrivals
    db, n = tmp_path / "r.db", 10
    with ReferenceProcess(ReferenceConfig(ttft_ms=20, itl_ms=100)) as ref:
        child = Child("bench", "--base-url", ref.url, "--input-len", "8", "--output-len", "4", "--concurrency", "2",
                      "--num-prompts", str(n), "--warmup-requests", "0", "--allow-client-lag", "--workers", "2",
                      "--ray", ray_head, "--db", str(db))
        wait_arrivals(ref, 3, child)               # one request finished: the next one was sent
        child.sigint()
        assert child.exit_code() == 130, child.output
    assert "Traceback" not in child.output and "stored as interrupted" in child.output
    [(_, status, _, s)] = cells(db)
    assert status == "interrupted" and 1 <= s["completed"] < n and s["interrupted_planned"] == n
    assert db_problems(db) == []
