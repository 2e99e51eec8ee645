"""Exact chat prompts with any Hugging Face tokenizer, by construction (workload/word_pool.py): for every
family (byte-level BPE, SentencePiece Unigram, WordPiece, word level, a BPE whose merges span spaces),
tiny and larger vocabularies, and the real SmolLM2 and Gemma 3 tokenizers when this machine has them,
the text of every length from 16 to 4,096 tokens has exactly that many tokens by the tokenizer itself,
and with a shared prefix the whole text does. One encode per prompt verifies it: nothing is adjusted."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tokenbench.errors import TargetError
from tokenbench.workload import word_pool
from tokenbench.workload.chat import exact_text

from .tokenizer_zoo import BUILT, Wrapped, built, gemma3, smollm2

CHEAP = ["byte-level BPE, 300 (bytes + 43 merges)", "wordpiece, 120", "word level, 32000"]
REAL = {"smollm2": smollm2, "gemma3": gemma3}
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def tokenizer(name: str) -> Wrapped:
    if name in REAL:
        found = REAL[name]()
        if found.tokenizer is None:
            pytest.skip(found.missing)
        return found.tokenizer
    return built(name)


def count(tok: Wrapped, text: str) -> int:
    """The tokenizer's own count (the raw library, not the code under test)."""
    return len(tok.raw.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("name", CHEAP)
@pytest.mark.parametrize("n", [16, 17, 64, 1000, 4095, 4096])
def test_edges_are_exact(name, n):
    tok = tokenizer(name)
    assert count(tok, exact_text(tok, random.Random(n), n, tok.vocab)) == n


@pytest.mark.slow
@pytest.mark.parametrize("name", [*BUILT, *REAL])
@PROPERTY
@given(n=st.integers(16, 4096), seed=st.integers(0, 2**32))
@example(n=16, seed=0)
@example(n=4096, seed=0)
def test_every_length_from_16_to_4096_is_exact(name, n, seed):
    tok = tokenizer(name)
    text = exact_text(tok, random.Random(seed), n, tok.vocab)
    assert count(tok, text) == n
    assert text == text.strip() and text           # nothing a chat template's trim would change


@pytest.mark.slow
@pytest.mark.parametrize("name", [*BUILT, *REAL])
@PROPERTY
@given(prefix=st.integers(8, 2048), suffix=st.integers(8, 2048), seed=st.integers(0, 2**32))
@example(prefix=8, suffix=8, seed=0)
def test_a_shared_prefix_and_its_suffix_are_exact_as_a_whole(name, prefix, suffix, seed):
    tok = tokenizer(name)
    rng = random.Random(seed)
    head = exact_text(tok, rng, prefix, tok.vocab)
    tail = exact_text(tok, rng, suffix, tok.vocab, head=head, head_len=prefix)
    assert count(tok, head) == prefix and count(tok, head + tail) == prefix + suffix


@pytest.mark.parametrize("name", CHEAP)
def test_one_encode_per_prompt_once_the_pool_is_built(name):
    """By construction: after the tokenizer's pool is measured, a prompt costs exactly one encode (the
    verification) and no decode, whatever its length."""
    tok = tokenizer(name)
    calls = {"encode": 0, "decode": 0}

    class Counting:
        source = f"counting {name}"

        def encode(self, text):
            calls["encode"] += 1
            return tok.encode(text)

        def decode(self, ids):
            calls["decode"] += 1
            return tok.decode(ids)

    counting = Counting()
    word_pool.pool_for(counting, tok.vocab)
    calls.update(encode=0, decode=0)
    for n in (16, 300, 4096):
        assert count(tok, exact_text(counting, random.Random(n), n, tok.vocab)) == n
    assert calls == {"encode": 3, "decode": 0}


def test_prompts_are_fresh_per_seed_and_the_same_for_the_same_seed():
    tok = tokenizer("byte-level BPE, 300 (bytes + 43 merges)")
    texts = [exact_text(tok, random.Random(seed), 64, tok.vocab) for seed in range(20)]
    assert len(set(texts)) == 20
    assert exact_text(tok, random.Random(3), 64, tok.vocab) == texts[3]
    assert len({t.split()[0] for t in texts}) > 1          # not one shared first word (no prefix reuse)


def test_a_tokenizer_with_no_plain_word_is_refused_in_one_line():
    class Blank:
        source = "blank"

        def encode(self, text):
            return [1] * len(text)

        def decode(self, ids):
            return ""

    with pytest.raises(TargetError) as exc:
        exact_text(Blank(), random.Random(0), 64, built("word level, 32000").vocab)
    assert "decodes no token of the id range to a plain word" in exc.value.message
    assert exc.value.hint == "use --api completions (token-id prompts are exact by construction)"
