"""The recording proxy in front of the reference server, over real sockets: answers pass through byte for
byte and as they come, and every request is kept as the client sent it, with the connection it came on."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest
from aiohttp import web

from tokenbench.testing.recording_proxy import ProxyThread, RecordingProxy, forwardable, last_usage
from tokenbench.testing.reference_server import ReferenceProcess

from .helpers import config, post, run, served, stream_body


def test_answers_pass_through_unchanged_and_requests_are_kept_as_sent():
    body = stream_body(list(range(100, 120)), 12, seed=3)

    async def main():
        async with served(config(ttft_ms=20, itl_ms=10)) as (ref, s), RecordingProxy(ref.url) as proxy:
            direct = await post(s, f"{ref.url}/v1/completions", body)
            through = await post(s, f"{proxy.url}/v1/completions", body, headers={"X-Request-Id": "r1"})
            return direct, through, proxy.captured

    direct, through, captured = run(main())
    assert through.status == 200 and _same_but_ids(through.raw) == _same_but_ids(direct.raw)   # temperature 0
    [rec] = captured
    assert (rec.seq, rec.method, rec.path, rec.status) == (1, "POST", "/v1/completions", 200)
    assert rec.json() == body and {k.lower(): v for k, v in rec.headers}["x-request-id"] == "r1"
    assert rec.usage == {"prompt_tokens": 20, "completion_tokens": 12, "total_tokens": 32}
    assert rec.arrived_ns < rec.first_chunk_ns <= rec.last_chunk_ns and 0 < rec.ttfb_ms <= rec.total_ms


def test_answers_are_streamed_not_buffered():
    """The server sends the rest of its answer only once the client has the first part through the proxy:
    a proxy that held the answer until its end would never deliver it (the test would time out)."""
    released = asyncio.Event()

    async def upstream(request: web.Request) -> web.StreamResponse:
        out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await out.prepare(request)
        await out.write(b"data: first\n\n")
        await released.wait()
        await out.write(b"data: last\n\n")
        await out.write_eof()
        return out

    async def main():
        app = web.Application()
        app.router.add_post("/v1/completions", upstream)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            async with RecordingProxy(f"http://127.0.0.1:{runner.addresses[0][1]}") as proxy, \
                    aiohttp.ClientSession() as s, s.post(f"{proxy.url}/v1/completions", json={}) as resp:
                first = await resp.content.readuntil(b"\n\n")
                released.set()
                return first, await resp.content.read(), proxy.captured
        finally:
            await runner.cleanup()

    first, rest, [rec] = run(main())
    assert (first, rest) == (b"data: first\n\n", b"data: last\n\n")
    assert rec.first_chunk_ns < rec.last_chunk_ns


def _same_but_ids(raw: bytes) -> bytes:
    """The answer with its request id and creation time blanked (the only bytes two answers may differ in)."""
    return re.sub(rb'"created":\d+', b'"created":0', re.sub(rb'"id":"cmpl-\d+"', b'"id":""', raw))


def test_connections_are_numbered_as_the_client_uses_them():
    """One keep-alive session: one connection for every request; a session per request (as
    sglang.bench_serving): one connection each. GETs are kept too."""
    body = stream_body([5, 6, 7], 2)

    async def main():
        async with served(config()) as (ref, _), RecordingProxy(ref.url) as proxy:
            async with aiohttp.ClientSession() as keep:
                for _ in range(3):
                    await post(keep, f"{proxy.url}/v1/completions", body)
                await keep.get(f"{proxy.url}/v1/models")
            for _ in range(2):
                async with aiohttp.ClientSession() as fresh:
                    await post(fresh, f"{proxy.url}/v1/completions", body)
            return proxy.captured

    captured = run(main())
    assert [r.connection for r in captured] == [1, 1, 1, 1, 2, 3]
    assert [r.method for r in captured] == ["POST"] * 3 + ["GET"] + ["POST"] * 2
    assert captured[3].path == "/v1/models" and captured[3].usage is None


def test_an_unreachable_server_is_a_502_kept_in_the_capture():
    async def main():
        async with served(config()) as (ref, s):
            dead = ref.url
        async with aiohttp.ClientSession() as s, RecordingProxy(dead) as proxy:
            reply = await post(s, f"{proxy.url}/v1/completions", stream_body([1], 1))
            return reply, proxy.captured

    reply, [rec] = run(main())
    assert reply.status == 502 and rec.status == 502 and "recording proxy" in reply.json()["error"]["message"]


@pytest.mark.slow
def test_the_thread_form_records_a_client_in_another_process():
    """ProxyThread for synchronous callers (agree runs the clients as subprocesses): the reference server in a
    process of its own, a client in this one."""
    async def client(url: str):
        async with aiohttp.ClientSession() as s:
            return await post(s, f"{url}/v1/completions", stream_body([9, 9], 3))

    with ReferenceProcess(config()) as ref, ProxyThread(ref.url) as proxy:
        reply = run(client(proxy.url))
        captured = proxy.captured
    assert reply.status == 200 and len(captured) == 1 and captured[0].usage["completion_tokens"] == 3


def test_last_usage_reads_the_end_of_a_stream_or_a_whole_answer():
    stream = (b'data: {"choices": [], "usage": {"completion_tokens": 1}}\n\n'
              b'data: {"choices": [], "usage": {"completion_tokens": 7}}\n\ndata: [DONE]\n\n')
    assert last_usage(stream) == {"completion_tokens": 7}
    assert last_usage(stream[9:]) == {"completion_tokens": 7}                  # a tail cut mid-event
    assert last_usage(b'{"usage": {"prompt_tokens": 4}}') == {"prompt_tokens": 4}
    assert last_usage(b"data: [DONE]\n\n") is None and last_usage(b"") is None


def test_hop_by_hop_headers_are_not_forwarded():
    kept = forwardable({"Connection": "keep-alive", "Transfer-Encoding": "chunked", "Host": "a:1",
                        "Content-Length": "9", "Authorization": "Bearer k", "X-Request-Id": "7"})
    assert kept == {"Authorization": "Bearer k", "X-Request-Id": "7"}


def test_a_flushing_proxy_holds_the_answer_and_writes_it_on_in_pieces():
    """flush_ms 60 in front of a stream of a token every 10 ms: the client gets the answer whole, in pieces
    at least ~60 ms apart (each a flush the proxy stamped), never a token the moment it was written; the
    `latency` mode writes a piece 60 ms after its first byte came."""
    body = stream_body(list(range(100, 110)), 30, seed=1)

    async def main(mode: str):
        async with served(config(ttft_ms=5, itl_ms=10)) as (ref, s), RecordingProxy(ref.url, 60, mode) as proxy:
            direct = await post(s, f"{ref.url}/v1/completions", body)
            through = await post(s, f"{proxy.url}/v1/completions", body)
            return direct, through, proxy.captured[0]

    for mode in ("interval", "latency"):
        direct, through, rec = run(main(mode))
        assert _same_but_ids(through.raw) == _same_but_ids(direct.raw)
        flushes = rec.flushes_ns
        assert 3 <= len(flushes) <= 8 and len(through.arrivals) <= len(flushes) + 1
        assert all(b - a >= 50e6 for a, b in zip(flushes, flushes[1:-1], strict=False))   # the last: the end
        assert len(direct.arrivals) > 2 * len(through.arrivals)
