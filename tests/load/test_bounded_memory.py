"""Bounded memory and unbounded cells (issue 20): requests are made as they are taken, finished records
leave memory for the cell's spool, a user stop keeps what finished, and the JSON result is written from
the spools in pieces. Memory itself is measured by bench/scale.py, not here."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from tokenbench.client.records import RawExchange, RequestRecord
from tokenbench.client.request import PreparedRequest
from tokenbench.client.spool import Spool
from tokenbench.load.runner import Outlets, PhasePlan, run_phase
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary import summarize
from tokenbench.spec.bench import Load
from tokenbench.spec.study import StudySpec
from tokenbench.store.journal import Journal
from tokenbench.store.rows import CellRow
from tokenbench.study.run import measure
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

MS = 1_000_000


def _request() -> PreparedRequest:
    return PreparedRequest(url="http://x/v1/completions", body=b"{}", headers={}, input_len=4, output_len=2,
                           expected_prompt_tokens=4)


async def _fake_send(req, intended):                 # a server answering in 5 ms (no socket: timing only)
    raw = RawExchange(intended_ns=intended, sent_ns=intended)
    try:
        await asyncio.sleep(0.005)
    except asyncio.CancelledError:
        raw.error_kind, raw.error_detail = "cancelled", "interrupted"
    return raw


def test_requests_are_made_only_when_taken():
    made = []

    def endless():
        while True:
            made.append(1)
            yield _request()

    run = asyncio.run(run_phase(_fake_send, endless(), PhasePlan("measure", Load(concurrency=2, duration_s=0.3))))
    assert 10 < len(run.records) and len(made) == len(run.records)      # nothing made ahead, no end needed


def test_a_stopped_phase_returns_what_finished():
    done = []

    async def main():
        task = asyncio.ensure_future(run_phase(_fake_send, iter(_request, None),
                                               PhasePlan("measure", Load(concurrency=4, duration_s=60), stoppable=True),
                                               Outlets(done=lambda: done.append(1))))
        while len(done) < 30:
            await asyncio.sleep(0.01)
        task.cancel()                                   # what Ctrl-C does to the running cell
        return await task

    started = time.perf_counter()
    run = asyncio.run(main())
    assert run.stopped and 0 < run.client_health.stopped_after_s <= time.perf_counter() - started
    kinds = [r.error_kind for r in run.records]
    assert kinds.count("cancelled") <= 4 and len(kinds) > 20


def _record(i: int) -> RequestRecord:
    sent = 10**9 + i * MS
    return RequestRecord(index=i, phase="measure", input_len=4, output_len=3, intended_ns=sent, sent_ns=sent,
                         end_ns=sent + 30 * MS, status=200, token_times_ns=[sent + k * 10 * MS for k in (1, 2, 3)],
                         token_counts=[1, 1, 1], completion_tokens=3, prompt_tokens=4, text="abc")


def test_the_spool_gives_back_every_record_in_send_order_on_every_pass():
    spool = Spool()
    for i in reversed(range(50)):                   # finished last to first
        spool.add(_record(i))
    warm = _record(7)
    warm.phase = "warmup"
    spool.add(warm)
    assert list(spool) == [warm, *(_record(i) for i in range(50))] == list(spool)
    assert len(spool) == 51


def test_the_json_result_is_written_from_the_spools(tmp_path):
    out = tmp_path / "r.json"
    journal = Journal(None, None, {"run_id": "x", "spec": {"a": [1, 2]}}, out)
    for key in ("4:3/c=1", "4:3/c=2"):
        spool = Spool()
        for i in range(20):
            spool.add(_record(i))
        journal.add(None, CellRow(key=key, input_len=4, output_len=3, status="ok",
                                  summary=CellSummary(mean_ttft_ms=float("nan"))), spool)
    doc = json.loads(out.read_text())
    assert doc["spec"] == {"a": [1, 2]} and [c["key"] for c in doc["cells"]] == ["4:3/c=1", "4:3/c=2"]
    assert [len(c["requests"]) for c in doc["cells"]] == [20, 20]
    assert doc["cells"][0]["summary"]["mean_ttft_ms"] is None
    assert doc["cells"][1]["requests"][3]["token_offsets_ns"] == [10 * MS, 20 * MS, 30 * MS]


@pytest.mark.slow
def test_a_cell_keeps_no_record_and_summarizes_them_all():
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1)) as ref:
        spec = StudySpec(target={"base_url": ref.url, "timeout_s": 30}, pairs=[(8, 4)], concurrency=[8],
                         requests={"num_prompts": 300}, warmup_requests=3)
        [result] = measure(spec, records=False).results
    assert result.records == [] and result.warmup == [] and result.status in ("ok", "invalid")
    spooled = list(result.all_records())
    measured = [r for r in spooled if r.phase == "measure"]
    assert len(spooled) == 303 and sorted(r.index for r in measured) == list(range(300))
    again = summarize(measured, result.load, 8, 4).to_dict()
    assert {k: result.summary.to_dict()[k] for k in again} == again


def test_the_load_waits_for_the_parser_when_finished_exchanges_pile_up(monkeypatch):
    from tokenbench.load import runner
    monkeypatch.setattr(runner, "PENDING_MAX", 4)
    monkeypatch.setattr(runner, "PENDING_HARD", 8)
    monkeypatch.setattr(runner, "SLICE_BUDGET_NS", 0)        # one parse step per loop iteration: a slow parser
    longest = []
    append = runner._Reducer.append

    def watched(self, item):
        append(self, item)
        longest.append(len(self.queue))
    monkeypatch.setattr(runner._Reducer, "append", watched)

    async def instant(req, intended):
        await asyncio.sleep(0)
        return RawExchange(intended_ns=intended, sent_ns=intended)

    run = asyncio.run(run_phase(instant, [_request() for _ in range(400)],
                                PhasePlan("measure", Load(concurrency=4, num_prompts=400))))
    assert len(run.records) == 400 and max(longest) <= 8 + 4         # the cap plus those in flight
    assert max(longest) >= 8                                         # (the parser did fall behind)


def test_the_json_result_rewritten_gives_the_same_requests(tmp_path):
    """A rewrite (the end of a run) copies each cell's encoded requests instead of encoding them again."""
    out = tmp_path / "r.json"
    journal = Journal(None, None, {"run_id": "x"}, out)
    spool = Spool()
    for i in range(30):
        spool.add(_record(i))
    journal.add(None, CellRow(key="4:3/c=1", input_len=4, output_len=3, status="ok"), spool)
    first = json.loads(out.read_text())
    spool.close()                                   # the rewrite no longer needs the records
    journal.header.set_status("done")
    journal.write()
    again = json.loads(out.read_text())
    assert again["status"] == "done" and again["cells"] == first["cells"] and len(again["cells"][0]["requests"]) == 30


