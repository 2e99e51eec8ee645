"""Sessions against the reference server with its prefix cache on (a child process, real loopback HTTP):
every turn's prompt length exact and verified by the server's count, the cached tokens of every turn the
closed form of what the server had seen (testing/prefix_cache.cacheable_tokens), the hit rate computed by
hand equal to the cell's (from the responses and from the server's counters), the session header at the
server, the think time kept; a sessions cell stopped by Ctrl-C is interrupted and measured again in full."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tokenbench.client import api
from tokenbench.client.records import RequestRecord
from tokenbench.errors import Interrupted
from tokenbench.spec.study import StudySpec
from tokenbench.store.db import Store
from tokenbench.study import run as study
from tokenbench.study.run import measure
from tokenbench.study.settings import RunSettings, StudyEvents
from tokenbench.testing.prefix_cache import cacheable_tokens
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow   # a reference server per test: seconds each

BLOCK = 16


@pytest.fixture
def ref() -> Iterator[ReferenceProcess]:
    """A fresh server per test: its prefix cache starts empty (the reference server has no reset)."""
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=2, prefix_cache_blocks=8192, block_size=BLOCK)) as server:
        yield server


def run(url: str, workload: dict, pair: tuple[int, int], **load):
    spec = StudySpec.model_validate({"target": {"base_url": url}, "workload": {"kind": "sessions", **workload},
                                     "pairs": [list(pair)], "warmup_requests": 2, **{"users": [8], **load}})
    out = measure(spec)
    [result], [row] = out.results, out.cells
    # a cell is "invalid" only when this shared machine was too busy for the client's own timing checks,
    # which these functional tests do not test; lengths and errors make a cell "failed"
    assert result.status in ("ok", "invalid"), result.message
    return result, row


def sessions_of(records: list[RequestRecord]) -> dict[str, list[RequestRecord]]:
    out: dict[str, list[RequestRecord]] = {}
    for r in sorted(records, key=lambda r: (r.session_id or "", r.turn or 0)):
        out.setdefault(r.session_id or "", []).append(r)
    return out


def test_8_users_x_5_turns_exact_lengths_cached_history_and_the_hit_rate_by_hand(ref):
    system, user, out = 24, 40, 12
    result, row = run(ref.url, {"turns": 5, "system_prompt_len": system}, (user, out))
    records = result.records
    assert len(records) == 40 and all(r.ok and not r.length_error and r.usage_source == "server" for r in records)
    by = sessions_of(records)
    assert len(by) == 8 and all([r.turn for r in turns] == [0, 1, 2, 3, 4] for turns in by.values())
    for turns in by.values():
        for k, r in enumerate(turns):
            assert r.prompt_tokens == r.expected_prompt_tokens == r.input_len == system + (k + 1) * user + k * out
            seen = cacheable_tokens(turns[k - 1].prompt_tokens or 0, turns[k - 1].completion_tokens or 0, BLOCK)
            assert r.cached_tokens == (0 if k == 0 else seen), (k, r)
    cached, prompt = sum(r.cached_tokens or 0 for r in records), sum(r.prompt_tokens or 0 for r in records)
    s, figures = row.summary, row.summary.sessions
    assert s.cache_hit_rate == pytest.approx(cached / prompt) and s.total_cached_tokens == cached
    assert s.counters is not None and s.counters.cache_hit_source == "usage"
    assert (s.counters.server_prefix_cache_hits, s.counters.server_prefix_cache_queries) == (cached, prompt)
    assert figures is not None and figures.turn_requests == [8] * 5 and figures.completed == 8
    for k in range(5):
        turn = [r for r in records if r.turn == k]
        assert figures.turn_hit_rate is not None and figures.turn_hit_rate[k] == pytest.approx(
            sum(r.cached_tokens or 0 for r in turn) / sum(r.prompt_tokens or 0 for r in turn))
    assert (figures.replies_returned_ids, figures.replies_retokenized) == (32, 0)
    arrivals = api.get_json(ref.url, "/arrivals")["arrivals"]
    told = [a["session_id"] for a in arrivals if a["session_id"] is not None]
    assert sorted(told) == sorted(r.session_id for r in records)        # the header, once per turn


def test_chat_sessions_share_a_system_prompt_and_hit_their_history_through_the_template(ref):
    system, user, out = 40, 20, 8
    result, row = run(ref.url, {"turns": 4, "system_prompt_len": system, "shared_system_prompt": True},
                      (user, out), api="chat")
    records = result.records
    assert all(r.ok and not r.length_error for r in records) and len(records) == 32
    overhead = records[0].prompt_tokens - (system + user)               # `<|system|>`, `<|user|>`, `<|assistant|>`
    assert overhead == 3
    for turns in sessions_of(records).values():
        for k, r in enumerate(turns):
            assert r.prompt_tokens == r.expected_prompt_tokens == system + (k + 1) * user + k * out + 2 * k + 3
            if k == 0:                 # the shared system prompt: cached once another session's prefill stored it
                assert r.cached_tokens in (0, (1 + system + 1) // BLOCK * BLOCK)   # `<|system|> S <|user|>`
            else:
                assert r.cached_tokens == cacheable_tokens(turns[k - 1].prompt_tokens or 0,
                                                           turns[k - 1].completion_tokens or 0, BLOCK)
    assert row.summary.sessions is not None and row.summary.sessions.replies_retokenized == 24


def test_fixed_replies_hit_the_prompts_only_and_users_think_between_turns(ref):
    think = 0.2
    result, _ = run(ref.url, {"turns": 3, "assistant_turns": "fixed", "think_time_s": think}, (32, 8),
                    users=[3], ramp_up_s=0.3)
    records = result.records
    assert all(r.ok and not r.length_error for r in records) and len(records) == 9
    for turns in sessions_of(records).values():
        for k in range(1, 3):
            prev, r = turns[k - 1], turns[k]
            assert r.cached_tokens == (prev.prompt_tokens or 0) // BLOCK * BLOCK     # not the answer's blocks
            assert r.intended_ns >= prev.end_ns + int(think * 1e9) and r.sent_ns >= r.intended_ns
    firsts = sorted(r.intended_ns for r in records if r.turn == 0)
    assert firsts[2] - firsts[0] == 200_000_000                          # users start 0.1 s apart


def test_a_stopped_sessions_cell_is_interrupted_with_its_turns_and_resume_measures_it_in_full(tmp_path, ref):
    """Ctrl-C (the study's task cancelled as asyncio's Runner does) in the measured phase of a sessions cell:
    stored as interrupted with the turns planned (sessions x turns) and what the sessions did; --resume
    measures every turn of every session again."""
    task: list[asyncio.Task | None] = [None]

    def progress(cell, p) -> None:
        if p.phase == "measure" and p.done >= 1 and task[0] is not None:
            task[0].cancel()
            task[0] = None

    events = StudyEvents(log=lambda m: None, cell_started=lambda c: task.__setitem__(0, asyncio.current_task()),
                         cell_progress=progress)
    spec = StudySpec.model_validate({"target": {"base_url": ref.url}, "pairs": [[16, 8]], "users": [2],
                                     "workload": {"kind": "sessions", "turns": 3, "think_time_s": 0.2},
                                     "warmup_requests": 0})
    store = Store(tmp_path / "r.db")
    planned = study.start(spec, store, RunSettings(kind="bench"))
    with pytest.raises(Interrupted):
        study.execute(planned, events)
    [cell] = store.cells(planned.run_id)
    s = cell.summary
    assert cell.status == "interrupted" and s.interruption is not None and s.interruption.planned == 6
    assert 1 <= (s.completed or 0) < 6 and s.sessions is not None and s.sessions.started >= 1
    resumed = study.start(study.stored_spec(store, planned.run_id, "bench"), store, RunSettings(kind="bench"),
                          resume=planned.run_id)
    study.execute(resumed, StudyEvents(log=lambda m: None))
    [cell] = store.cells(planned.run_id)
    s = cell.summary
    assert (cell.status in ("ok", "invalid"), s.completed, s.interruption) == (True, 6, None)
    assert s.sessions is not None and (s.sessions.completed, s.sessions.turn_requests) == (2, [2, 2, 2])
    turns = sorted((r.session_id, r.turn) for r in store.requests(cell.id or 0, "measure"))
    assert len({sid for sid, _ in turns}) == 2 and [k for _, k in turns] == [0, 1, 2] * 2
