"""Each injected fault produces its documented symptom and is named in the send log."""

from __future__ import annotations

import asyncio
import json

import pytest

from tokenbench.errors import UsageError
from tokenbench.testing.faults import FAULT_KINDS, FaultPicker, parse_fault

from .helpers import chat_body, config, post, read_log, run, served, stream_body

N = 8  # tokens asked; mid-stream faults strike at content chunk N // 2


def faulty(tmp_path, fault: str, body: dict, path: str = "/v1/completions", **cfg):
    async def main():
        c = config(faults={fault: 1.0}, send_log=str(tmp_path / "l"), stall_s=0.3, slow_headers_s=0.3, **cfg)
        async with served(c) as (ref, s):
            return await post(s, f"{ref.url}{path}", body)

    reply = run(main())
    (rec,) = read_log(tmp_path / "l")
    assert rec["fault"] == fault
    return reply, rec


def content_chunks(reply) -> list[dict]:
    return [c for c in reply.chunks if c["choices"] and "token_ids" in c["choices"][0]]


@pytest.mark.parametrize("fault,status", [("http_429", 429), ("http_500", 500), ("http_503", 503)])
def test_http_status_faults(tmp_path, fault, status):
    reply, rec = faulty(tmp_path, fault, stream_body("a b", N))
    assert reply.status == status and reply.json()["error"]["type"] == "server_error"
    assert rec["status"] == status and rec["write_ns"] == [] and rec["outcome"] == "fault"
    if status == 429:
        assert reply.headers["Retry-After"] == "1"


def test_reset_mid_stream(tmp_path):
    reply, rec = faulty(tmp_path, "reset_mid_stream", stream_body("a b", N))
    assert reply.status == 200 and reply.error is not None  # the transport broke
    assert len(content_chunks(reply)) == N // 2 and "data: [DONE]" not in reply.lines
    assert rec["completion_tokens"] == N // 2 and rec["outcome"] == "fault"


def test_reset_non_streaming(tmp_path):
    reply, rec = faulty(tmp_path, "reset_mid_stream", {**stream_body("a b", N), "stream": False})
    assert reply.error is not None


def test_stall(tmp_path):
    reply, rec = faulty(tmp_path, "stall", stream_body("a b", N))
    assert reply.error is None and len(content_chunks(reply)) == N and reply.lines[-1] == "data: [DONE]"
    gaps = [b - a for a, b in zip(rec["write_ns"], rec["write_ns"][1:], strict=False)]
    # deadlines are absolute: a chunk before the stall that left a few ms late shortens the gap after it;
    # the stall is where it was asked (another process may delay any other write too, so not "the largest")
    assert gaps[N // 2 - 1] >= 0.3e9 - 5e6


def test_malformed_sse(tmp_path):
    reply, _ = faulty(tmp_path, "malformed_sse", stream_body("a b", N))
    assert [ln for ln in reply.lines if not ln.startswith("data:")] == ["this line has no data prefix"]
    assert len(content_chunks(reply)) == N


def test_invalid_json(tmp_path):
    reply, rec = faulty(tmp_path, "invalid_json", chat_body("a b", N), path="/v1/chat/completions")
    bad = []
    for line in reply.lines:
        try:
            json.loads(line[6:]) if line != "data: [DONE]" else None
        except ValueError:
            bad.append(line)
    assert len(bad) == 1 and bad[0].startswith("data: {")
    assert rec["completion_tokens"] == N  # the broken chunk's tokens were sent, unreadably


def test_invalid_json_non_streaming(tmp_path):
    reply, _ = faulty(tmp_path, "invalid_json", {**stream_body("a b", N), "stream": False})
    with pytest.raises(ValueError):
        reply.json()


def test_early_done(tmp_path):
    reply, rec = faulty(tmp_path, "early_done", stream_body("a b", N))
    assert reply.error is None and reply.lines[-1] == "data: [DONE]"
    chunks = content_chunks(reply)
    assert len(chunks) == N // 2 and all(c["choices"][0]["finish_reason"] is None for c in chunks)
    assert all("usage" not in c for c in reply.chunks) and rec["completion_tokens"] == N // 2


def test_missing_usage(tmp_path):
    reply, _ = faulty(tmp_path, "missing_usage", chat_body("a b", N), path="/v1/chat/completions")
    assert len(content_chunks(reply)) == N and all("usage" not in c for c in reply.chunks)
    plain, _ = faulty(tmp_path, "missing_usage", {**stream_body("a b", N), "stream": False})
    assert "usage" not in plain.json()


def test_slow_headers(tmp_path):
    reply, rec = faulty(tmp_path, "slow_headers", stream_body("a b", N))
    assert reply.headers_ns - reply.sent_ns >= 0.3e9 and len(content_chunks(reply)) == N
    assert rec["admitted_ns"] - rec["recv_ns"] >= 0.3e9


def test_picker_is_seeded_and_follows_rates():
    rates = {"http_500": 0.25, "stall": 0.25}
    draws = [FaultPicker(rates, seed=7).pick() for _ in range(1)]
    a, b = FaultPicker(rates, seed=7), FaultPicker(rates, seed=7)
    seq = [a.pick() for _ in range(4000)]
    assert seq == [b.pick() for _ in range(4000)] and draws[0] == seq[0]
    for name in rates:
        assert 0.22 < seq.count(name) / len(seq) < 0.28
    assert 0.47 < seq.count(None) / len(seq) < 0.53


def test_fault_specs_are_validated():
    assert parse_fault("stall=0.5") == ("stall", 0.5)
    for bad in ("stall", "stall=x", "nope=0.1", "stall=1.5", "stall=-0.1"):
        with pytest.raises(UsageError):
            parse_fault(bad)
    assert len(FAULT_KINDS) == 13


# ---- field conditions: complete answers, delivered differently ----

async def _raw_reads(port: int, body: dict) -> list[tuple[int, bytes]]:
    """POST over a bare socket; every read as it came (time, bytes), headers included."""
    from time import perf_counter_ns
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Connection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(data), data))
    reads = []
    while chunk := await reader.read(1 << 20):
        reads.append((perf_counter_ns(), chunk))
    writer.close()
    return reads


