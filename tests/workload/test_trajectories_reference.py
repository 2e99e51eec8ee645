"""Trajectories against the reference server with its prefix cache on (a child process, real loopback HTTP),
whose answers have closed forms: every turn's prompt is the salt plus the history plus the new tokens, its
cached tokens what the previous turn left in full blocks (testing/prefix_cache.cacheable_tokens), the
theoretical hit per turn equal to the achieved one; each job's completion time the send log's (the client's
first send and last read around the server's first receipt and last write), its tool time exactly the trace's
delays and kept out of its server time; a second pass over the corpus hits nothing the first left (its salt),
and without the salt it does; a corpus with a trajectory longer than the server's context is refused, or with
`unreplayable: skip` replayed without it, which is stated."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contention import Waited
from tokenbench.client.records import RequestRecord
from tokenbench.errors import UsageError
from tokenbench.metrics.health import CLAIM_ABS_MS
from tokenbench.spec.study import StudySpec
from tokenbench.study.run import measure
from tokenbench.testing.prefix_cache import cacheable_tokens
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess
from tokenbench.workload.trajectories import SALT_TOKENS

pytestmark = pytest.mark.slow   # a reference server per test: seconds each

BLOCK = 16
# (new input tokens, output tokens, tool delay before the turn in ms) per turn; lengths off the block grid
TRAJECTORIES = {
    "a": [(37, 11, 0), (21, 9, 120), (50, 13, 40)],
    "b": [(70, 5, 0), (3, 17, 80)],
    "c": [(29, 7, 0), (45, 21, 60), (18, 4, 0), (33, 9, 150)],
}


@pytest.fixture
def ref() -> Iterator[ReferenceProcess]:
    """A fresh server per test: its prefix cache starts empty."""
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=2, prefix_cache_blocks=8192, block_size=BLOCK,
                                          max_model_len=400)) as server:
        yield server


def corpus(path: Path, trajectories: dict[str, list[tuple[int, int, int]]]) -> str:
    """The trajectories as AIPerf's multi-turn Mooncake JSONL (delay in ms before a turn)."""
    rows = [{"session_id": sid, "input_length": new, "output_length": out, **({"delay": delay} if k else {})}
            for sid, turns in trajectories.items() for k, (new, out, delay) in enumerate(turns)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def run(url: str, dataset: str, sessions: int, window: str = "all", **workload):
    spec = StudySpec.model_validate({"target": {"base_url": url}, "users": [2], "warmup_requests": 1, "window": window,
                                     "workload": {"kind": "trajectories", "dataset_path": dataset, **workload},
                                     "requests": {"num_sessions": sessions}})
    out = measure(spec)
    [result], [row] = out.results, out.cells
    # "invalid" only when this shared machine was too busy for the client's own timing checks
    assert result.status in ("ok", "invalid"), result.message
    return result, row


def jobs_of(records: list[RequestRecord]) -> dict[str, list[RequestRecord]]:
    out: dict[str, list[RequestRecord]] = {}
    for r in sorted(records, key=lambda r: (r.session_id or "", r.turn or 0)):
        out.setdefault(r.session_id or "", []).append(r)
    return out


def closed_form(turns: list[tuple[int, int, int]], head: int) -> list[tuple[int, int]]:
    """(prompt tokens, cached tokens) of each turn: the history's answers are the server's (returned), so
    turn k finds what turn k - 1 left, its prompt and answer but the last token, in full blocks."""
    out: list[tuple[int, int]] = []
    history, before = head, (0, 0)          # the previous turn's prompt and answer
    for new, answer, _ in turns:
        out.append((history + new, cacheable_tokens(*before, BLOCK) if out else 0))
        before, history = (history + new, answer), history + new + answer
    return out


def test_every_turn_and_every_job_has_its_closed_form_and_the_send_logs_times(ref, tmp_path):
    waited = Waited(os.getpid(), ref.proc.pid)
    result, row = run(ref.url, corpus(tmp_path / "t.jsonl", TRAJECTORIES), 3)
    waited.stop()
    records = [r for r in result.all_records() if r.phase == "measure"]
    by = jobs_of(records)
    sources = dict(zip(sorted(by), TRAJECTORIES, strict=True))          # sessions 0, 1, 2: trajectories a, b, c
    assert len(records) == 9 and all(r.ok and not r.length_error for r in records)
    for sid, turns in by.items():
        plan = TRAJECTORIES[sources[sid]]
        assert [(r.prompt_tokens, r.cached_tokens) for r in turns] == closed_form(plan, SALT_TOKENS)
        assert [r.output_tokens for r in turns] == [out for _, out, _ in plan]
        assert all(r.prompt_tokens == r.expected_prompt_tokens for r in turns)      # checked per turn
    s, jobs, sessions = row.summary, row.summary.jobs, row.summary.sessions
    assert jobs is not None and sessions is not None and jobs.complete == 3 and jobs.incomplete == 0
    assert sessions.turn_theory_hit_rate == pytest.approx(sessions.turn_hit_rate)   # theory and achieved agree
    log = {}
    for e in ref.send_log():
        log.setdefault(e["session_id"], []).append(e)
    tolerance = 2 * CLAIM_ABS_MS + waited.ms
    for i, sid in enumerate(jobs.ids or []):
        turns, served = by[sid], sorted(log[sid], key=lambda e: e["recv_ns"])
        plan = TRAJECTORIES[sources[sid]]
        tool = sum(delay for _, _, delay in plan)
        assert (jobs.each_tool_ms or [])[i] == tool                               # the trace's delays, exactly
        server = sum(r.token_times_ns[-1] - r.sent_ns for r in turns) / 1e6
        assert (jobs.each_server_ms or [])[i] == pytest.approx(server, abs=1e-6)
        jct = (jobs.each_completion_ms or [])[i]
        assert jct == pytest.approx((turns[-1].token_times_ns[-1] - turns[0].sent_ns) / 1e6, abs=1e-6)
        assert jct >= server + tool                                                # the rest: tails, lateness
        log_jct = (served[-1]["write_ns"][-1] - served[0]["recv_ns"]) / 1e6
        assert 0 <= jct - log_jct <= tolerance, (sid, jct, log_jct, waited.ms)
        for k in range(1, len(served)):            # the server had none of the job's turns during its tool time
            assert served[k]["recv_ns"] - served[k - 1]["eof_ns"] >= plan[k][2] * 1_000_000
    assert s.facts is not None and s.facts.corpus_format == "mooncake" and s.facts.corpus_replayed == 3
    assert len(s.facts.corpus_sha256 or "") == 64 and s.facts.corpus_skipped is None


def test_a_second_pass_hits_nothing_the_first_left_and_without_the_salt_it_does(ref, tmp_path):
    dataset = corpus(tmp_path / "t.jsonl", TRAJECTORIES)
    result, row = run(ref.url, dataset, 6)
    records = [r for r in result.all_records() if r.phase == "measure"]
    by = jobs_of(records)
    order = sorted(by, key=lambda sid: int(sid.rsplit("-", 1)[1]))          # sessions 0..5: a b c a b c
    for n, sid in enumerate(order):
        plan = TRAJECTORIES[list(TRAJECTORIES)[n % 3]]
        assert [(r.prompt_tokens, r.cached_tokens) for r in by[sid]] == closed_form(plan, SALT_TOKENS), n
    second = [by[sid][0] for sid in order[3:]]
    assert [r.cached_tokens for r in second] == [0, 0, 0]        # the first turns of pass 2 hit nothing of pass 1
    assert row.summary.facts is not None and row.summary.facts.corpus_passes == 2
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=2, prefix_cache_blocks=8192, block_size=BLOCK)) as fresh:
        unsalted, _ = run(fresh.url, dataset, 6, no_salt=True)
    by = jobs_of([r for r in unsalted.all_records() if r.phase == "measure"])
    order = sorted(by, key=lambda sid: int(sid.rsplit("-", 1)[1]))
    again = [by[sid][0] for sid in order[3:]]
    assert all((r.cached_tokens or 0) == (r.prompt_tokens - 1) // BLOCK * BLOCK > 0 for r in again), \
        [(r.prompt_tokens, r.cached_tokens) for r in again]      # pass 1 left them: the salt is what kept them apart


def test_a_trajectory_longer_than_the_context_is_refused_or_skipped_and_stated(ref, tmp_path):
    long = {**TRAJECTORIES, "long": [(200, 50, 0), (120, 40, 10)]}          # turn 1: 4 + 200 + 50 + 120 + 40 > 400
    dataset = corpus(tmp_path / "t.jsonl", long)
    spec = StudySpec.model_validate({"target": {"base_url": ref.url}, "users": [2], "warmup_requests": 1,
                                     "workload": {"kind": "trajectories", "dataset_path": dataset}})
    with pytest.raises(UsageError) as refused:
        measure(spec)
    text = refused.value.one_line()
    assert "1 of 4 trajectories" in text and "long: needs 414 tokens" in text and "context is 400" in text
    assert "sha256" in text and "--unreplayable skip" in text
    result, row = run(ref.url, dataset, 3, unreplayable="skip")
    facts = row.summary.facts
    assert facts is not None and facts.corpus_trajectories == 4 and facts.corpus_replayed == 3
    assert facts.corpus_skipped is not None and list(facts.corpus_skipped) == ["long"]
    assert "context is 400" in facts.corpus_skipped["long"]
    assert any("skipped long" in note for note in result.notes)
    measured = [r for r in result.all_records() if r.phase == "measure"]
    assert len({r.session_id for r in measured}) == 3 and max(r.prompt_tokens or 0 for r in measured) < 300
