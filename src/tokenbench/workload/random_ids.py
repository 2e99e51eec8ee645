"""Exact-length synthetic prompts: random token ids (completions) or text whose length is checked
with the server's own tokenizer (chat). Pure and seeded: the same seed, salt and cell give the same prompts.
"""

from __future__ import annotations

import random

from tokenbench.workload.vocab import Vocab


def cell_rng(seed: int, cell_key: str, phase: str, salt: str | None = None) -> random.Random:
    """A distinct stream per (seed, cell, phase): fresh prompts in every cell, no prefix reuse; a run's `salt`
    (spec/study.StudySpec.prompt_salt) makes them fresh in every run too (without it, the same stream as ever)."""
    return random.Random(f"{seed}/{cell_key}/{phase}" if salt is None else f"{seed}/{salt}/{cell_key}/{phase}")


def random_ids(rng: random.Random, n: int, vocab: Vocab) -> tuple[int, ...]:
    """n draws of `rng.randrange(vocab.low, vocab.high)`, the same numbers from the same stream, with
    randrange's rejection sampling written out (its three calls per draw were most of a prompt's cost)."""
    width = vocab.high - vocab.low
    if width <= 0 or type(rng) is not random.Random:
        return tuple(rng.randrange(vocab.low, vocab.high) for _ in range(n))
    bits, k, low, out = rng.getrandbits, width.bit_length(), vocab.low, []
    for _ in range(n):
        r = bits(k)
        while r >= width:
            r = bits(k)
        out.append(low + r)
    return tuple(out)
