"""Issue 8: the client knows when its own numbers are unreliable; --workers merges exactly."""

import sys
import threading
import time

import pytest

from tests.contention import Waited, mean_allowance_ms
from tokenbench.load.workers import split_load
from tokenbench.spec.bench import Load
from tokenbench.spec.study import StudySpec
from tokenbench.study.run import measure
from tokenbench.study.settings import StudyEvents
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess


def test_split_load_keeps_totals():
    parts = split_load(Load(concurrency=7, num_prompts=29), 3)
    assert [p.concurrency for p in parts] == [3, 2, 2]
    assert sum(p.num_prompts for p in parts) == 29
    rates = split_load(Load(request_rate=9.0, max_concurrency=5, num_prompts=10), 2)
    assert [p.request_rate for p in rates] == [4.5, 4.5] and [p.max_concurrency for p in rates] == [3, 2]


def spec(url, conc=8, n=32, workers=1):
    return StudySpec(target={"base_url": url}, pairs=[(16, 20)], concurrency=[conc], requests={"num_prompts": n},
                     client={"workers": workers})


@pytest.fixture(scope="module")
def reference():
    with ReferenceProcess(ReferenceConfig(ttft_ms=30, itl_ms=10)) as ref:
        yield ref


@pytest.mark.engine
@pytest.mark.client_health
def test_starved_client_marks_the_figures_it_moved_with_its_own_work(reference):
    stop = threading.Event()
    old = sys.getswitchinterval()

    def hog():   # pure-Python spinning holds the GIL in long slices, starving the event loop
        end = time.monotonic() + 60          # a bound: the cell's own progress stops it long before
        while not stop.is_set() and time.monotonic() < end:
            sum(i * i for i in range(200_000))

    def starve_while_sending(cell, progress) -> None:
        """From the cell's first measured request done until its last one, the hog runs: the study's set-up,
        the cell's CPU readings at its edges (/proc file by file: each read gives the GIL up and waits a whole
        slice to get it back) and storing the cell (SQLite row by row) are not what is tested, and under the hog
        they would take minutes."""
        if progress.phase == "measure" and not thread.is_alive() and not stop.is_set():
            sys.setswitchinterval(0.2)   # the hog keeps the GIL 200 ms at a time, like a C extension would
            thread.start()
        if progress.phase == "measure" and progress.total is not None and progress.done >= progress.total:
            stop.set()
            sys.setswitchinterval(old)

    thread = threading.Thread(target=hog, daemon=True)
    try:
        [cell] = measure(spec(reference.url), events=StudyEvents(log=lambda m: None,
                                                                 cell_progress=starve_while_sending)).results
    finally:
        stop.set()
        if thread.is_alive():
            thread.join()
        sys.setswitchinterval(old)
    marks = cell.summary.figures.client_marks or {}
    assert cell.status == "ok" and marks                  # the figures it moved are marked, the cell stays ok
    assert max(cell.summary.health.stall_ms, key=cell.summary.health.stall_ms.get) == "client_cpu"
    assert "client_cpu" in {m.cause for m in marks.values()}


@pytest.mark.engine
def test_workers_merge_exactly(reference):
    with Waited(descendants=True) as waited_one:            # this process, the server, the workers
        [one] = measure(spec(reference.url)).results
    with Waited(descendants=True) as waited_two:
        [two] = measure(spec(reference.url, workers=2)).results
    waited = waited_one.ms + waited_two.ms
    assert one.status == "ok" and two.status in ("ok", "invalid")
    assert len(two.records) == 32 and sorted(r.index for r in two.records) == list(range(32))
    assert {r.worker for r in two.records} == {0, 1}
    assert two.summary.completed == one.summary.completed == 32
    assert two.summary.total_output_tokens == one.summary.total_output_tokens == 32 * 20
    one_tpot = one.summary.mean_tpot_ms
    assert two.summary.mean_tpot_ms == pytest.approx(one_tpot, abs=0.15 * one_tpot + mean_allowance_ms(
        waited, 8, 32, gaps=19))
    assert two.summary.to_dict()["client_workers"] == 2
    # while sending, both keep the 8 slots full (a finished request is replaced within a few ms of a
    # 220 ms request, or as late as the waits for a CPU made it)
    for cell, w in ((one, waited_one), (two, waited_two)):
        sends = sorted(r.sent_ns for r in cell.records)
        window_ms = (sends[-1] - sends[7]) / 1e6              # the 8th send to the last: what it averages
        assert 8 * (0.98 - w.ms / window_ms) <= cell.summary.sustained_concurrency <= 8
