"""Trajectories: agent traces replayed as sessions (docs/workloads.md, "Trajectories"). A corpus (a published
format read by workload/trajectory_formats.py, or made by the seeded generator here) becomes, for one cell,
token ids per turn; then each session the load starts is one trajectory of one pass over the corpus:

    prompt of turn k = salt(pass) + system + salt(pass, trajectory) + new_0 + out_0 + ... + new_(k-1) + out_(k-1) + new_k

where out_j is the answer the history holds (the server's, or with fixed replies the recorded one) and every
answer has exactly the trajectory's output length. The salts (a few token ids, seeded by the cell and the
pass; MLCommons' enable_salt) keep a prefix cache from serving one pass what another left, while a trajectory
reuses its own history and a pass's trajectories share a system prompt.

A trajectory that cannot be replayed (longer than the server's context, or what its reader found) is never
dropped silently: the cell refuses the corpus naming each one, or with `unreplayable: skip` replays the rest
and states every skipped one with its cause. The theoretical prefix-cache hit of each turn is counted by a
`CacheOracle` as the prompts are made (completions: their token ids are known)."""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from tokenbench.errors import UsageError
from tokenbench.metrics.summary_groups import WorkloadFacts
from tokenbench.spec.bench import Workload
from tokenbench.workload.chat import Tokenizer
from tokenbench.workload.random_ids import cell_rng, random_ids
from tokenbench.workload.sessions import SessionPlan, session_tag, think_ns
from tokenbench.workload.trajectory_formats import Corpus, Step, Trajectory, read_corpus
from tokenbench.workload.vocab import Vocab

SALT_TOKENS = 4            # token ids of each salt: one differing id at the head already changes every block after it
SHOWN = 5                  # unreplayable trajectories named in a refusal
Ids = tuple[int, ...]


# ---- the generator: synthetic trajectories from stated distributions ----

def _turns(rng: random.Random, wl: Workload) -> int:
    mean = wl.turns or 1
    if wl.turns_dist == "uniform":
        return rng.randint(1, 2 * mean - 1)
    if wl.turns_dist == "geometric" and mean > 1:             # trials to the first success, p = 1 / mean
        return 1 + int(math.log(1.0 - rng.random()) / math.log(1.0 - 1.0 / mean))
    return mean


def _lengths(rng: random.Random, wl: Workload) -> tuple[int, int]:
    if wl.draws is None:
        return wl.input_len or 1, wl.output_len or 1
    from tokenbench.workload.lengths import Draws  # only a generator that draws its lengths
    return Draws.of(wl).draw(rng)


def generate(wl: Workload) -> Corpus:
    """`num_trajectories` trajectories, seeded by the workload's seed: turns from turns_dist, each turn's new
    input and output from the pair (or its length distribution), each tool delay from think_time_s and
    think_time_dist; a system prompt of system_prompt_len (shared by all with shared_system_prompt)."""
    out = []
    for i in range(wl.num_trajectories):
        rng = random.Random(f"{wl.seed}/trajectory/{i}")
        steps = []
        for k in range(_turns(rng, wl)):
            new, output = _lengths(rng, wl)
            steps.append(Step(new, output, None, think_ns(rng, wl) / 1e9 if k else 0.0))
        out.append(Trajectory(f"t{i}", tuple(steps), wl.system_prompt_len))
    shape = [[t.system, [[s.new, s.output, s.delay_s] for s in t.steps]] for t in out]
    digest = hashlib.sha256(json.dumps([wl.shared_system_prompt, shape]).encode()).hexdigest()
    return Corpus(tuple(out), "generated", digest)


def corpus_of(wl: Workload) -> Corpus:
    if wl.dataset_path is None:
        return generate(wl)
    return read_corpus(wl.dataset_path, wl.trajectory_format, wl.trace_block_size)


# ---- one cell: the corpus as token ids, what can be replayed, the sessions' plans ----

@dataclass(frozen=True)
class Resolved:
    """One trajectory as this cell sends it (before the salts)."""

    id: str
    system: Ids
    news: tuple[Ids, ...]
    outputs: tuple[int, ...]
    replies: tuple[Ids, ...]           # the recorded answers (fixed replies: the history's), one per turn but the last
    delays_ns: tuple[int, ...]         # before turns 1 .. T-1

    def longest(self, head: int) -> int:
        """Tokens the longest turn needs (prompt + output), `head` salt tokens included."""
        need, history = 0, head + len(self.system)
        for new, out in zip(self.news, self.outputs, strict=True):
            need = max(need, history + len(new) + out)
            history += len(new) + out
        return need