@pytest.mark.slow
def test_keep_raw_writes_every_exchange_as_it_came(tmp_path):
    """--keep-raw over real HTTP: one line per request (warmup and measured), reads that give back the
    body byte for byte, and the parsed figures unchanged."""
    raw_file = tmp_path / "raw.jsonl"
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1)) as ref:
        proc = subprocess.run([sys.executable, "-m", "tokenbench.cli.main", "bench", "--base-url", ref.url,
                               "--input-len", "8", "--output-len", "5", "--concurrency", "2", "--num-prompts", "6",
                               "--warmup-requests", "2", "--no-store", "--keep-raw", str(raw_file),
                               "--output", str(tmp_path / "r.json"), "--allow-client-lag"],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(x) for x in raw_file.read_text().splitlines()]
    assert sorted((x["phase"], x["index"]) for x in lines) == [("measure", i) for i in range(6)] + [("warmup", 0), ("warmup", 1)]
    body = b"".join(text.encode("latin-1") for _, text in lines[-1]["reads"])
    assert body.startswith(b"data: ") and body.rstrip().endswith(b"data: [DONE]")
    assert all(0 < off <= x["end_ns"] - x["sent_ns"] for x in lines for off, _ in x["reads"])
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["cells"][0]["summary"]["completed"] == 6
