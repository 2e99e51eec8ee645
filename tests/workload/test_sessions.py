"""Sessions, in process: the spec's rules, seeded session plans, what an answer returns, and the load
runner driving conversations on a fake clock (turn k+1 is made from turn k's answer and sent the think
time after it ended; users ramp up; a failed turn or the cell's end cuts a session)."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, field

import pytest
from pydantic import ValidationError

from tokenbench.cli import bench, flags
from tokenbench.client.records import RawExchange
from tokenbench.client.request import PreparedRequest, prepare
from tokenbench.client.returned import returned
from tokenbench.errors import SpecError, TargetError
from tokenbench.load import runner
from tokenbench.spec.bench import Load, Workload
from tokenbench.spec.study import StudySpec
from tokenbench.study.plan import Plan, PlannedCell, ServerConfig, check_context, kv_demand, plan
from tokenbench.workload.sessions import Context, Maker, conversations, think_ns
from tokenbench.workload.vocab import Vocab

S = 1_000_000_000
VOCAB = Vocab.with_margins(32000, "test")
TARGET = {"base_url": "http://127.0.0.1:1"}


def sessions(**kw) -> Workload:
    return Workload(**{"kind": "sessions", "turns": 3, "input_len": 4, "output_len": 2, **kw})


# ---- the spec --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw,msg", [
    ({"kind": "sessions", "input_len": 4, "output_len": 2}, "needs turns per session"),
    ({"kind": "sessions", "turns": 2, "input_len": 4}, "needs input_len and output_len"),
    ({"input_len": 4, "output_len": 2, "turns": 3}, "turns applies to sessions workloads only"),
    ({"input_len": 4, "output_len": 2, "think_time_s": 1}, "think_time_s applies to sessions"),
    ({"input_len": 4, "output_len": 2, "session_header": "X-User"}, "session_header applies to sessions"),
    ({"kind": "sessions", "turns": 2, "input_len": 4, "output_len": 2, "shared_system_prompt": True},
     "needs a system prompt"),
    ({"kind": "sessions", "turns": 2, "input_len": 4, "output_len": 2, "think_time_dist": "exponential"},
     "needs a mean think time"),
])
def test_a_sessions_workload_says_what_it_lacks(kw, msg):
    with pytest.raises(ValidationError, match=msg):
        Workload(**kw)


@pytest.mark.parametrize("kw", [{"range_ratio": 0.5}, {"input_len_stddev": 3.0}, {"output_len_stddev": 1.0},
                                {"min_input_len": 2, "max_input_len": 8}, {"max_output_len": 4}])
def test_a_sessions_turn_has_exact_lengths_nothing_draws_or_bounds_them(kw):
    msg = f"{next(iter(kw))} draws or bounds request lengths, but a sessions workload's turns have exact lengths"
    with pytest.raises(ValidationError, match=msg):
        sessions(**kw)


@pytest.mark.parametrize("kw,msg", [
    ({"users": 2, "session_rate": 1.0, "num_sessions": 2}, "give exactly one"),
    ({"users": 2, "concurrency": 2, "num_sessions": 2}, "give exactly one"),
    ({"users": 2, "num_prompts": 8}, "counts sessions"),
    ({"session_rate": 1.0, "num_sessions": 2, "ramp_up_s": 1}, "it needs users"),
    ({"concurrency": 2, "num_prompts": 4, "num_sessions": 2}, "apply to sessions loads"),
])
def test_a_sessions_load_is_users_or_a_session_rate(kw, msg):
    with pytest.raises(ValidationError, match=msg):
        Load(**kw)


def study(**kw) -> dict:
    return {"target": TARGET, "workload": {"kind": "sessions", "turns": 4}, "pairs": [[64, 16]], "users": [2], **kw}


@pytest.mark.parametrize("kw,msg", [
    ({"concurrency": [4]}, "load is in users"),
    ({"users": []}, "the users axis is empty"),
    ({"client": {"workers": 2}}, "one client process"),
    ({"requests": {"num_prompts": 8}}, "counts sessions"),
    ({"warmup_first_prompt": True}, "drop warmup_first_prompt"),
    ({"users": [], "session_rates": [1.0], "ramp_up_s": 2}, "needs users"),
    ({"find_capacity": True, "slo": {"ttft_ms": 500}}, "load is in users"),
])
def test_a_sessions_study_takes_users_or_session_rates(kw, msg):
    with pytest.raises(ValidationError, match=msg):
        StudySpec.model_validate(study(**kw))


def test_users_and_session_rates_belong_to_sessions():
    with pytest.raises(ValidationError, match="users applies to a sessions workload"):
        StudySpec.model_validate({"target": TARGET, "pairs": [[8, 2]], "concurrency": [1], "users": [2]})


def test_the_plan_has_a_cell_per_users_and_session_rate_with_its_sessions():
    spec = StudySpec.model_validate(study(users=[1, 4], session_rates=[0.5], ramp_up_s=2.0,
                                          workload={"kind": "sessions", "turns": 4, "system_prompt_len": 100,
                                                    "shared_system_prompt": True, "think_time_s": 1.5,
                                                    "think_time_dist": "exponential"}))
    cells = plan(spec).cells
    assert [c.key for c in cells] == [
        "sessions(4t,sys100-shared,think1.5s-exp):64:16/users=1,ramp=2s",
        "sessions(4t,sys100-shared,think1.5s-exp):64:16/users=4,ramp=2s",
        "sessions(4t,sys100-shared,think1.5s-exp):64:16/sessions=0.5/s"]
    assert [c.load.num_sessions for c in cells] == [1, 4, 16]          # one per user; `requests.min` for a rate
    last = 100 + 4 * 64 + 3 * 16                                        # the last turn's prompt
    assert cells[0].workload.last_turn_len == last
    assert kv_demand(cells[1]) == 4 * (last + 16) and kv_demand(cells[2]) is None


def test_the_last_turn_must_fit_the_context():
    spec = StudySpec.model_validate(study())
    p = Plan(spec, [ServerConfig("default", ())])
    check_context(p, 4 * 64 + 4 * 16, "here")
    with pytest.raises(SpecError, match="the last turn of sessions.* needs 320 tokens .* allows 319"):
        check_context(p, 319, "here")


# ---- plans ------------------------------------------------------------------------------------------

def maker(wl: Workload, key: str = "k") -> Maker:
    return Maker(wl, key, VOCAB, tok=_Words())


def test_plans_are_seeded_and_a_shared_system_prompt_is_the_same_for_every_user():
    shared = maker(sessions(system_prompt_len=5, shared_system_prompt=True))
    own = maker(sessions(system_prompt_len=5))
    assert shared.plan(3) == shared.plan(3) and shared.plan(3) != shared.plan(4)
    assert shared.plan(0).system == shared.plan(1).system and len(shared.plan(0).system or ()) == 5
    assert own.plan(0).system != own.plan(1).system
    p = own.plan(0)
    assert [len(u) for u in p.users] == [4, 4, 4] and p.replies is None and p.think_ns == (0, 0)
    fixed = maker(sessions(assistant_turns="fixed")).plan(0)
    assert [len(r) for r in fixed.replies or ()] == [2, 2]
    assert shared.plan(0).session_id != maker(sessions(system_prompt_len=5, shared_system_prompt=True), "k2").plan(0).session_id


@pytest.mark.parametrize("dist,check", [
    ("fixed", lambda xs: set(xs) == {2 * S}),
    ("uniform", lambda xs: min(xs) >= 0 and max(xs) <= 4 * S and abs(sum(xs) / len(xs) - 2 * S) < 0.1 * S),
    ("exponential", lambda xs: min(xs) >= 0 and abs(sum(xs) / len(xs) - 2 * S) < 0.15 * S and max(xs) > 6 * S),
])
def test_think_times_follow_their_distribution(dist, check):
    wl, rng = sessions(think_time_s=2.0, think_time_dist=dist), random.Random(7)
    assert check([think_ns(rng, wl) for _ in range(4000)])


# ---- what an answer returned -------------------------------------------------------------------------

def _sse(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def answer(ids: list[int] | None, t: int = 0, status: int = 200, prompt: int = 1) -> RawExchange:
    """A streamed answer of two tokens `wN` (with their ids unless `ids` is None) and its usage."""
    pieces = [{"text": f" w{i}", **({"token_ids": [i]} if ids is not None else {})} for i in (ids or [5, 6])]
    chunks = [(t, _sse({"choices": [{"index": 0, **p, "finish_reason": None}]})) for p in pieces]
    chunks += [(t, _sse({"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                         "usage": {"prompt_tokens": prompt, "completion_tokens": 2}})), (t, b"data: [DONE]\n\n")]
    failed = {"error_kind": "http_status", "error_detail": "HTTP 500"} if status != 200 else {}
    return RawExchange(intended_ns=t, sent_ns=t, end_ns=t, status=status, chunks=chunks, **failed)


def test_the_returned_ids_and_text_of_an_answer():
    got = returned(answer([11, 12]))
    assert got.ids == (11, 12) and got.text == " w11 w12" and got.ok
    assert returned(answer(None)).ids is None and returned(answer(None)).text == " w5 w6"
    assert not returned(answer([1, 2], status=500)).ok


# ---- the runner drives conversations -------------------------------------------------------------------

class _Words:
    """A tokenizer stub: one id per whitespace word `wN` (the reference server's rule)."""

    def encode(self, text: str) -> list[int]:
        return [int(w[1:]) for w in text.split()]

    def decode(self, ids: list[int]) -> str:
        return " ".join(f"w{i}" for i in ids)


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000 * S

    def now_ns(self) -> int:
        return self.t

    async def sleep_until(self, t_ns: int) -> None:
        self.t = max(self.t, t_ns)
        await asyncio.sleep(0)


@dataclass
class Server:
    """Answers on the fake clock after `service` ns with ids that name the request (turn, session number)."""

    clock: FakeClock
    service: int = S // 10
    fail: set[tuple[str, int]] = field(default_factory=set)     # (session id, turn) answered HTTP 500
    give_ids: bool = True
    seen: list[dict] = field(default_factory=list)

    async def send(self, req: PreparedRequest, intended: int) -> RawExchange:
        body, sid = json.loads(req.body), req.headers.get("X-Session-ID")
        sent = self.clock.now_ns()
        await self.clock.sleep_until(sent + self.service)
        out = [10_000 + 100 * int((sid or "-0").rsplit("-", 1)[1]) + (req.turn or 0), 20_000 + (req.turn or 0)]
        self.seen.append({"sid": sid, "turn": req.turn, "prompt": body["prompt"], "intended": intended,
                          "sent": sent, "end": self.clock.now_ns(), "out": out,
                          "ids_asked": body.get("return_token_ids")})
        status = 500 if (sid, req.turn) in self.fail else 200
        raw = answer(out if self.give_ids else None, self.clock.now_ns(), status, len(body["prompt"]))
        raw.sent_ns = sent
        return raw


def drive(wl: Workload, load: Load, server: Server, count: int | None):
    ctx = Context(wl=wl, make=lambda p: prepare("http://h:1", "completions", "m", p, None), tok=_Words())
    work = runner.Sessions(conversations(None, maker(wl), ctx, count), count)
    run = asyncio.run(runner.run_phase(server.send, work, runner.PhasePlan("measure", load), clock=server.clock))
    return run, ctx.feedback


def by_session(seen: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for s in seen:
        out.setdefault(s["sid"], []).append(s)
    return out


def test_each_turn_is_the_history_plus_the_answer_the_server_returned_and_waits_the_think_time():
    clock = FakeClock()
    t0, server = clock.t, Server(clock)
    wl = sessions(system_prompt_len=3, think_time_s=0.5)
    run, fb = drive(wl, Load(users=2, num_sessions=3, ramp_up_s=1.0), server, 3)
    assert len(run.records) == 9 and sorted(r.index for r in run.records) == list(range(9))
    assert {(r.session_id, r.turn) for r in run.records} == {(s["sid"], s["turn"]) for s in server.seen}
    assert all(r.ok and not r.length_error for r in run.records)
    for turns in by_session(server.seen).values():
        assert [t["turn"] for t in turns] == [0, 1, 2] and all(t["ids_asked"] for t in turns)
        for k, (a, b) in enumerate(zip(turns, turns[1:], strict=False)):
            assert b["prompt"][:len(a["prompt"]) + 2] == a["prompt"] + a["out"]      # history + its answer
            assert len(b["prompt"]) == 3 + 4 * (k + 2) + 2 * (k + 1)
            assert b["intended"] == a["end"] + S // 2 and b["sent"] >= b["intended"]  # the think time after it
    firsts = sorted(t["intended"] for t in server.seen if t["turn"] == 0)
    assert firsts[:2] == [t0, t0 + S // 2]                                   # 2 users ramped over 1 s
    ends = sorted(t["end"] for t in server.seen if t["turn"] == 2)
    assert firsts[2] >= ends[0]                                              # the 3rd session waits for a user
    assert (fb.started, fb.completed, fb.cut_short, fb.returned_ids) == (3, 3, 0, 6)


def test_sessions_start_on_their_own_schedule_in_the_open_loop():
    clock = FakeClock()
    t0, server = clock.t, Server(clock, service=3 * S)
    drive(sessions(), Load(session_rate=2.0, arrival="constant", num_sessions=3), server, 3)
    starts = sorted(t["intended"] for t in server.seen if t["turn"] == 0)
    assert starts == [t0, t0 + S // 2, t0 + S]                    # not waiting for the 3 s answers


def test_a_failed_turn_ends_its_session_and_the_others_go_on():
    clock = FakeClock()
    wl = sessions()
    sid = maker(wl).plan(1).session_id
    server = Server(clock, fail={(sid, 1)})
    run, fb = drive(wl, Load(users=2, num_sessions=2), server, 2)
    turns = {k: [t["turn"] for t in v] for k, v in by_session(server.seen).items()}
    assert turns[sid] == [0, 1] and sorted(len(v) for v in turns.values()) == [2, 3]
    assert (fb.completed, fb.cut_short) == (1, 1) and sum(not r.ok for r in run.records) == 1


def test_no_turn_is_sent_after_the_duration():
    """Turn 2 of the first session would be due at 1.6 s: cut; the user starts another session at 0.9 s,
    whose turn 1 (due at 1.7 s) is cut too."""
    clock = FakeClock()
    t0, server = clock.t, Server(clock)
    run, fb = drive(sessions(think_time_s=0.7), Load(users=1, duration_s=1.0), server, None)
    assert [t["turn"] for t in server.seen] == [0, 1, 0]
    assert max(t["intended"] for t in server.seen) < t0 + S
    assert fb.cut_short == fb.started == 2 and fb.completed == 0


def test_fixed_replies_make_the_prompts_independent_of_the_answers():
    clock = FakeClock()
    wl = sessions(assistant_turns="fixed")
    server = Server(clock)
    _, fb = drive(wl, Load(users=1, num_sessions=1), server, 1)
    plan0 = maker(wl).plan(0)
    turns = by_session(server.seen)[plan0.session_id]
    assert turns[1]["prompt"] == [*plan0.users[0], *(plan0.replies or ())[0], *plan0.users[1]]
    assert not any(t["ids_asked"] for t in turns) and fb.fixed == 2


def test_an_answer_without_ids_is_fed_back_re_tokenized():
    clock = FakeClock()
    server = Server(clock, give_ids=False)
    _, fb = drive(sessions(), Load(users=1, num_sessions=1), server, 1)
    a, b = server.seen[0], server.seen[1]
    assert b["prompt"][:len(a["prompt"]) + 2] == a["prompt"] + [5, 6]     # " w5 w6" through the tokenizer
    assert fb.retokenized == 2 and fb.returned_ids == 0


def test_a_sessions_load_takes_conversations_only():
    with pytest.raises(ValueError, match="sessions load"):
        asyncio.run(runner.run_phase(Server(FakeClock()).send, [], runner.PhasePlan("measure", Load(
            users=1, num_sessions=1))))


def test_a_planned_cell_knows_its_width_in_users():
    cell = PlannedCell(ServerConfig("d", ()), sessions(), Load(users=3, num_sessions=3), 0)
    assert cell.width == 3 and Load(users=3, num_sessions=3).warmup_count() == 3


def test_a_tokenizer_that_fails_ends_the_session_and_says_why():
    class Broken(_Words):
        def encode(self, text: str) -> list[int]:
            raise TargetError("http://h:1/tokenize is not available (HTTP 404)", "pass --tokenizer DIR")

    clock = FakeClock()
    server = Server(clock, give_ids=False)
    wl = sessions()
    ctx = Context(wl=wl, make=lambda p: prepare("http://h:1", "completions", "m", p, None), tok=Broken())
    run = asyncio.run(runner.run_phase(server.send, runner.Sessions(conversations(None, maker(wl), ctx, 2), 2),
                                       runner.PhasePlan("measure", Load(users=2, num_sessions=2)), clock=clock))
    assert len(run.records) == 2 and all(r.ok for r in run.records)          # what was measured is kept
    assert ctx.feedback.cut_short == 2 and "could not be re-tokenized" in ctx.feedback.problem


def test_the_bench_flags_make_a_sessions_study():
    args = ["--base-url", "http://127.0.0.1:1", "--dataset-name", "sessions", "--turns", "5", "--input-len", "64",
            "--output-len", "16", "--users", "1,8", "--system-prompt-len", "128", "--shared-system-prompt",
            "--think-time", "2", "--think-time-dist", "uniform", "--assistant-turns", "fixed", "--ramp-up-s", "4",
            "--num-sessions", "16", "--session-header", "X-User"]
    ctx = bench.command.make_context("bench", list(args))
    spec = flags.validate(flags.study_data(ctx.params, flags.SHARED))
    wl, [a, b] = spec.workloads()[0], plan(spec).cells
    assert (wl.turns, wl.system_prompt_len, wl.shared_system_prompt, wl.think_time_s, wl.think_time_dist,
            wl.assistant_turns, wl.session_header, wl.input_len, wl.output_len) == (
        5, 128, True, 2.0, "uniform", "fixed", "X-User", 64, 16)
    assert (a.load.users, b.load.users, b.load.num_sessions, b.load.ramp_up_s) == (1, 8, 16, 4.0)
