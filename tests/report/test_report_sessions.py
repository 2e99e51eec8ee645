"""Sessions in reports and comparisons: the table by turn and the TTFT-by-turn figure (with its 95 %
intervals) from what a sessions cell stored, the hit rates; `compare` matches sessions cells like any
others and its fairness check compares the session shape (not the prefix-cache state, which a session's
reuse of its history makes a result)."""

from __future__ import annotations

import numpy as np
import pytest

from tokenbench.client.records import RequestRecord
from tokenbench.errors import MeasurementError
from tokenbench.judge.views import load_run
from tokenbench.metrics.summary import shape_of, summarize, turn_figures
from tokenbench.metrics.summary_groups import ServerCounters, SessionFigures
from tokenbench.metrics.tally import TurnTally
from tokenbench.metrics.uncertainty import within
from tokenbench.report import render
from tokenbench.report.build import build_report
from tokenbench.report.compare import compare
from tokenbench.report.explain import issue_text
from tokenbench.spec.bench import Load, Workload
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow

MS = 1_000_000
TURNS, USERS, USER, OUT, SYSTEM = 3, 4, 20, 4, 10


def turn_records(ttft_ms: list[list[float]]) -> list[RequestRecord]:
    """USERS sessions of TURNS turns; ttft_ms[k][u] is user u's turn-k TTFT; cached = the history's full
    blocks of 8."""
    out, i = [], 0
    for u in range(USERS):
        t = 1_000 * MS + u * 7 * MS
        for k in range(TURNS):
            prompt = SYSTEM + (k + 1) * USER + k * OUT
            first = t + int(ttft_ms[k][u] * MS)
            times = [first + j * 2 * MS for j in range(OUT)]
            cached = 0 if k == 0 else (prompt - USER - 1) // 8 * 8
            out.append(RequestRecord(index=i, phase="measure", input_len=prompt, output_len=OUT, intended_ns=t,
                                     sent_ns=t, end_ns=times[-1] + MS, status=200, token_times_ns=times,
                                     token_counts=[1] * OUT, prompt_tokens=prompt, completion_tokens=OUT,
                                     cached_tokens=cached, usage_source="server", finish_reason="length",
                                     session_id=f"s-{u}", turn=k, expected_prompt_tokens=prompt))
            i, t = i + 1, times[-1] + 5 * MS
    return out


TTFT = [[30.0, 34.0, 29.0, 31.0], [12.0, 11.0, 13.0, 12.5], [9.0, 10.5, 9.5, 10.0]]


def sessions_cell(store: Store, run_id: str, think: float = 0.0, ttft=TTFT) -> str:
    wl = Workload(kind="sessions", turns=TURNS, input_len=USER, output_len=OUT, system_prompt_len=SYSTEM,
                  think_time_s=think)
    load = Load(users=USERS, num_sessions=USERS)
    recs = turn_records(ttft)
    tally = TurnTally()
    for r in recs:
        tally.add(r)
    figures = SessionFigures.model_validate({**shape_of(wl, load).model_dump(exclude_unset=True), "started": USERS,
                                             "completed": USERS, "cut_short": 0, "replies_returned_ids": 8,
                                             "replies_retokenized": 0, "replies_fixed": 0, **turn_figures(tally)})
    cached, prompt = sum(r.cached_tokens or 0 for r in recs), sum(r.prompt_tokens or 0 for r in recs)
    summary = summarize(recs, load, USER, OUT).with_(
        figures, ServerCounters(server_prefix_cache_queries=prompt, server_prefix_cache_hits=cached,
                                server_prefix_cache_hit_rate=cached / prompt))
    store.create_run("bench", "http://127.0.0.1:8000", {}, ["tokenbench", "bench"], {}, run_id=run_id)
    cid = store.upsert_config(run_id, "default", status="done")
    key = f"{wl.label}/{load.label}"
    store.save_cell(run_id, cid, CellRow(key=key, input_len=USER, output_len=OUT, status="ok", summary=summary,
                                         concurrency=USERS), recs)
    store.set_run_status(run_id, "done")
    return run_id