def test_proxy_buffer_delivers_whole_pieces(tmp_path):
    """Through a buffering proxy many events arrive in one read: the body leaves in 4 KiB pieces."""
    async def main():
        c = config(faults={"proxy_buffer": 1.0}, send_log=str(tmp_path / "l"))
        async with served(c) as (ref, _):
            return await _raw_reads(ref.port, stream_body(list(range(5, 50)), 120))

    reads = run(main())
    raw = b"".join(r for _, r in reads)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0] and body.endswith(b"0\r\n\r\n")
    (rec,) = read_log(tmp_path / "l")
    pieces = len(body) - len(b"0\r\n\r\n")                # the end of the chunked body is not buffered
    assert len(rec["pieces_ns"]) == -(-pieces // 4096) >= 4 and rec["outcome"] == "ok"
    assert len(reads) <= len(rec["pieces_ns"]) + 2         # headers, pieces, end: never one read per event
    assert body.count(b"data: {") == 120 and b"data: [DONE]" in body   # usage rides the last event
    assert rec["pieces_ns"][0] >= rec["write_ns"][10]     # the first piece waited for 4 KiB of events


@pytest.mark.parametrize("path,body", [("/v1/chat/completions", chat_body("a b", N)),
                                       ("/v1/completions", stream_body("a b", N))])
def test_slow_end_sends_the_tail_late(tmp_path, path, body):
    reply, rec = faulty(tmp_path, "slow_end", body, path=path, slow_end_s=0.2)
    assert reply.error is None and reply.lines[-1] == "data: [DONE]" and rec["outcome"] == "ok"
    assert len(content_chunks(reply)) == N and reply.chunks[-1]["usage"]["completion_tokens"] == N
    assert rec["done_ns"] - rec["admitted_ns"] >= (5 + (N - 1) * 1 + 200) * 1e6   # 200 ms after the last token's due
    tail_at = next(t for t, data in reply.arrivals if b"[DONE]" in data)
    assert tail_at >= rec["done_ns"]
    if path == "/v1/chat/completions":                  # the usage-only chunk is part of the late tail
        usage_at = next(t for t, data in reply.arrivals if b'"choices":[],"usage"' in data)
        assert usage_at >= rec["done_ns"]


def test_no_done_ends_cleanly_with_finish_and_usage(tmp_path):
    reply, rec = faulty(tmp_path, "no_done", chat_body("a b", N), path="/v1/chat/completions")
    assert reply.error is None and "data: [DONE]" not in reply.lines and rec["outcome"] == "ok"
    assert content_chunks(reply)[-1]["choices"][0]["finish_reason"] == "length"
    assert reply.chunks[-1]["usage"]["completion_tokens"] == N and rec["done_ns"] is None


def test_arrival_log_matches_the_send_log_and_pages(tmp_path):
    async def main():
        async with served(config(send_log=str(tmp_path / "l"))) as (ref, s):
            for i in range(5):
                await post(s, f"{ref.url}/v1/completions", stream_body("a b", 2),
                           {"X-Request-Id": f"r{i}", "X-Session-ID": f"s{i % 2}"})
                await asyncio.sleep(0.01)
            await post(s, f"{ref.url}/v1/completions", {"prompt": []})          # refused: still arrived
            first = await (await s.get(f"{ref.url}/arrivals")).json()
            later = await (await s.get(f"{ref.url}/arrivals?since=4")).json()
            bad = await s.get(f"{ref.url}/arrivals?since=x")
            return first, later, bad.status

    first, later, bad = run(main())
    log = sorted(read_log(tmp_path / "l"), key=lambda r: r["recv_ns"])
    assert first["count"] == 6 and [a["x_request_id"] for a in first["arrivals"][:5]] == [f"r{i}" for i in range(5)]
    assert [a["recv_ns"] for a in first["arrivals"][:5]] == [r["recv_ns"] for r in log]
    assert first["gaps_ms"] == [(b - a) / 1e6 for a, b in zip(
        [a["recv_ns"] for a in first["arrivals"]], [a["recv_ns"] for a in first["arrivals"][1:]], strict=False)]
    assert first["arrivals"][1]["session_id"] == "s1" and first["arrivals"][5]["x_request_id"] is None
    assert later["since"] == 4 and len(later["arrivals"]) == 2 and len(later["gaps_ms"]) == 1
    assert bad == 400


def test_arrival_rate_and_gaps():
    from tokenbench.testing.send_log import achieved_rate, gaps_ms
    stamps = [0, 50_000_000, 100_000_000, 150_000_000]
    assert gaps_ms(list(reversed(stamps))) == [50.0, 50.0, 50.0]
    assert achieved_rate(stamps) == pytest.approx(20.0) and achieved_rate([5]) is None
