"""Exact-length synthetic prompts: random token ids (completions) or text whose length is checked
with the server's own tokenizer (chat). Pure and seeded: the same seed and cell give the same prompts.
"""

from __future__ import annotations

import random

from tokenbench.client.request import Prompt
from tokenbench.workload.vocab import Vocab


def cell_rng(seed: int, cell_key: str, phase: str) -> random.Random:
    """A distinct stream per (seed, cell, phase): fresh prompts in every cell, no prefix reuse."""
    return random.Random(f"{seed}/{cell_key}/{phase}")


def random_ids(rng: random.Random, n: int, vocab: Vocab) -> tuple[int, ...]:
    return tuple(rng.randrange(vocab.low, vocab.high) for _ in range(n))


def token_prompts(rng: random.Random, count: int, input_len: int, output_len: int, vocab: Vocab) -> list[Prompt]:
    return [Prompt(token_ids=random_ids(rng, input_len, vocab), text=None, input_len=input_len,
                   output_len=output_len, expected_prompt_tokens=input_len) for _ in range(count)]