def test_the_report_has_a_table_by_turn_and_the_ttft_by_turn_figure(store):
    run_id = sessions_cell(store, "20260301-000000-sessions")
    doc = build_report(load_run(store, run_id), "en", [], "test")
    text = render.markdown.render(doc)
    assert "Sessions: figures by turn" in text and "default: 20/4 users=4" in text
    tpot = 2.0              # tokens 2 ms apart; TPOT ends at the last token (the end 1 ms later is the stream tail)
    for k in range(TURNS):
        iv = within(np.asarray(TTFT[k]), "mean")
        prompt = SYSTEM + (k + 1) * USER + k * OUT
        cached = 0 if k == 0 else (prompt - USER - 1) // 8 * 8
        row = (f"| {k} | {USERS} | {prompt:.1f} | {cached:.1f} | {100 * cached / prompt:.1f}% | "
               f"{iv.value:.1f} \\[{iv.lo:.1f} – {iv.hi:.1f}\\] | {np.median(TTFT[k]):.1f} | {tpot:.1f} |")
        assert row in text, row
    assert "4 users x 3 turns of 20+4 tokens, system 10" in text
    assert "By the server's own counters over the measured phase" in text
    [figure] = [f for f in doc.figures() if f.name == "ttft-by-turn"]
    assert figure.svg.count('class="band"') == 1 and figure.svg.count("<circle") == TURNS
    zh = render.markdown.render(build_report(load_run(store, run_id), "zh", [], "test"))
    assert "多轮会话：按轮次的指标" in zh and "轮次" in zh


def test_a_run_without_sessions_has_no_sessions_section(store, stored_run):
    text = render.markdown.render(build_report(load_run(store, stored_run), "en", [], "test"))
    assert "Sessions: figures by turn" not in text


def test_compare_matches_sessions_cells_and_checks_their_shape(store):
    a = sessions_cell(store, "20260301-000000-a")
    b = sessions_cell(store, "20260301-000000-b", ttft=[[v * 2 for v in row] for row in TTFT])
    store.db.execute("UPDATE requests SET cached_tokens = 0 WHERE cell_id IN (SELECT id FROM cells WHERE run_id=?)",
                     (b,))           # another engine's hits: a result of the session, not a workload difference
    doc, issues = compare(store, [a, b], "en", "T")
    text = render.markdown.render(doc)
    assert issues == [] and "users=4" in text and "The effective workloads match" in text
    c = sessions_cell(store, "20260301-000000-c", think=1.5)
    doc, issues = compare(store, [a, c], "en", "T")
    [issue] = issues
    assert issue.check == "session_shape" and issue.kind == "differs"
    assert "think 1.5 s fixed" in issue_text(issue) and "session shapes differ" in issue_text(issue)
    differs = render.markdown.render(doc).split("## 2.")[0]           # "What differs" names the two shapes
    [row] = [line for line in differs.splitlines() if line.startswith("| workload")]
    assert "sessions: 3 turns of 20+4 tokens, system 10, returned" in row and "think 1.5 s fixed" in row
    with pytest.raises(MeasurementError, match="compare --strict refused"):
        compare(store, [a, c], "en", "T", strict=True)


def test_a_single_turn_cell_is_not_a_session(store):
    from .report_fixtures import records as single
    a = sessions_cell(store, "20260301-000000-a")
    store.create_run("bench", "http://127.0.0.1:8000", {}, ["tokenbench", "bench"], {}, run_id="r-single")
    cid = store.upsert_config("r-single", "default", status="done")
    recs = single(USERS, USER, OUT, 4)
    summary = summarize(recs, Load(concurrency=USERS, num_prompts=len(recs)), USER, OUT)
    store.save_cell("r-single", cid, CellRow(key=f"{USER}:{OUT}/c={USERS}", input_len=USER, output_len=OUT, status="ok",
                                             summary=summary, concurrency=USERS), recs)
    _, issues = compare(store, [a, "r-single"], "en", "T")
    shape = next(i for i in issues if i.check == "session_shape")
    assert "single-turn" in issue_text(shape)
