"""Trajectories, in process: each published format read into the corpus with its fields mapped (the example
files, each in its format's schema), the seeded generator, the theoretical-hit oracle against the reference
server's own prefix cache, a cell's replay (salts per pass, unreplayable trajectories refused or skipped), the
measured window on a fake clock, and the job figures' exact split."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.workload.test_sessions import VOCAB, FakeClock, Server, _Words
from tokenbench.client.records import RequestRecord
from tokenbench.client.request import prepare
from tokenbench.errors import UsageError
from tokenbench.load import runner
from tokenbench.metrics.summary import job_figures
from tokenbench.metrics.tally import JobTally
from tokenbench.spec.bench import Load, Workload
from tokenbench.spec.study import StudySpec
from tokenbench.testing.prefix_cache import PrefixCache
from tokenbench.workload.sessions import Context, Conversation
from tokenbench.workload.trajectories import (
    SALT_TOKENS,
    CacheOracle,
    Replay,
    Resolved,
    TrajectoryMaker,
    corpus_of,
    replay,
)
from tokenbench.workload.trajectory_formats import read_corpus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "trajectories"
S = 1_000_000_000


def generated(**kw) -> Workload:
    return Workload(**{"kind": "trajectories", "turns": 3, "input_len": 20, "output_len": 2, **kw})


# ---- the formats, as published ----

def test_mlcommons_rows_become_steps_client_rows_then_the_assistant_answer():
    c = read_corpus(str(EXAMPLES / "mlcommons-agentic.jsonl"))
    assert c.format == "mlcommons" and [t.id for t in c.trajectories] == ["fix-login", "rename-flag"]
    t = c.trajectories[0]
    assert isinstance(t.system, str) and t.system.startswith("You are a coding agent")
    assert [s.delay_s for s in t.steps] == [0.0, 0.4, 0.2]             # a client row's delay_seconds, not turn 0's
    assert isinstance(t.steps[1].new, str) and "src/auth/form.py:12" in t.steps[1].new     # the tool's result
    assert t.steps[0].output is None and '"name": "bash"' in (t.steps[0].reply or "")     # counted from the call
    second = c.trajectories[1]
    assert "First list where" in (second.steps[0].reply or "")                           # reasoning is output too
    assert [s.new for s in second.steps][2] == "Yes, both." and not second.problem


def test_mooncake_sessions_keep_new_lengths_delays_in_ms_and_hash_ids():
    c = read_corpus(str(EXAMPLES / "aiperf-mooncake-sessions.jsonl"), block_size=32)
    assert c.format == "mooncake" and c.block_size == 32
    a, b, cc = c.trajectories
    assert [(s.new, s.output, s.delay_s, s.hash_ids) for s in a.steps] == [
        (96, 24, 0.0, (1, 2, 3)), (40, 16, 0.3, (4, 5)), (64, 32, 0.15, (6, 7))]
    assert b.steps[0].hash_ids[:2] == a.steps[0].hash_ids[:2]        # shared blocks across sessions
    assert cc.steps[1].new == "the test run printed 3 failures in test_auth.py"


def test_weka_traces_give_new_input_as_the_prompt_less_the_history_and_split_chains(tmp_path):
    c = read_corpus(str(EXAMPLES / "weka-agentx.json"))
    assert c.format == "weka" and c.block_size == 64
    main, side, sub = c.trajectories
    assert [(s.new, s.output) for s in main.steps] == [(640, 20), (40, 35), (65, 50)]   # 700 - 660, 800 - 735
    assert [round(s.delay_s, 6) for s in main.steps] == [0.0, 0.6, 0.5]   # idle gap 2.1 - 1.5; think_time 0.5
    assert (side.id, [(s.new, s.output) for s in side.steps]) == ("trace-0001#2", [(128, 8)])
    assert sub.id == "trace-0001/agent_001" and "replayed apart" in sub.chain and len(sub.steps) == 2
    one_line = tmp_path / "traces.jsonl"                  # the same trace as one JSON line of a JSONL file
    one_line.write_text(json.dumps(json.loads((EXAMPLES / "weka-agentx.json").read_text())) + "\n")
    assert read_corpus(str(one_line)).trajectories == c.trajectories


def test_a_record_of_no_known_format_is_refused_with_the_fix(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"prompt": "hi"}\n')
    with pytest.raises(UsageError, match="not a trajectory record of a known format"):
        read_corpus(str(f))


def test_the_corpus_hash_names_the_bytes_read(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text((EXAMPLES / "aiperf-mooncake-sessions.jsonl").read_text())
    first = read_corpus(str(f), block_size=32).sha256
    f.write_text(f.read_text().replace('"delay": 300', '"delay": 301'))
    assert read_corpus(str(f), block_size=32).sha256 != first


# ---- the generator ----

def test_the_generator_is_seeded_and_draws_what_it_is_told():
    wl = generated(num_trajectories=200, turns=4, turns_dist="geometric", think_time_s=2.0,
                   think_time_dist="exponential", input_len_stddev=5.0)
    a, b = corpus_of(wl), corpus_of(wl)
    assert a == b and corpus_of(wl.model_copy(update={"seed": 1})).sha256 != a.sha256
    turns = [len(t.steps) for t in a.trajectories]
    assert min(turns) == 1 and 3.2 < sum(turns) / len(turns) < 4.8          # geometric, mean 4
    news = [s.new for t in a.trajectories for s in t.steps]
    assert all(isinstance(n, int) for n in news) and len(set(news)) > 5    # drawn around 20
    delays = [s.delay_s for t in a.trajectories for s in t.steps[1:]]
    assert all(t.steps[0].delay_s == 0 for t in a.trajectories) and 1.6 < sum(delays) / len(delays) < 2.4
    fixed = corpus_of(generated(num_trajectories=3))
    assert [[(s.new, s.output) for s in t.steps] for t in fixed.trajectories] == [[(20, 2)] * 3] * 3


@pytest.mark.parametrize("kw,msg", [
    ({"kind": "trajectories", "input_len": 4, "output_len": 2}, "give turns per trajectory"),
    ({"kind": "trajectories", "turns": 2}, "generated trajectories need input_len and output_len"),
    ({"kind": "trajectories", "dataset_path": "t.jsonl", "input_len": 4}, "do not apply to a trajectories dataset"),
    ({"kind": "trajectories", "dataset_path": "t.jsonl", "turns": 4}, "turns shapes generated trajectories"),
    ({"kind": "trajectories", "dataset_path": "t.jsonl", "max_input_len": 4}, "max_input_len shapes generated"),
    ({"kind": "trajectories", "turns": 2, "input_len": 4, "output_len": 2, "trajectory_format": "weka"},
     "give the dataset"),
    ({"kind": "trajectories", "turns": 2, "input_len": 4, "output_len": 2, "api": "chat"}, "completions API"),
    ({"input_len": 4, "output_len": 2, "num_trajectories": 3}, "num_trajectories applies to sessions workloads"),
    ({"kind": "sessions", "turns": 2, "input_len": 4, "output_len": 2, "no_salt": True},
     "no_salt applies to trajectories workloads"),
])
def test_a_trajectories_workload_says_what_it_lacks(kw, msg):
    with pytest.raises(ValidationError, match=msg):
        Workload(**kw)


def test_a_trajectories_study_is_a_sessions_study_and_its_key_says_what_is_sent():
    spec = StudySpec.model_validate({"target": {"base_url": "http://h:1"}, "users": [2, 4], "window": "all",
                                     "workload": {"kind": "trajectories", "dataset_path": "a/t.jsonl",
                                                  "unreplayable": "skip", "no_salt": True}})
    [wl] = spec.workloads()
    assert wl.label == "trajectories(t.jsonl,nosalt,skip)"
    with pytest.raises(ValidationError, match="load is in users"):
        StudySpec.model_validate({"target": {"base_url": "http://h:1"}, "concurrency": [2],
                                  "workload": {"kind": "trajectories", "dataset_path": "t.jsonl"}})


# ---- one cell's replay ----

def test_the_oracle_hits_what_the_reference_servers_cache_hits():
    rng, block = random.Random(7), 16
    oracle, cache = CacheOracle(block), PrefixCache(1 << 30, block)
    history: list[int] = []
    for _ in range(60):
        if rng.random() < 0.3:
            history = [rng.randrange(5, 40) for _ in range(rng.randrange(1, 40))]       # a new conversation
        prompt = [*history, *(rng.randrange(5, 40) for _ in range(rng.randrange(1, 50)))]
        found = cache.lookup(prompt)
        cache.store(prompt)
        assert oracle.look(tuple(prompt)) == found
        answer = [rng.randrange(5, 40) for _ in range(rng.randrange(1, 20))]
        cache.store([*prompt, *answer[:-1]])
        oracle.store((*prompt, *answer[:-1]))
        history = [*prompt, *answer]


def _resolved(turns: list[int], tid: str = "t") -> Resolved:
    return Resolved(tid, (), tuple((7,) * 10 for _ in turns), (2,) * len(turns), tuple((9, 9) for _ in turns[1:]),
                    tuple(d * S // 10 for d in turns[1:]))


def test_a_pass_over_the_corpus_has_its_own_salt_and_a_trajectory_its_own_after_the_system_prompt():
    wl = generated(num_trajectories=2, system_prompt_len=5)
    r = replay(wl, "k", VOCAB, _Words(), None)
    m = TrajectoryMaker(wl, "k", VOCAB, r)
    p0, p1, p2 = m.plan(0), m.plan(1), m.plan(2)          # trajectory 0 pass 0, trajectory 1 pass 0, 0 again pass 1
    head = SALT_TOKENS
    assert p0.system is not None and p1.system is not None and p2.system is not None
    assert len(p0.system) == 5 + 2 * head and p0.system[:head] == p1.system[:head] != p2.system[:head]
    assert p0.system[head:head + 5] != p2.system[head:head + 5] or p0.system[:head] != p2.system[:head]
    assert p0.users == p2.users and p0.outputs == p2.outputs == (2, 2, 2)    # the same trajectory, salted apart
    plain = TrajectoryMaker(wl.model_copy(update={"no_salt": True}), "k", VOCAB, r)
    assert plain.plan(0).system == plain.plan(2).system and len(plain.plan(0).system or ()) == 5


def test_an_unreplayable_trajectory_refuses_the_cell_or_is_skipped_and_stated(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text('{"session_id": "ok", "input_length": 10, "output_length": 5}\n'
                 '{"session_id": "long", "input_length": 90, "output_length": 20}\n'
                 '{"session_id": "bad", "input_length": 10}\n')
    wl = Workload(kind="trajectories", dataset_path=str(f))
    with pytest.raises(UsageError) as refused:
        replay(wl, "k", VOCAB, _Words(), 100)
    text = refused.value.one_line()
    assert "2 of 3 trajectories" in text and "long: needs 114 tokens" in text and "bad: a turn" in text
    r = replay(wl.model_copy(update={"unreplayable": "skip"}), "k", VOCAB, _Words(), 100)
    assert [t.id for t in r.trajectories] == ["ok"] and [s.id for s in r.skipped] == ["long", "bad"]
    assert r.notes()[0].startswith(f"corpus sha256 {r.corpus.sha256[:16]}: 2 trajectories skipped")


# ---- the measured window, on a fake clock ----

def _run(trajectories: list[Resolved], window: str) -> tuple[runner.CellRun, runner.Cutoff, Server]:
    clock = FakeClock()
    server = Server(clock)
    wl = generated()
    r = Replay(corpus_of(wl), trajectories, [])
    ctx = Context(wl=wl, make=lambda p: prepare("http://h:1", "completions", "m", p, None), tok=_Words())
    maker = TrajectoryMaker(wl, "k", VOCAB, r)
    cutoff = runner.Cutoff(window)          # type: ignore[arg-type]
    work = runner.Sessions((Conversation(p, ctx) for p in maker.plans(len(trajectories))), len(trajectories), cutoff)
    run = asyncio.run(runner.run_phase(server.send, work, runner.PhasePlan("measure", Load(users=2)), clock=clock))
    return run, cutoff, server


def _ends(server: Server) -> tuple[int, list[int]]:
    """When the last session started, and when each session ended (its last turn's answer)."""
    by: dict[str, list[dict]] = {}
    for t in server.seen:
        by.setdefault(t["sid"], []).append(t)
    return max(v[0]["sent"] for v in by.values()), sorted(max(t["end"] for t in v) for v in by.values())


def test_the_window_ends_when_the_first_user_finds_no_trajectory_left():
    """Once every trajectory has started, the first one to end ends the window; a turn sent after it is stored
    but not measured (first-user), or not sent at all (first-user-stop: its session is cut)."""
    trajectories = [_resolved([0]), _resolved([0, 0, 0]), _resolved([0]), _resolved([0, 0, 0, 0, 0])]
    run, cutoff, server = _run(trajectories, "first-user")
    last_start, ends = _ends(server)
    assert cutoff.end_ns == min(e for e in ends if e > last_start) and len(run.records) == 10
    outside = [r for r in run.records if not cutoff.measured(r)]
    assert outside and all(r.sent_ns > (cutoff.end_ns or 0) for r in outside)
    assert all(cutoff.measured(r) for r in run.records if r.sent_ns <= (cutoff.end_ns or 0))
    stopped, cut, _ = _run(trajectories, "first-user-stop")
    assert cut.end_ns == cutoff.end_ns and len(stopped.records) == 10 - len(outside)
    assert all(r.sent_ns <= (cut.end_ns or 0) for r in stopped.records)
    everything, kept, _ = _run(trajectories, "all")
    assert kept.end_ns == cutoff.end_ns and all(kept.measured(r) for r in everything.records)


# ---- the job figures ----

def _record(sid: str, turn: int, sent: int, last: int, ok: bool = True) -> RequestRecord:
    return RequestRecord(index=turn, phase="measure", input_len=1, output_len=3, expected_prompt_tokens=1,
                         intended_ns=sent, sent_ns=sent, end_ns=last + 1000, token_times_ns=[sent + 10, last],
                         token_counts=[1, 2], completion_tokens=3, session_id=sid, turn=turn,
                         **({} if ok else {"error_kind": "http_status"}))


def test_a_job_splits_exactly_into_its_server_tool_and_client_time_and_only_whole_jobs_count():
    jobs = JobTally()
    for r in (_record("x-0", 0, 0, 50 * 10**6), _record("x-0", 1, 150 * 10**6, 180 * 10**6),
              _record("x-1", 0, 0, 40 * 10**6), _record("x-1", 1, 60 * 10**6, 90 * 10**6, ok=False),
              _record("x-2", 0, 0, 20 * 10**6)):
        jobs.add(r)
    planned = {"x-0": (0, 90 * 10**6), "x-1": (0, 10**7), "x-2": (0, 10**7), "x-3": (0,)}
    f = job_figures(jobs, planned)
    assert (f.started, f.complete, f.incomplete, f.ids) == (4, 1, 3, ["x-0"])   # a failed turn, cut, never sent
    assert (f.each_completion_ms, f.each_server_ms, f.each_tool_ms) == ([180.0], [80.0], [90.0])
    assert f.server_share == pytest.approx(80 / 180) and f.tool_share == pytest.approx(90 / 180)
    assert f.client_share == pytest.approx(10 / 180) and f.each_turns == [2] and f.turns_max == 2
    assert f.completion_ms is not None and f.completion_ms["p95"].value == 180.0
    assert f.each("job") == [180.0] and f.each("job_ttft") == [pytest.approx(1e-5)]    # 10 ns
