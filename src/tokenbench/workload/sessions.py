"""Sessions: users each holding a conversation of T turns. Turn k's prompt is the whole history (the system
prompt, the earlier user turns and the assistant's answers) plus `input_len` new user tokens, so every turn's
prompt length is known exactly and verified against the server's count like any request's.

Completions send token ids: the history is the ids sent and the ids the server returned (asked with
`return_token_ids`; a server that sends none has its text re-tokenized through the tokenizer, and the
cell says how many turns were), or, with `assistant_turns: fixed`, seeded ids of `output_len` (every engine
then gets the same prompts, whatever it generated). Chat sends the history as messages: exact texts for the
system and user turns, the answer's text (or a fixed exact text) for the assistant's; the expected prompt
tokens are the content's plus the chat template's, measured once per turn index with a 1-token request.

Pure and seeded apart from the tokenizer: session n of a cell has the same content in every run of a seed
(a run's salt, when it has one, makes its content and think times its own; each session still re-sends its own
history, turn after turn). The
load runner drives the conversations (load/runner.py): `first()` is turn 0, `after(answer)` the next turn
and the user's think time before it, or None when the session is over.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from tokenbench.client.records import RawExchange
from tokenbench.client.request import Message, PreparedRequest, Prompt, SessionTurn
from tokenbench.client.returned import Returned, returned
from tokenbench.errors import TokenbenchError, UsageError
from tokenbench.spec.bench import Workload
from tokenbench.workload.build import Target
from tokenbench.workload.chat import Tokenizer, exact_text, probe_messages
from tokenbench.workload.random_ids import cell_rng, random_ids
from tokenbench.workload.vocab import Vocab

if TYPE_CHECKING:                    # a trajectories cell's theoretical hits (workload/trajectories.py)
    from tokenbench.workload.trajectories import CacheOracle

Content = tuple[int, ...] | str      # a turn's token ids (completions) or its text of known token count (chat)
Make = Callable[[Prompt], PreparedRequest]
CHAT_SESSIONS_MAX = 256              # chat sessions prepared for a duration cell (their texts are tokenized first)


@dataclass(frozen=True)
class NextTurn:
    request: PreparedRequest
    think_ns: int                    # sent this long after the previous answer ended (the user's think time)


@dataclass(frozen=True)
class SessionPlan:
    """One session's content, all of it known before it starts but the answers it feeds back."""

    session_id: str
    system: Content | None
    users: tuple[Content, ...]              # one per turn
    replies: tuple[Content, ...] | None     # fixed assistant turns (one per turn but the last), else None
    think_ns: tuple[int, ...]               # before turns 1 .. T-1 (trajectories: the tool delays)
    outputs: tuple[int, ...] = ()           # each turn's exact output tokens (trajectories); () : output_len each


@dataclass(kw_only=True)
class Feedback:
    """How a cell's sessions went and what their histories were made of (stated in its summary)."""

    started: int = 0
    completed: int = 0                # every turn answered
    cut_short: int = 0                # ended by a failed turn (or the cell's end) before its last turn
    returned_ids: int = 0             # assistant turns fed back as the ids the server returned
    retokenized: int = 0              # ... as the returned text, re-tokenized (no ids sent, or chat)
    fixed: int = 0                    # ... as fixed seeded content
    problem: str = ""                 # why a session could not go on (the first time): its answer's tokens


def think_ns(rng: random.Random, wl: Workload) -> int:
    """One think time: fixed, exponential with the mean, or uniform on [0, 2 x mean]."""
    mean = wl.think_time_s
    if wl.think_time_dist == "exponential" and mean:
        return int(rng.expovariate(1 / mean) * 1e9)
    if wl.think_time_dist == "uniform":
        return int(rng.uniform(0, 2 * mean) * 1e9)
    return int(mean * 1e9)


def session_tag(wl: Workload, key: str) -> str:
    """A cell's session ids start with this (distinct per cell and seed): `{tag}-{n}`."""
    salted = f"{wl.seed}/{key}" if wl.salt is None else f"{wl.seed}/{wl.salt}/{key}"
    return f"{zlib.crc32(salted.encode()):08x}"


