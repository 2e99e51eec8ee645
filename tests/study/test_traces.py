"""Acceptance of issue 36 against the reference server (its spans carry the phase times it controls: the queue
from its admission gate, the prefill per prompt token, the ITL): at 1 to 64 streams every measured request is
joined to its span by trace id, each phase is the injected one within 1 ms, the phases add up to the client's
TTFT with network and delivery never below minus the clock offset's error, the offset found holds the spans'
deliberate skew, and the /metrics histogram means agree with the traced means. Slow tier (real processes and
sockets)."""

from __future__ import annotations

import socket
import time

import pytest

from tokenbench.metrics.server import phases_of
from tokenbench.metrics.summary_groups import TTFT_PHASES
from tokenbench.spec.study import StudySpec
from tokenbench.study.run import measure
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow

MS = 1_000_000
TTFT_MS, ITL_MS, PER_TOKEN_MS, SKEW_MS = 30.0, 4.0, 0.02, 5000.0
IN, OUT = 128, 16


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def traced_run(concurrency: list[int], protocol: str = "http", prompts: int | None = None):
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}/v1/traces" if protocol == "http" else f"127.0.0.1:{port}"
    cfg = ReferenceConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS, prefill_ms_per_token=PER_TOKEN_MS, max_running=8,
                          otlp_endpoint=endpoint, otlp_protocol=protocol, span_clock_offset_ms=SKEW_MS,
                          vllm_metrics=True)
    requests = {"num_prompts": prompts} if prompts else {"per_concurrency": 2, "min": 8}
    with ReferenceProcess(cfg) as ref:
        spec = StudySpec.model_validate({
            "target": {"base_url": ref.url, "otlp_listen": f"127.0.0.1:{port}"}, "pairs": [[IN, OUT]],
            "concurrency": concurrency, "requests": requests})
        out = measure(spec)
        log = {line["traceparent"].split("-")[1]: line for line in ref.send_log() if line.get("traceparent")}
    return out, log


def injected(line: dict) -> dict[str, int]:
    """What the server imposed on one request (its send log): queue until the prefill started, prefill to the
    first chunk's deadline, decode to the last one's."""
    start = line["prefill_ns"][0]
    return {"queue": start - line["recv_ns"], "prefill": line["due_ns"][0] - start,
            "decode": line["due_ns"][-1] - line["due_ns"][0]}


def check_cell(result, row, log: dict) -> None:
    book = row.summary.phases
    measured = [r for r in result.records if r.ok]
    assert book is not None and book.joined == book.requests == len(measured) == row.summary.completed
    assert book.missing == 0 and book.unjoined_spans == 0 and book.dropped_payloads == 0 and book.clock_consistent
    skew = time.time_ns() - time.perf_counter_ns() + SKEW_MS * MS
    assert abs(book.clock_offset_ms * MS - skew) <= book.clock_offset_error_ms * MS + 2 * MS
    for r in measured:
        truth, p = injected(log[r.trace_id]), phases_of(r)
        assert p is not None and r.server_request_id == log[r.trace_id]["id"]
        assert abs(p.queue - truth["queue"]) < MS and abs(p.decode - truth["decode"]) < MS
        assert abs(p.prefill - truth["prefill"]) < MS
        assert abs(p.prefill - (IN * PER_TOKEN_MS + TTFT_MS) * MS) < MS and abs(p.decode - (OUT - 1) * ITL_MS * MS) < MS
        assert sum(p.get(x) for x in TTFT_PHASES) == r.ttft_ns
        assert p.network >= -p.error_ns and p.delivery >= -p.error_ns
        # the client's TTFT is the injected queue and prefill plus what the ledger shows around them
        rest = r.ttft_ns - truth["queue"] - truth["prefill"]
        assert abs(rest - (p.network + p.server_other + p.delivery)) < MS


def test_every_request_joins_and_every_phase_is_the_injected_one_from_1_to_64_streams():
    out, log = traced_run([1, 8, 64])
    assert [r.load.concurrency for r in out.results] == [1, 8, 64]
    for result, row in zip(out.results, out.cells, strict=True):
        check_cell(result, row, log)
    busy = out.cells[-1].summary
    assert busy.phases.stat("queue") > out.cells[0].summary.phases.stat("queue")      # 64 streams, 8 slots
    means = busy.server_means
    assert means is not None and means.requests == busy.completed
    for phase, mean in (("queue", means.queue_ms), ("prefill", means.prefill_ms), ("decode", means.decode_ms)):
        assert mean == pytest.approx(busy.phases.stat(phase), rel=1e-3, abs=1e-3)


def test_spans_sent_over_grpc_join_the_same_way():
    out, log = traced_run([4], "grpc", prompts=12)
    check_cell(out.results[0], out.cells[0], log)


def test_a_cell_none_of_whose_requests_joined_says_what_arrived_instead():
    """Spans came, but none is a request's (no GenAI latencies), or request spans came of other traces: the warning
    says what arrived; it says nothing came only when nothing did."""
    import asyncio

    from tests.monitor.test_otlp import export, gen_ai, span
    from tests.monitor.test_otlp_receiver import post
    from tokenbench.client.records import RequestRecord
    from tokenbench.spec.study import Target
    from tokenbench.study.traces import Traces

    def cell(said: list[str], *payloads: bytes) -> str:
        traces = Traces(Target(base_url="http://127.0.0.1:9", server_traces="on"), log=said.append)
        traces.address()
        assert traces.receiver is not None
        try:
            for body in payloads:
                assert post(traces.receiver, body) in (200, 400)
            recs = [RequestRecord(index=i, phase="measure", input_len=8, output_len=4, intended_ns=0, sent_ns=0,
                                  end_ns=1, status=200, token_times_ns=[1], trace_id=f"{i + 1:032x}") for i in range(3)]
            asyncio.run(traces.join(recs, stopped=True))
        finally:
            traces.close()
        [line] = [x for x in said if "not joined" in x]
        return line

    plain = export(*(span((i + 1).to_bytes(16, "big"), start=1, end=2, http__route="/v1/completions") for i in range(3)))
    assert cell([], plain, b"\xff" * 8).startswith("3 spans arrived from the server, none a request's")
    others = export(span((99).to_bytes(16, "big"), start=1, end=2, **gen_ai(time_to_first_token=0.1)))
    assert cell([], others).startswith("1 request spans arrived from the server, none with a trace id this cell's")
    assert cell([]).startswith("no span arrived from the server")
