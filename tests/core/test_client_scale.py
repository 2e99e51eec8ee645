"""Issue 8: the client knows when its own numbers are unreliable; --workers merges exactly."""

import asyncio
import sys
import threading

import pytest

from tokenbench.load.bench import run_bench
from tokenbench.load.target import resolve
from tokenbench.load.workers import split_load
from tokenbench.spec.bench import BenchSpec, Load
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess


def test_split_load_keeps_totals():
    parts = split_load(Load(concurrency=7, num_prompts=29), 3)
    assert [p.concurrency for p in parts] == [3, 2, 2]
    assert sum(p.num_prompts for p in parts) == 29
    rates = split_load(Load(request_rate=9.0, max_concurrency=5, num_prompts=10), 2)
    assert [p.request_rate for p in rates] == [4.5, 4.5] and [p.max_concurrency for p in rates] == [3, 2]


def spec(url, conc=8, n=32):
    return BenchSpec(target={"base_url": url}, workload={"input_len": 16, "output_len": 20},
                     cells=[{"concurrency": conc, "num_prompts": n}])


@pytest.fixture(scope="module")
def reference():
    with ReferenceProcess(ReferenceConfig(ttft_ms=30, itl_ms=10)) as ref:
        yield ref


@pytest.mark.engine
@pytest.mark.client_health
def test_starved_client_marks_cell_invalid(reference):
    stop = threading.Event()

    def hog():   # pure-Python spinning holds the GIL in long slices, starving the event loop
        while not stop.is_set():
            sum(i * i for i in range(200_000))

    s = spec(reference.url)
    target = resolve(s.target)
    thread = threading.Thread(target=hog, daemon=True)
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.2)   # the hog keeps the GIL 200 ms at a time, like a C extension would
    thread.start()
    try:
        [cell] = asyncio.run(run_bench(s, target, lambda r: None))
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(old)
    assert cell.status == "invalid"
    assert "client overloaded" in cell.message and "event-loop" in cell.message


@pytest.mark.engine
def test_workers_merge_exactly(reference):
    s = spec(reference.url)
    target = resolve(s.target)
    [one] = asyncio.run(run_bench(s, target, lambda r: None))
    [two] = asyncio.run(run_bench(s, target, lambda r: None, workers=2))
    assert one.status == "ok" and two.status in ("ok", "invalid")
    assert len(two.records) == 32 and sorted(r.index for r in two.records) == list(range(32))
    assert {r.worker for r in two.records} == {0, 1}
    assert two.summary.to_dict()["completed"] == one.summary.to_dict()["completed"] == 32
    assert two.summary.to_dict()["total_output_tokens"] == one.summary.to_dict()["total_output_tokens"] == 32 * 20
    assert two.summary.to_dict()["mean_tpot_ms"] == pytest.approx(one.summary.to_dict()["mean_tpot_ms"], rel=0.15)
    assert two.summary.to_dict()["client_workers"] == 2
    # while sending, both keep the 8 slots full (a finished request is replaced within a few ms of a
    # 220 ms request)
    for cell in (one, two):
        assert 0.98 * 8 <= cell.summary.to_dict()["sustained_concurrency"] <= 8
