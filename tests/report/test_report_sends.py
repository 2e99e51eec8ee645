"""A rate sent off the asked one and a stream tail that matters: said under the scaling table, in both
languages, for the cells concerned and no other; a rate on schedule and a short tail say nothing."""

from __future__ import annotations

from tokenbench.client.records import RequestRecord
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run
from tokenbench.metrics.summary import summarize
from tokenbench.metrics.summary_groups import SendRates
from tokenbench.report import render
from tokenbench.report.build import build_report
from tokenbench.spec.bench import Load
from tokenbench.store.rows import CellRow

from .report_fixtures import ENV, facts, profile

MS = 1_000_000


def records(rate: float, tail_ms: float) -> list[RequestRecord]:
    """16 requests at `rate`, 4 tokens 10 ms apart after 20 ms, the stream ending `tail_ms` after the last."""
    out = []
    for i in range(16):
        sent = 1_000 * MS + int(i * 1e9 / rate)
        times = [sent + 20 * MS + k * 10 * MS for k in range(4)]
        out.append(RequestRecord(index=i, phase="measure", input_len=8, output_len=4, intended_ns=sent, sent_ns=sent,
                                 end_ns=times[-1] + int(tail_ms * MS), status=200, token_times_ns=times,
                                 token_counts=[1] * 4, prompt_tokens=8, completion_tokens=4, usage_source="server",
                                 finish_reason="length"))
    return out


def stored(store, rates: dict[float, tuple[SendRates, float]]) -> str:
    run_id = store.create_run("bench", "http://127.0.0.1:8000", {}, ["tokenbench", "bench"], ENV)
    cid = store.upsert_config(run_id, "default", profile=profile(4), facts=facts(4096), status="done")
    for rate, (send, tail_ms) in rates.items():
        load = Load(request_rate=rate, num_prompts=16)
        recs = records(send.send_rate_achieved or rate, tail_ms)
        summary = summarize(recs, load, 8, 4).with_(send)
        store.save_cell(run_id, cid, CellRow(key=f"8:4/rate={rate:g}/s", input_len=8, output_len=4, status="ok",
                                             summary=summary, request_rate=rate), recs)
    store.set_run_status(run_id, "done")
    return run_id


def test_an_off_rate_and_a_long_tail_are_said_under_the_scaling_table(store):
    late = SendRates(send_rate_asked=20.0, send_rate_scheduled=20.0, send_rate_achieved=16.47, send_late_mean_ms=31.5,
                     send_connect_mean_ms=0.1, send_rate_off="client")
    kept = SendRates(send_rate_asked=5.0, send_rate_scheduled=5.0, send_rate_achieved=4.99, send_late_mean_ms=0.4,
                     send_connect_mean_ms=0.1)
    run = load_run(store, stored(store, {20.0: (late, 300.0), 5.0: (kept, 0.2)}))
    texts = {lang: render.markdown.render(build_report(run, lang, check_run(run), "T")) for lang in ("en", "zh")}
    en, zh = texts["en"], texts["zh"]
    assert "| 20/s → 16.5/s |" in en and "| 5/s |" in en
    assert "sent at 16.47/s for 20/s asked (-17.7%): the client sent late, 31.5 ms on average" in en
    assert "8/4 20/s: the stream ended 300.0 ms (mean; p99 300.0 ms) after its last token" in en
    assert "5/s: sent at" not in en and "5/s: the stream ended" not in en       # on schedule, short tail
    assert "实际发送速率 16.47/s，要求 20/s" in zh and "流尾" in zh
