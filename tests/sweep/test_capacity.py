"""--find-capacity: doubling then bisection, driven by results sent into a generator."""

import pytest

from tokenbench.cli.main import main
from tokenbench.store.db import Store
from tokenbench.sweep.capacity import search
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test


def drive(limit: int, max_c: int = 256):
    gen, tried = search(max_c), []
    c = next(gen)
    while True:
        tried.append(c)
        try:
            c = gen.send(c <= limit)
        except StopIteration as end:
            return end.value, tried


@pytest.mark.parametrize("limit", [1, 2, 3, 6, 7, 12, 100, 255])
def test_search_finds_the_last_passing_level(limit):
    (best, worst), tried = drive(limit)
    assert (best, worst) == (limit, limit + 1)
    assert len(tried) <= 2 * limit.bit_length() + 1


def test_search_edges():
    assert drive(0)[0] == (None, 1)
    assert drive(10_000, max_c=64)[0] == (64, None)


def test_capacity_on_reference_server_with_six_slots(tmp_path, capsys):
    """A server that runs 6 requests at once and queues the rest: TTFT stays ~10 ms up to 6, and a queued
    request waits for a running one to end (about 10 + 7 x 20 ms more). The SLO (80 ms) lies 70 ms from
    either, so waits for a CPU that other work causes do not move the answer."""
    with ReferenceProcess(ReferenceConfig(ttft_ms=10, itl_ms=20, max_running=6)) as ref:
        db = tmp_path / "db.sqlite"
        code = main(["sweep", "--base-url", ref.url, "--pairs", "16:8", "--find-capacity", "--slo", "ttft=80",
                     "--db", str(db)])
    assert code == 0
    assert "capacity 16:8: concurrency 6 (meets the SLOs; 7 does not)" in capsys.readouterr().out
    [run] = Store(db).runs()
    keys = [c.key for c in Store(db).cells(run.id)]
    assert keys == ["16:8/c=1", "16:8/c=2", "16:8/c=4", "16:8/c=6", "16:8/c=7", "16:8/c=8"]
