"""Shared-prefix prompts: G groups, each with its own P-token prefix, and a unique suffix per request.

Request i of a phase belongs to group i mod G, so consecutive requests rotate over the groups. Every
prompt is exactly input_len = P + S tokens: token ids for completions (exact by construction), and
for chat a prefix text of exactly P tokens followed by a suffix of words chosen so that the whole text
is exactly P + S tokens by the server's tokenizer (workload/word_pool.py). The prefixes are drawn once per cell and shared by
its warmup and measured phases, so the warmup leaves them in the engine's prefix cache; the suffixes
are fresh in each phase. The best possible cache-hit rate is P / input_len.
"""

from __future__ import annotations

import random

from tokenbench.workload.chat import Tokenizer, exact_text
from tokenbench.workload.dataset import Draft
from tokenbench.workload.random_ids import random_ids
from tokenbench.workload.vocab import Vocab


def group_of(i: int, groups: int) -> int:
    return i % groups


def prefix_ids(rng: random.Random, groups: int, prefix_len: int, vocab: Vocab) -> list[tuple[int, ...]]:
    return [random_ids(rng, prefix_len, vocab) for _ in range(groups)]


def id_drafts(prefixes: list[tuple[int, ...]], rng: random.Random, lengths: list[tuple[int, int]],
              vocab: Vocab) -> list[Draft]:
    """Completions: prefix ids of the request's group + random suffix ids, one draft per (input, output)."""
    out = []
    for i, (input_len, output_len) in enumerate(lengths):
        head = prefixes[group_of(i, len(prefixes))]
        out.append(Draft(None, head + random_ids(rng, input_len - len(head), vocab), input_len, output_len))
    return out


def prefix_texts(tok: Tokenizer, rng: random.Random, groups: int, prefix_len: int, vocab: Vocab) -> list[str]:
    return [exact_text(tok, rng, prefix_len, vocab) for _ in range(groups)]


def text_drafts(tok: Tokenizer, prefixes: list[str], rng: random.Random, lengths: list[tuple[int, int]],
                vocab: Vocab, prefix_len: int) -> list[Draft]:
    """Chat: `prefix + suffix` (the suffix starts with its separator), exactly each draft's input length in
    tokens as a whole (prefix_len of them the prefix)."""
    out = []
    for i, (input_len, output_len) in enumerate(lengths):
        head = prefixes[group_of(i, len(prefixes))]
        tail = exact_text(tok, rng, input_len - prefix_len, vocab, head=head, head_len=prefix_len)
        out.append(Draft(head + tail, None, input_len, output_len))
    return out