@dataclass(frozen=True)
class Maker:
    """Makes a cell's session plans: ids for completions, exact texts (by the tokenizer) for chat."""

    wl: Workload
    key: str
    vocab: Vocab
    tok: Tokenizer

    def content(self, rng: random.Random, n: int) -> Content:
        if self.wl.api == "chat":
            return exact_text(self.tok, rng, n, self.vocab)
        return random_ids(rng, n, self.vocab)

    def system(self, rng: random.Random) -> Content | None:
        n = self.wl.system_prompt_len
        if not n:
            return None
        shared = cell_rng(self.wl.seed, self.key, "system", self.wl.salt)
        return self.content(shared if self.wl.shared_system_prompt else rng, n)

    def plan(self, n: int) -> SessionPlan:
        wl, rng = self.wl, cell_rng(self.wl.seed, self.key, f"session:{n}", self.wl.salt)
        turns, ilen, olen = wl.turns or 1, wl.input_len or 1, wl.output_len or 1
        system = self.system(rng)
        users = tuple(self.content(rng, ilen) for _ in range(turns))
        replies = tuple(self.content(rng, olen) for _ in range(turns - 1)) if wl.assistant_turns == "fixed" else None
        gaps = tuple(think_ns(rng, wl) for _ in range(turns - 1))
        return SessionPlan(f"{session_tag(wl, self.key)}-{n}", system, users, replies, gaps)


@dataclass(kw_only=True)
class Context:
    """What every conversation of a cell shares: the workload, how a prompt becomes a request, the tokenizer
    (re-tokenized answers), the chat template's tokens per turn index, and the cell's counts."""

    wl: Workload
    make: Make
    tok: Tokenizer
    overheads: list[int] = field(default_factory=list)     # chat: template tokens of turn k's prompt
    feedback: Feedback = field(default_factory=Feedback)
    oracle: CacheOracle | None = None     # trajectories: the theoretical hit of each turn (completions)
    theory: dict[tuple[str, int], int] = field(default_factory=dict)   # (session id, turn) -> theoretical hit
    planned: dict[str, tuple[int, ...]] = field(default_factory=dict)  # session id -> its think (tool) times, ns,
                                                                       # one per turn (0 before the first)

    @property
    def chat(self) -> bool:
        return self.wl.api == "chat"


class Conversation:
    """One session as the load runner drives it: turn 0, then each next turn once the answer is in."""

    def __init__(self, plan: SessionPlan, ctx: Context) -> None:
        self.plan, self.ctx, self.turn = plan, ctx, 0
        wl = ctx.wl
        self.ids: list[int] = list(plan.system) if isinstance(plan.system, tuple) else []
        self.messages: list[Message] = [("system", plan.system)] if isinstance(plan.system, str) else []
        self.content = wl.system_prompt_len or 0           # content tokens of the history (chat)

    def session(self, k: int) -> SessionTurn:
        """Turn k's session facts: the id and its header; completions with returned answers ask for their ids."""
        wl = self.ctx.wl
        return SessionTurn(self.plan.session_id, k, wl.session_header,
                           not self.ctx.chat and wl.assistant_turns == "returned")

    def first(self) -> PreparedRequest:
        self.ctx.feedback.started += 1
        self.ctx.planned[self.plan.session_id] = (0, *self.plan.think_ns[:len(self.plan.users) - 1])
        return self._request(0)

    def output(self, k: int) -> int:
        """Turn k's exact output tokens: the trajectory's, else the workload's output_len."""
        return self.plan.outputs[k] if self.plan.outputs else self.ctx.wl.output_len or 1

    def _request(self, k: int) -> PreparedRequest:
        user, out = self.plan.users[k], self.output(k)
        if isinstance(user, tuple):
            ids = (*self.ids, *user)
            if self.ctx.oracle is not None:
                self.ctx.theory[(self.plan.session_id, k)] = self.ctx.oracle.look(ids)
            return self.ctx.make(Prompt(token_ids=ids, text=None, input_len=len(ids), output_len=out,
                                        expected_prompt_tokens=len(ids), session=self.session(k)))
        n = self.content + (self.ctx.wl.input_len or 0)
        return self.ctx.make(Prompt(token_ids=None, text=user, input_len=n, output_len=out,
                                    expected_prompt_tokens=n + self.ctx.overheads[k], messages=tuple(self.messages),
                                    session=self.session(k)))

    async def after(self, raw: RawExchange) -> NextTurn | None:
        """The next turn (its history now holds this answer) and the think time before it; None at the end."""
        k, fb = self.turn, self.ctx.feedback
        answer = returned(raw)
        if self.ctx.oracle is not None and answer.ok and answer.ids is not None:
            user = self.plan.users[k]
            if isinstance(user, tuple):            # what the server keeps: prompt + answer but its last token
                self.ctx.oracle.store((*self.ids, *user, *answer.ids[:-1]))
        if k + 1 >= len(self.plan.users) or not answer.ok:
            fb.completed += answer.ok
            fb.cut_short += not answer.ok
            return None
        try:
            reply, count = await self._reply(answer, k)
        except TokenbenchError as exc:          # the tokenizer failed: the session cannot go on
            fb.cut_short += 1
            fb.problem = fb.problem or (f"a session ended: its answer could not be re-tokenized ({exc.one_line()}); "
                                        "use --assistant-turns fixed, or --tokenizer DIR")
            return None
        self._remember(self.plan.users[k], reply, count)
        self.turn = k + 1
        return NextTurn(self._request(k + 1), self.plan.think_ns[k])

    def cut(self) -> None:
        """The cell ended (its duration, or a stop) before this session's last turn."""
        self.ctx.feedback.cut_short += 1

    async def _reply(self, answer: Returned, k: int) -> tuple[Content, int]:
        """The assistant turn the history takes, and its content tokens."""
        fb, fixed = self.ctx.feedback, self.plan.replies
        if fixed is not None:
            fb.fixed += 1
            return fixed[k], len(fixed[k]) if isinstance(fixed[k], tuple) else self.ctx.wl.output_len or 0
        if not self.ctx.chat and answer.ids is not None:
            fb.returned_ids += 1
            return answer.ids, len(answer.ids)
        fb.retokenized += 1
        ids = tuple(await asyncio.to_thread(self.ctx.tok.encode, answer.text)) if answer.text else ()
        return (answer.text, len(ids)) if self.ctx.chat else (ids, len(ids))

    def _remember(self, user: Content, reply: Content, count: int) -> None:
        if isinstance(user, tuple) and isinstance(reply, tuple):
            self.ids += [*user, *reply]
            return
        self.messages += [("user", str(user)), ("assistant", str(reply))]
        self.content += (self.ctx.wl.input_len or 0) + count


