"""Issue 20: finished requests are reduced to records while the cell runs (bounded memory), in slices
that give the same record as one whole parse."""

import asyncio
import gc
import json

import pytest

from tokenbench.client.parse import PLAIN_STEP, parse_exchange, parse_steps
from tokenbench.client.records import RawExchange
from tokenbench.client.request import PreparedRequest
from tokenbench.client.transport import new_session, send
from tokenbench.load import runner
from tokenbench.spec.bench import Load
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

MS = 1_000_000


def _sse(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _stream(n: int) -> RawExchange:
    chunks = [(t * MS, _sse({"choices": [{"delta": {"content": f"t{t}"}, "finish_reason": None}]}))
              for t in range(1, n + 1)]
    chunks.append(((n + 1) * MS, _sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n}})))
    chunks.append(((n + 2) * MS, b"data: [DONE]\n\n"))
    return RawExchange(intended_ns=0, sent_ns=0, headers_ns=MS, end_ns=(n + 3) * MS, status=200, chunks=chunks)


def _req(n: int) -> PreparedRequest:
    return PreparedRequest(url="http://x/v1/chat/completions", body=b"{}", headers={}, input_len=3, output_len=n,
                           expected_prompt_tokens=3)


@pytest.mark.parametrize("per_step", [1, 2, 3, 8, 100])
def test_sliced_parse_equals_whole_parse(per_step):
    raw, req = _stream(17), _req(17)
    steps = list(parse_steps(raw, req, 5, "measure", per_step))        # a plain stream: the plain path's steps
    assert all(s is None for s in steps[:-1]) and len(steps) - 1 == len(raw.chunks) // (per_step * PLAIN_STEP)
    assert steps[-1] == parse_exchange(raw, req, 5, "measure")
    assert steps[-1].token_counts == [1] * 17 and steps[-1].ok


@pytest.mark.slow
def test_records_reach_the_sink_while_the_phase_runs(monkeypatch):
    """With PENDING_MAX 4, most records are parsed before the last request ended, none is lost when the
    queue empties in the middle of a request's slices (one read per slice), and the young GC generations
    stay on during the phase (only full collections are held off)."""
    monkeypatch.setattr(runner, "PENDING_MAX", 4)
    monkeypatch.setattr(runner, "READS_PER_SLICE", 1)
    seen: list[tuple[int, object]] = []
    thresholds: list[tuple] = []

    async def go(url: str):
        async with new_session(30) as session:
            reqs = [PreparedRequest(url=f"{url}/v1/completions", body=json.dumps(
                {"model": "reference-model", "prompt": [1, 2, 3], "max_tokens": 4, "stream": True,
                 "ignore_eos": True, "stream_options": {"include_usage": True}}).encode(),
                headers={"Content-Type": "application/json"}, input_len=3, output_len=4,
                expected_prompt_tokens=3)] * 40

            async def do_send(req, intended):
                thresholds.append(gc.get_threshold())
                return await send(session, req, intended)
            return await runner.run_phase(do_send, reqs, runner.PhasePlan("measure", Load(concurrency=2, num_prompts=40)),
                                          runner.Outlets(lambda r: seen.append((runner.MonotonicClock().now_ns(), r))))

    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=2)) as ref:
        run = asyncio.run(go(ref.url))
    assert run.records == [] and len(seen) == 40                # all went to the sink, none kept
    last_end = max(r.end_ns for _, r in seen)
    assert sum(1 for t, _ in seen if t < last_end) >= 30         # reduced while requests still ran
    assert all(r.ok for _, r in seen)
    assert all(t[0] > 0 and t[2] >= runner.NO_FULL_GC for t in thresholds) and gc.isenabled()
