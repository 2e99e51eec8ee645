"""A run's salt (spec/study.StudySpec.prompt_salt) in the prompts' random content: fresh content in every run,
the same exact lengths, the same drawn lengths, a shared prefix still shared within the run, a session's own
history still re-sent; without a salt, the prompts are exactly those of before (the same seeded stream)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tokenbench.spec.bench import Workload
from tokenbench.workload.build import build_cell
from tokenbench.workload.random_ids import random_ids
from tokenbench.workload.sessions import Maker, session_tag
from tokenbench.workload.trace_replay import BlockIds
from tokenbench.workload.vocab import Vocab

VOCAB = Vocab.with_margins(32000, "test")
KEY = "64:8/c=2"


@dataclass(frozen=True)
class Target:
    """A server that takes token ids (nothing is asked of it for completions prompts of random ids)."""

    base_url: str = "http://127.0.0.1:9"
    model: str = "m"
    api_key: str | None = None
    vocab: Vocab = field(default_factory=lambda: VOCAB)
    max_model_len: int | None = None
    token_ids: bool = True


def ids(wl: Workload, n: int = 12) -> list[tuple[int, ...]]:
    cell = build_cell(Target(), wl, KEY, 2, n)
    return [p.token_ids for p in [*cell.warmup, *cell.measure] if p.token_ids is not None]


def lengths(wl: Workload, n: int = 12) -> list[tuple[int, int]]:
    cell = build_cell(Target(), wl, KEY, 2, n)
    return [(p.input_len, p.output_len) for p in [*cell.warmup, *cell.measure]]


def random_wl(salt: str | None, **more) -> Workload:
    return Workload(kind="random", input_len=64, output_len=8, seed=3, salt=salt, **more)


def test_without_a_salt_the_prompts_are_the_seeded_stream_as_before():
    rng = random.Random(f"3/{KEY}/measure")
    expected = [random_ids(rng, 64, VOCAB) for _ in range(12)]
    assert ids(random_wl(None))[2:] == expected


def test_a_salt_changes_every_prompt_and_keeps_every_length():
    plain, a, a_again, b = (ids(random_wl(s)) for s in (None, "a1", "a1", "b2"))
    assert a == a_again                                          # a resume sends the same prompts
    for one, other in ((plain, a), (a, b)):
        assert all(len(x) == len(y) == 64 for x, y in zip(one, other, strict=True))
        assert not {x[:16] for x in one} & {y[:16] for y in other}   # not even a first block in common


def test_drawn_lengths_are_the_seeds_whatever_the_salt():
    drawn = {"range_ratio": 0.5}
    assert lengths(random_wl("a1", **drawn)) == lengths(random_wl("b2", **drawn)) == lengths(random_wl(None, **drawn))
    assert len(set(lengths(random_wl("a1", **drawn)))) > 1
    assert ids(random_wl("a1", **drawn)) != ids(random_wl("b2", **drawn))


def prefix_wl(salt: str | None) -> Workload:
    return Workload(kind="prefix", input_len=64, output_len=8, prefix_len=32, num_groups=3, seed=3, salt=salt)


def test_a_shared_prefix_is_shared_within_a_run_and_fresh_in_the_next():
    a, b = ids(prefix_wl("a1")), ids(prefix_wl("b2"))
    heads_a, heads_b = {x[:32] for x in a}, {x[:32] for x in b}
    assert len(heads_a) == len(heads_b) == 3                     # every request of a run carries one of 3
    assert not heads_a & heads_b
    assert len({x[32:] for x in a}) == len(a)                    # the suffixes are each request's own


def test_sessions_and_trace_blocks_take_the_salt_and_keep_their_own_reuse():
    wl = Workload(kind="sessions", input_len=8, output_len=4, turns=3, system_prompt_len=8,
                  shared_system_prompt=True, assistant_turns="fixed", seed=3)
    salted = wl.model_copy(update={"salt": "a1"})
    assert session_tag(wl, KEY) != session_tag(salted, KEY)
    plain, mine = Maker(wl, KEY, VOCAB, None).plan(0), Maker(salted, KEY, VOCAB, None).plan(0)  # type: ignore[arg-type]
    assert plain.users != mine.users and [len(u) for u in plain.users] == [len(u) for u in mine.users]
    assert Maker(salted, KEY, VOCAB, None).plan(1).system == mine.system        # the shared system prompt
    blocks, other = BlockIds(f"3/a1/{KEY}", 16, VOCAB), BlockIds(f"3/b2/{KEY}", 16, VOCAB)
    assert blocks.block(7) == blocks.block(7) != other.block(7)