@dataclass
class _Content:
    """Token ids of a cell's trajectories: the tokenizer's for texts, seeded ids for counts and hash blocks."""

    wl: Workload
    key: str
    vocab: Vocab
    tok: Tokenizer
    block: int | None
    blocks: dict[int, Ids] = field(default_factory=dict)

    def ids(self, what: int | str | None, rng: random.Random, hashes: tuple[int, ...] = ()) -> Ids:
        if what is None:
            return ()
        if isinstance(what, str):
            return tuple(self.tok.encode(what)) if what else ()
        if hashes and self.block:
            return tuple(i for h in hashes for i in self._block(h))[:what]
        return random_ids(rng, what, self.vocab)

    def _block(self, h: int) -> Ids:
        if h not in self.blocks:
            self.blocks[h] = random_ids(cell_rng(self.wl.seed, self.key, f"block:{h}"), self.block or 1, self.vocab)
        return self.blocks[h]

    def system(self, t: Trajectory, i: int) -> Ids:
        shared = self.wl.shared_system_prompt or isinstance(t.system, str)   # equal texts are equal prompts
        return self.ids(t.system, cell_rng(self.wl.seed, self.key, "system" if shared else f"system:{i}"))

    def resolve(self, t: Trajectory, i: int) -> Resolved:
        rng = cell_rng(self.wl.seed, self.key, f"trajectory:{i}")
        news = tuple(self.ids(s.new, rng, s.hash_ids) for s in t.steps)
        recorded = [self.ids(s.reply, rng) if s.reply is not None else None for s in t.steps]
        outputs = tuple(s.output if s.output is not None else max(1, len(r or ())) for s, r in zip(t.steps, recorded,
                                                                                                   strict=True))
        replies = tuple(r if r is not None else random_ids(rng, out, self.vocab)
                        for r, out in zip(recorded[:-1], outputs, strict=False))
        delays = tuple(int(s.delay_s * 1e9) for s in t.steps[1:])
        return Resolved(t.id, self.system(t, i), news, outputs, replies, delays)


@dataclass(frozen=True)
class Skipped:
    id: str
    cause: str


