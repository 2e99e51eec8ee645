"""The fault matrix: every fault the reference server injects, through `tokenbench bench`.

For each fault (rate 0.3, seed 1, 10 requests at concurrency 1, so request i is the server's i-th
arrival and the send log names the fault it got): each faulty request is recorded with the documented
typed reason and the timings it did get, the cell completes with every request stored, the summary
counts failures by kind, and the exit code follows `--max-error-rate` (default 0: exit 5 with one line;
0.5: exit 0). docs/reliability.md lists these tests as the proof of each row.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
from dataclasses import dataclass

import pytest

from tests.raw_server import RawServer
from tokenbench.cli.main import main
from tokenbench.client.records import RequestRecord
from tokenbench.client.request import Prompt, prepare
from tokenbench.client.transport import new_session, send
from tokenbench.metrics.verdict import verdict
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import bench, by_arrival, db_problems, error_lines, wait_for_log

N, OUT, SEED, RATE = 10, 6, 1, 0.3        # seed 1 draws 4 faults in the first 10 requests, 3 in the next 10
HALF = OUT // 2                            # mid-stream faults strike at content chunk OUT // 2
STALL_S, SLOW_S = 2.0, 0.3
TIMEOUT_S = 1.0                            # stall_past_timeout: the client gives up long before the stall ends

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]   # real servers, seconds per test


@dataclass(frozen=True)
class Expect:
    kind: str | None          # error_kind of a faulty request (None: it succeeds)
    tokens: int               # token-bearing chunks the client keeps
    status: int = 200
    usage_source: str = "server"


FAILING = {
    "http_429": Expect("http_status", 0, 429, "none"),
    "http_500": Expect("http_status", 0, 500, "none"),
    "http_503": Expect("http_status", 0, 503, "none"),
    # the reference server streams continuous usage on every token chunk, so a stream cut short still
    # carries the server's own count of what it sent (usage_source "server")
    "reset_mid_stream": Expect("reset", HALF),
    "stall_past_timeout": Expect("timeout", HALF),
    "malformed_sse": Expect("malformed_sse", OUT),
    "invalid_json": Expect("invalid_json", OUT - 1),      # the cut chunk's token is unreadable
    "early_done": Expect("early_done", HALF),
}
SUCCEEDING = {
    "missing_usage": Expect(None, OUT, usage_source="chunks"),
    "slow_headers": Expect(None, OUT),
    "stall_within_timeout": Expect(None, OUT),
    # field conditions: the answer is whole, only its delivery differs
    "proxy_buffer": Expect(None, OUT),
    "slow_end": Expect(None, OUT),
    "no_done": Expect(None, OUT),
}


def server_fault(case: str) -> str:
    return case.split("_past")[0].split("_within")[0]


def reference(case: str) -> ReferenceProcess:
    return ReferenceProcess(ReferenceConfig(ttft_ms=10, itl_ms=10, faults={server_fault(case): RATE}, seed=SEED,
                                            stall_s=STALL_S if case != "stall_within_timeout" else 0.4,
                                            slow_headers_s=SLOW_S))


def timeout_flag(case: str) -> list[str]:
    return ["--timeout", str(TIMEOUT_S)] if case == "stall_past_timeout" else ["--timeout", "30"]


def record(doc: dict, i: int) -> dict:
    return doc["cells"][0]["requests"][i]


def arrivals(req: dict) -> list[int]:
    return [req["sent_ns"] + off for off in req["token_offsets_ns"]]


def check_request(req: dict, log: dict, exp: Expect, case: str) -> None:
    """One request against what the server did to it."""
    assert req["intended_ns"] <= req["sent_ns"] < req["end_ns"]
    assert all(0 < off <= req["end_ns"] - req["sent_ns"] for off in req["token_offsets_ns"])
    if log["fault"] is None:
        assert req["error_kind"] is None and req["usage_source"] == "server", req
        assert len(req["token_offsets_ns"]) == OUT and req["completion_tokens"] == OUT
        return
    assert req["error_kind"] == exp.kind, req
    assert req["status"] == exp.status and req["usage_source"] == exp.usage_source, req
    assert len(req["token_offsets_ns"]) == exp.tokens, req
    if exp.kind is not None:
        assert req["error_detail"], req
    # the client's arrival stamps are real: never before the server's write (same CLOCK_MONOTONIC)
    writes = log["write_ns"][:HALF] + log["write_ns"][HALF + 1:] if case == "invalid_json" else log["write_ns"]
    assert all(t >= w for t, w in zip(arrivals(req), writes, strict=False))


def check_cell(doc: dict, log: list[dict], exp: Expect, case: str) -> int:
    """Every request stored and checked; returns how many were faulty."""
    cell = doc["cells"][0]
    assert len(cell["requests"]) == N == len(log)
    for i, entry in enumerate(log):
        check_request(record(doc, i), entry, exp, case)
    faulty = sum(1 for e in log if e["fault"])
    s = cell["summary"]
    assert s["num_prompts"] == N and s["completed"] + s["failed"] == N
    if exp.kind is None:
        assert s["failed"] == 0 and s["failed_by_kind"] == {}
    else:
        assert s["failed_by_kind"] == {exp.kind: faulty} and s["completed"] == N - faulty
    return faulty


def check_db(tmp_path, doc: dict) -> None:
    assert db_problems(tmp_path / "results.db") == []
    con = sqlite3.connect(tmp_path / "results.db")
    [summary] = con.execute("SELECT summary_json FROM cells WHERE run_id=?", (doc["run_id"],)).fetchone()
    kinds = [r[0] for r in con.execute("SELECT error_kind FROM requests r JOIN cells c ON c.id=r.cell_id "
                                       "WHERE c.run_id=? ORDER BY idx", (doc["run_id"],))]
    assert json.loads(summary)["failed_by_kind"] == doc["cells"][0]["summary"]["failed_by_kind"]
    assert kinds == [r["error_kind"] for r in doc["cells"][0]["requests"]]


@pytest.mark.parametrize("case", list(FAILING))
def test_failing_fault(case, tmp_path, capsys):
    exp = FAILING[case]
    with reference(case) as ref:
        code, doc = bench(ref.url, tmp_path, *timeout_flag(case), n=N, output_len=OUT, name="default")
        err = capsys.readouterr().err
        code_tolerant, doc_tolerant = bench(ref.url, tmp_path, *timeout_flag(case), "--max-error-rate", "0.5",
                                            n=N, output_len=OUT, name="tolerant")
        wait_for_log(ref, 2 * N)
    log = by_arrival(ref.send_log())
    faulty = check_cell(doc, log[:N], exp, case)
    assert 0 < faulty < N
    # default --max-error-rate 0: the cell fails, exit 5 (MeasurementError), one line naming the kind
    assert doc["cells"][0]["status"] == "failed" and code == 5
    [line] = error_lines(err)
    assert f"{faulty}/{N} requests failed ({exp.kind}={faulty})" in line and "--max-error-rate" in line
    # --max-error-rate 0.5 tolerates the same kind of failures: the cell is ok and the exit code 0
    tolerated = check_cell(doc_tolerant, log[N:], exp, case)
    assert 0 < tolerated <= N // 2
    assert doc_tolerant["cells"][0]["status"] == "ok" and code_tolerant == 0
    check_db(tmp_path, doc)
    check_db(tmp_path, doc_tolerant)


@pytest.mark.parametrize("case", list(SUCCEEDING))
def test_succeeding_fault(case, tmp_path):
    exp = SUCCEEDING[case]
    with reference(case) as ref:
        code, doc = bench(ref.url, tmp_path, *timeout_flag(case), n=N, output_len=OUT)
        wait_for_log(ref, N)
    log = by_arrival(ref.send_log())
    faulty = check_cell(doc, log, exp, case)
    assert 0 < faulty < N and code == 0 and doc["cells"][0]["status"] == "ok"
    summary = doc["cells"][0]["summary"]
    reqs = doc["cells"][0]["requests"]
    hit = [r for r, e in zip(reqs, log, strict=False) if e["fault"]]
    if case == "missing_usage":
        # tokens counted from the chunks, and both the request and the summary say so
        assert summary["usage_source"] == {"chunks": faulty, "server": N - faulty}
        assert all(r["prompt_tokens"] is None and r["completion_tokens"] == OUT for r in hit)
        assert summary["total_output_tokens"] == N * OUT
    if case == "slow_headers":
        # the headers' delay is part of TTFT (the clock starts at the send)
        assert all(r["token_offsets_ns"][0] >= SLOW_S * 1e9 for r in hit)
        assert summary["max_ttft_ms"] >= SLOW_S * 1e3 > summary["min_ttft_ms"]
    if case == "stall_within_timeout":
        # no failure, but the stall is visible as one long inter-token gap
        gaps = [max(b - a for a, b in zip(r["token_offsets_ns"], r["token_offsets_ns"][1:], strict=False)) for r in hit]
        assert min(gaps) >= 0.4e9 and summary["max_itl_ms"] >= 400
    _field_condition(case, summary, hit, [e for e in log if e["fault"]])
    check_db(tmp_path, doc)


def _field_condition(case: str, summary: dict, hit: list[dict], faulty: list[dict]) -> None:
    """What tokenbench records under a delivery that differs (the answer itself is whole)."""
    assert summary["total_output_tokens"] == N * OUT and all(r["finish_reason"] == "length" for r in hit)
    if case == "proxy_buffer":
        # the body came in whole pieces: events that arrived in one piece share its stamp (the ITL is the
        # proxy's, not the server's; what to say of it is the client-health verdict's), counts are exact
        assert all(len(set(r["token_offsets_ns"])) < OUT for r in hit)
        assert all(e["pieces_ns"] for e in faulty)
    if case == "slow_end":
        # [DONE] slow_end_s after the last token: the stream tail (in E2EL; TPOT and ITL end at the last
        # token: tests/metrics/test_stream_end.py holds them to the no-fault run's)
        tails = [r["end_ns"] - r["sent_ns"] - r["token_offsets_ns"][-1] for r in hit]
        assert min(e["done_ns"] - e["write_ns"][-1] for e in faulty) >= 0.25e9 and min(tails) >= 0.2e9
        assert summary["max_stream_tail_ms"] >= 200
    if case == "no_done":
        # no [DONE]: complete at the clean end of the body after finish_reason and usage
        assert all(e["done_ns"] is None for e in faulty) and all(r["error_kind"] is None for r in hit)


def test_error_counts_by_kind_reach_the_report(tmp_path, capsys):
    """Several faults in one cell: the summary counts each kind, and `tokenbench report` lists them."""
    faults = {"http_500": 0.15, "reset_mid_stream": 0.15, "invalid_json": 0.15}
    with ReferenceProcess(ReferenceConfig(ttft_ms=10, itl_ms=10, faults=faults, seed=3)) as ref:
        code, doc = bench(ref.url, tmp_path, "--max-error-rate", "0.9", n=16, output_len=OUT)
    expected = {"http_500": "http_status", "reset_mid_stream": "reset", "invalid_json": "invalid_json"}
    counts: dict[str, int] = {}
    for e in ref.send_log():
        if e["fault"]:
            counts[expected[e["fault"]]] = counts.get(expected[e["fault"]], 0) + 1
    assert len(counts) >= 2 and code == 0
    assert doc["cells"][0]["summary"]["failed_by_kind"] == dict(sorted(counts.items()))
    out = tmp_path / "report"
    assert main(["report", doc["run_id"], "--db", str(tmp_path / "results.db"), "--format", "md",
                 "-o", str(out)]) == 0
    text = next(out.glob("*.md")).read_text()
    for kind, n in counts.items():
        assert any(kind in line and f"| {n} " in line for line in text.splitlines()), (kind, n)


def _rec(kind: str | None) -> RequestRecord:
    return RequestRecord(index=0, phase="measure", input_len=1, output_len=1, intended_ns=0, sent_ns=0, end_ns=1,
                         error_kind=kind, error_detail="x" if kind else "")


@pytest.mark.parametrize("failed,rate,status", [(0, 0.0, "ok"), (1, 0.0, "failed"), (5, 0.5, "ok"),
                                                (6, 0.5, "failed"), (10, 1.0, "ok")])
def test_max_error_rate_policy(failed, rate, status):
    """A cell fails when the failed fraction exceeds --max-error-rate (equal is tolerated)."""
    recs = [_rec("reset")] * failed + [_rec(None)] * (10 - failed)
    got, message = verdict(recs, allow_mismatch=False, max_error_rate=rate)
    assert got == status
    assert (message == "") == (status == "ok")


def send_four(reply: bytes):
    """Four requests in a row through the real transport to a RawServer; (records, connections seen)."""
    server = RawServer(reply)
    prompt = Prompt(token_ids=(5, 6), text=None, input_len=2, output_len=2, expected_prompt_tokens=2)
    req = prepare(f"http://127.0.0.1:{server.port}", "completions", "m", prompt, None)

    async def run():
        async with new_session(5.0) as session:
            return [await send(session, req, 0) for _ in range(4)]

    try:
        return asyncio.run(asyncio.wait_for(run(), 30)), server.accepted
    finally:
        server.close()


def test_connection_closed_before_any_byte_is_one_attempt():
    """A server that closes every new connection unanswered: each request fails once as `reset`
    (a retry is only for a pooled keep-alive connection the server had already closed), so the
    offered load is what was asked."""
    raws, accepted = send_four(b"")
    assert [r.error_kind for r in raws] == ["reset"] * 4
    assert all("before any response byte" in r.error_detail for r in raws)
    assert accepted == 4


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_connection_the_server_closed_before_the_request_is_written_fails_the_request(loop):
    """The server accepts and closes at once (killed between accept and the request), and the request is
    started on that connection: a failed exchange (`stale`, which `send` retries on a new connection), not an
    exception out of the client (uvloop raised RuntimeError "the handler is closed", which ended a sweep as an
    internal error) nor a request that waits for its timeout (asyncio drops the write)."""
    from tokenbench.client.records import RawExchange
    server = socket.create_server(("127.0.0.1", 0))

    async def run():
        async with new_session(5.0) as session:
            conn = await session._connect(("127.0.0.1", server.getsockname()[1], False))
            server.accept()[0].close()
            while not conn.transport.is_closing():
                await asyncio.sleep(0.01)
            raw = RawExchange(intended_ns=0)
            await conn.start(raw, b"GET / HTTP/1.1\r\n\r\n")
            return raw

    runner = pytest.importorskip("uvloop").run if loop == "uvloop" else asyncio.run
    try:
        raw = runner(asyncio.wait_for(run(), 10))
    finally:
        server.close()
    assert raw.error_kind == "stale" and "before the request was written" in raw.error_detail


@pytest.mark.parametrize("reply,detail", [
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nab", "bad chunk size"),   # used to hang
    (b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n", "bad Content-Length"),
    (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP response"),
])
def test_bad_http_framing_fails_the_request(reply, detail):
    raws, _ = send_four(reply)
    assert [r.error_kind for r in raws] == ["malformed_sse"] * 4
    assert all(r.error_detail.startswith("bad HTTP framing: ") and detail in r.error_detail for r in raws)
