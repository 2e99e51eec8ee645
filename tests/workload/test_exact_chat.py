"""Exact chat prompts with any Hugging Face tokenizer, by construction (workload/word_pool.py): for every
family (byte-level BPE, SentencePiece Unigram, WordPiece, word level, a BPE whose merges span spaces),
tiny and larger vocabularies, and the real SmolLM2 and Gemma 3 tokenizers when this machine has them,
the text of every length from 16 to 4,096 tokens has exactly that many tokens by the tokenizer itself,
and with a shared prefix the whole text does; so does every small length the pool promises (a whole text
from its lead + 1 tokens, a continuation from 2). A length a tokenizer's words cannot make is refused in
one line that names only lengths they do make. One encode per prompt verifies it: nothing is adjusted."""

from __future__ import annotations

import random
import re

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
@example(prefix=10, suffix=8, seed=0)        # once refused: 7 tokens after the fence, from words of 4-6
def test_a_shared_prefix_and_its_suffix_are_exact_as_a_whole(name, prefix, suffix, seed):
    tok = tokenizer(name)
    rng = random.Random(seed)
    head = exact_text(tok, rng, prefix, tok.vocab)
    tail = exact_text(tok, rng, suffix, tok.vocab, head=head, head_len=prefix)
    assert count(tok, head) == prefix and count(tok, head + tail) == prefix + suffix


@pytest.mark.slow
@pytest.mark.parametrize("name", [*BUILT, *REAL])
def test_every_promised_small_length_is_exact(name):
    """The promise checked when the pool is built, over the lengths that are planned rather than drawn:
    every whole text of lead + 1 to 64 tokens (lead: the fence every prompt starts with, if any) and every
    continuation of 2 to 64 tokens after a shared prefix of any small length."""
    tok = tokenizer(name)
    lead = word_pool.pool_for(tok, tok.vocab).lead_tokens
    for n in range(lead + 1, SMALL + 1):
        rng = random.Random(n)
        text = exact_text(tok, rng, n, tok.vocab)
        assert count(tok, text) == n and text == text.strip()
        prefix = rng.randint(lead + 1, SMALL)
        head = exact_text(tok, rng, prefix, tok.vocab)
        for suffix in {max(n, 2), n + 1}:          # a continuation: from 2
            tail = exact_text(tok, rng, suffix, tok.vocab, head=head, head_len=prefix)
            assert count(tok, head + tail) == prefix + suffix


SMALL = 64


class GappyWords:
    """A made-up tokenizer (no real one is this poor, so it is made here): a space or newline is one token,
    a word of up to 3 letters takes 2 or 3 and a longer one 9, so its words leave gaps among small lengths."""

    source = "made-up: gappy words"

    def encode(self, text):
        return [t for part in re.findall(r"\s|\S+", text) for t in self._word(part)]

    def _word(self, part):
        return [0] if part.isspace() else [1] * (2 if len(part) <= 2 else 3 if len(part) == 3 else 9)

    def decode(self, ids):
        return "".join("abcdefghij"[i % 10] * (1 + i % 3) for i in ids)


@pytest.mark.parametrize("after", [False, True], ids=["whole", "continuation"])
def test_a_length_the_words_cannot_make_is_refused_naming_lengths_they_can(after):
    """Every length is either exact or refused in one line, and each length a refusal names is exact."""
    tok, vocab = GappyWords(), built("word level, 32000").vocab
    head = "ab" if after else ""

    def exact(n):
        text = exact_text(tok, random.Random(n), n, vocab, head=head, head_len=len(tok.encode(head)))
        return len(tok.encode(head + text)) - len(tok.encode(head)) == n

    refused = {}
    for n in range(1, SMALL):
        try:
            assert exact(n)
        except TargetError as exc:
            refused[n] = exc
    assert refused, "the made-up tokenizer was meant to leave gaps"
    for n, exc in refused.items():
        assert "\n" not in exc.message and f"exactly {n} token" in exc.message
        floor, *also = map(int, re.findall(r"\d+", exc.message.split("every length from ")[1]))
        assert n < floor and n not in also and exc.hint.startswith(f"ask for {floor} tokens or more")
        assert all(exact(m) for m in (*also, *range(floor, floor + SMALL)))


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
