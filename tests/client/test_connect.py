"""Connection set-up over a real socket: recorded as `connect_ms`, never as queue time; counted in TTFT
only with --count-connect-in-ttft (as vLLM's client does)."""

import asyncio
import os

import pytest

from tests.contention import Waited
from tokenbench.client.parse import parse_exchange
from tokenbench.client.request import Prompt, prepare
from tokenbench.client.transport import new_session, send
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow


def two_requests(url: str, connect_in_ttft: bool):
    req = prepare(url, "completions", "reference-model", Prompt(token_ids=(5, 6, 7), text=None, input_len=3,
                                                                output_len=2, expected_prompt_tokens=3), None)

    async def main():
        async with new_session(30, connect_in_ttft) as session:
            first = await send(session, req, intended_ns=0)
            second = await send(session, req, intended_ns=0)
            return first, second
    return [parse_exchange(raw, req, i, "measure") for i, raw in enumerate(asyncio.run(main()))]


def test_connect_is_recorded_and_counted_only_when_asked():
    with ReferenceProcess(ReferenceConfig(ttft_ms=20, itl_ms=5)) as ref:
        with Waited(os.getpid(), ref.proc.pid) as waited:       # what other work on the machine cost
            fresh, reused = two_requests(ref.url, connect_in_ttft=False)
        vfresh, _ = two_requests(ref.url, connect_in_ttft=True)
    assert fresh.ok and reused.ok and fresh.connect_ns > 0 and reused.connect_ns == 0
    assert fresh.ttft_ns < 20e6 + fresh.connect_ns + 15e6 + waited.ms * 1e6
    # the set-up is not queue time: intended 0 -> queue = connect start, the same clock either way
    assert fresh.queue_ns == fresh.sent_ns - fresh.intended_ns - fresh.connect_ns
    assert vfresh.connect_in_ttft and vfresh.ttft_ns >= vfresh.connect_ns + 20e6 * 0.95
    assert vfresh.queue_ns == vfresh.sent_ns - vfresh.intended_ns
