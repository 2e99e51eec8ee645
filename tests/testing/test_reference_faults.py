"""Each injected fault produces its documented symptom and is named in the send log."""

from __future__ import annotations

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
    # deadlines are absolute: a chunk before the stall that left a few ms late shortens the gap after it
    assert max(gaps) >= 0.3e9 - 5e6 and gaps.index(max(gaps)) == N // 2 - 1


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
    assert len(FAULT_KINDS) == 10