def _messages(plan: SessionPlan, k: int, filler: list[Content]) -> list[dict]:
    """Turn k's messages of `plan`, with `filler` for the assistant turns."""
    msgs = [{"role": "system", "content": plan.system}] if plan.system else []
    for j in range(k):
        msgs += [{"role": "user", "content": plan.users[j]}, {"role": "assistant", "content": filler[j]}]
    return [*msgs, {"role": "user", "content": plan.users[k]}]


def template_overheads(t: Target, plan: SessionPlan, maker: Maker) -> list[int]:
    """Chat: the tokens the server's template adds to turn k's prompt, for every k (1-token requests with
    the plan's texts and exact fillers of output_len for the answers): prompt tokens minus content tokens."""
    wl = maker.wl
    salted = str(wl.seed) if wl.salt is None else f"{wl.seed}/{wl.salt}"
    filler = list(plan.replies or [maker.content(random.Random(f"{salted}/filler/{k}"), wl.output_len or 1)
                                   for k in range(len(plan.users) - 1)])
    out = []
    for k in range(len(plan.users)):
        usage = probe_messages(t.base_url, t.model, _messages(plan, k, filler), t.api_key)
        content = (wl.system_prompt_len or 0) + (k + 1) * (wl.input_len or 0) + k * (wl.output_len or 0)
        out.append(usage["prompt_tokens"] - content)
    return out


def conversations(t: Target | None, maker: Maker, ctx: Context, count: int | None) -> Iterator[Conversation]:
    """The cell's sessions in order (`count` None: as many as the duration takes). Completions make each
    when a user takes it; chat sessions (their texts tokenized through `t`'s tokenizer) are made first, at
    most CHAT_SESSIONS_MAX without a count, and the template's tokens per turn measured on a session of
    their shape whose content none of them shares (so the probes leave nothing in a prefix cache that a
    measured turn could hit)."""
    if not ctx.chat:
        numbers = range(count) if count is not None else itertools.count()
        return (Conversation(maker.plan(n), ctx) for n in numbers)
    if t is None:
        raise UsageError("chat sessions measure the chat template on the server", "give the server (its target)")
    plans = [maker.plan(n) for n in range(count if count is not None else CHAT_SESSIONS_MAX)]
    probe = replace(maker, key=f"{maker.key}/probe").plan(0)      # content no measured session shares
    ctx.overheads = template_overheads(t, probe, maker)
    return iter([Conversation(plan, ctx) for plan in plans])