def _mismatched_hashes(t: Trajectory, block: int | None) -> str:
    for k, s in enumerate(t.steps):
        if s.hash_ids and isinstance(s.new, int) and block and len(s.hash_ids) != -(-s.new // block):
            return (f"turn {k} has {len(s.hash_ids)} hash_ids for {s.new} tokens: blocks of {block} need "
                    f"{-(-s.new // block)} (--trace-block-size N gives the trace's block size)")
    return ""


def head_tokens(wl: Workload, has_system: bool) -> int:
    return 0 if wl.no_salt else SALT_TOKENS * (1 + has_system)


@dataclass
class Replay:
    """What a cell replays of its corpus: the trajectories that can be, and the skipped ones with their causes."""

    corpus: Corpus
    trajectories: list[Resolved]
    skipped: list[Skipped]

    @property
    def turns(self) -> int:
        return sum(len(t.news) for t in self.trajectories)

    def lengths(self, wl: Workload) -> list[tuple[int, int]]:
        """(prompt, output) tokens of every turn of one pass, the salts included."""
        out = []
        for t in self.trajectories:
            history = head_tokens(wl, bool(t.system)) + len(t.system)
            for new, output in zip(t.news, t.outputs, strict=True):
                out.append((history + len(new), output))
                history += len(new) + output
        return out

    def facts(self, wl: Workload, base: WorkloadFacts, sessions: int | None) -> WorkloadFacts:
        """The workload facts of the cell: the corpus (format, hash, what was replayed, skipped and split) and
        the lengths its turns ask (one pass)."""
        lengths = self.lengths(wl)
        ins, outs = [n for n, _ in lengths], [o for _, o in lengths]
        chains = {t.id: t.chain for t in self.corpus.trajectories if t.chain}
        told = {
            "workload": "trajectories", "corpus_format": self.corpus.format, "corpus_sha256": self.corpus.sha256,
            "corpus_trajectories": len(self.corpus.trajectories), "corpus_replayed": len(self.trajectories),
            "corpus_turns": self.turns, "corpus_skipped": {s.id: s.cause for s in self.skipped} or None,
            "corpus_chains": chains or None,
            "corpus_passes": sessions / len(self.trajectories) if sessions is not None else None,
            "input_len_mean": sum(ins) / len(ins), "input_len_min": min(ins), "input_len_max": max(ins),
            "output_len_mean": sum(outs) / len(outs), "output_len_min": min(outs), "output_len_max": max(outs)}
        return WorkloadFacts.model_validate({**base.model_dump(exclude_unset=True),
                                             **{k: v for k, v in told.items() if v is not None}})

    def notes(self) -> list[str]:
        """What the cell says of its corpus beside its figures: each skipped trajectory, with its cause."""
        head = f"corpus sha256 {self.corpus.sha256[:16]}: {len(self.skipped)} trajectories skipped (--unreplayable skip)"
        return [head, *(f"skipped {s.id}: {s.cause}" for s in self.skipped)] if self.skipped else []


def replay(wl: Workload, key: str, vocab: Vocab, tok: Tokenizer, max_model_len: int | None) -> Replay:
    """The corpus resolved for this cell; a trajectory that cannot be replayed refuses the cell (UsageError
    naming them, with the corpus' hash), or with `unreplayable: skip` is skipped and stated."""
    corpus = corpus_of(wl)
    content = _Content(wl, key, vocab, tok, corpus.block_size)
    kept, skipped = [], []
    for i, t in enumerate(corpus.trajectories):
        cause = t.problem or _mismatched_hashes(t, corpus.block_size)
        r = None if cause else content.resolve(t, i)
        need = r.longest(head_tokens(wl, bool(r.system))) if r is not None else 0
        if r is not None and max_model_len is not None and need > max_model_len:
            cause = f"needs {need:,} tokens in its longest turn (prompt + output), the server's context is {max_model_len:,}"
        if cause:
            skipped.append(Skipped(t.id, cause))
        elif r is not None:
            kept.append(r)
    out = Replay(corpus, kept, skipped)
    _refuse(wl, out)
    return out


def _refuse(wl: Workload, r: Replay) -> None:
    if not r.trajectories:
        raise UsageError(f"no trajectory of the corpus (sha256 {r.corpus.sha256[:16]}) can be replayed: "
                         + "; ".join(f"{s.id}: {s.cause}" for s in r.skipped[:SHOWN]),
                         "fix the corpus, or give the server a larger context")
    if r.skipped and wl.unreplayable == "refuse":
        more = f" (and {len(r.skipped) - SHOWN} more)" if len(r.skipped) > SHOWN else ""
        raise UsageError(f"{len(r.skipped)} of {len(r.corpus.trajectories)} trajectories of the corpus (sha256 "
                         f"{r.corpus.sha256[:16]}) cannot be replayed: "
                         + "; ".join(f"{s.id}: {s.cause}" for s in r.skipped[:SHOWN]) + more,
                         "give the server a larger context, or --unreplayable skip to replay the rest (each "
                         "skipped one is stated in the result)")


# ---- the sessions a cell starts ----

@dataclass(frozen=True)
class TrajectoryMaker:
    """Session n of the cell: trajectory n mod the corpus, in pass n // the corpus, with that pass's salts."""

    wl: Workload
    key: str
    vocab: Vocab
    r: Replay

    def salt(self, *what: object) -> Ids:
        if self.wl.no_salt:
            return ()
        return random_ids(cell_rng(self.wl.seed, self.key, "salt:" + ":".join(map(str, what)), self.wl.salt),
                          SALT_TOKENS, self.vocab)

    def plan(self, n: int) -> SessionPlan:
        size = len(self.r.trajectories)
        t, passed = self.r.trajectories[n % size], n // size
        tail = self.salt(passed, n % size) if t.system else ()
        system = (*self.salt(passed), *t.system, *tail)
        replies = t.replies if self.wl.assistant_turns == "fixed" else None
        return SessionPlan(f"{session_tag(self.wl, self.key)}-{n}", system or None, t.news, replies, t.delays_ns,
                           t.outputs)

    def plans(self, count: int | None) -> Iterator[SessionPlan]:
        n = 0
        while count is None or n < count:
            yield self.plan(n)
            n += 1


class CacheOracle:
    """What a prefix cache of `block` tokens with room for everything would hit: a prompt's leading full blocks
    that an earlier prompt (looked up before it) or an answered request (its prompt and answer but the last
    token) held, never the prompt's last token. Block keys chain, as vLLM's and the reference server's do."""

    def __init__(self, block: int) -> None:
        self.block, self.keys = block, set[int]()

    def _keys(self, ids: Ids, limit: int) -> list[int]:
        keys, parent, b = [], 0, self.block
        for i in range(min(limit, len(ids) // b)):
            parent = hash((parent, *ids[i * b:(i + 1) * b]))
            keys.append(parent)
        return keys

    def look(self, ids: Ids) -> int:
        """Tokens of `ids` found; its full blocks are then held (its prefill)."""
        keys = self._keys(ids, (len(ids) - 1) // self.block)
        hits = next((i for i, k in enumerate(keys) if k not in self.keys), len(keys))
        self.store(ids)
        return hits * self.block

    def store(self, ids: Ids) -> None:
        self.keys.update(self._keys(ids, len(ids)))
