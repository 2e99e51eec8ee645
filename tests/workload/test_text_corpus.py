"""The natural-text workload's corpus (CPython's pydoc_data.topics): chunks, ids per tokenizer (cached,
re-read when the tokenizer behind the same name changes), exact windows, exact chat text."""

from __future__ import annotations

import random

import pytest

from tokenbench.testing.tokenizer import detokenize, tokenize
from tokenbench.workload import text_corpus


class WordTokenizer:
    """The reference server's tokenizer (whitespace words), as the server's /tokenize would answer."""

    def __init__(self, vocab: int = 32000, model: str = "m") -> None:
        self.vocab, self.model, self.source, self.calls = vocab, model, "test", 0

    def encode(self, text: str) -> list[int]:
        self.calls += 1
        return tokenize(text, self.vocab)

    def decode(self, ids: list[int]) -> str:
        return detokenize(ids)


def test_chunks_keep_every_paragraph_within_the_limit():
    from pydoc_data.topics import topics
    chunks = text_corpus.corpus_text()
    assert all(0 < len(c) <= text_corpus.CHUNK_CHARS for c in chunks)
    words = sum(len(v.split()) for v in topics.values())
    assert sum(len(c.split()) for c in chunks) >= words - len(chunks)     # only cuts inside over-long paragraphs


def test_ids_are_cached_per_tokenizer_and_read_again_when_it_changes():
    tok = WordTokenizer(model="cached-once")
    ids = text_corpus.corpus_ids(tok)
    first = tok.calls
    assert len(ids) > 60_000 and first == len(text_corpus.corpus_text())
    assert text_corpus.corpus_ids(tok) is ids and tok.calls == first + 1        # one call checks the cache
    other = WordTokenizer(vocab=1000, model="cached-once")                     # same name, another tokenizer
    assert text_corpus.corpus_ids(other) != ids


def test_windows_are_exact_and_wrap():
    ids = tuple(range(10))
    assert text_corpus.window(ids, 7, 5) == (7, 8, 9, 0, 1)
    assert text_corpus.window(ids, 23, 25) == (3, 4, 5, 6, 7, 8, 9) + ids + ids[:8]
    rng = random.Random(3)
    assert all(len(text_corpus.text_ids(ids, rng, n)) == n for n in (1, 9, 10, 11, 57))


@pytest.mark.parametrize("n", [1, 17, 256, 2048])
def test_chat_text_has_exactly_n_tokens(n):
    tok = WordTokenizer(model="chat")
    corpus = text_corpus.corpus_ids(tok)
    text = text_corpus.text_of(tok, corpus, random.Random(n), n)
    assert len(tok.encode(text)) == n


class Splitting(WordTokenizer):
    """Decodes some ids to two words (as a real tokenizer's decode and encode can disagree)."""

    def __init__(self, every: int) -> None:
        super().__init__(model=f"split-{every}")
        self.every = every

    def decode(self, ids: list[int]) -> str:
        return " ".join("x y" if i % self.every == 0 else f"w{i}" for i in ids)


def test_chat_text_moves_its_end_until_the_count_is_exact():
    tok = Splitting(every=5)
    corpus = text_corpus.corpus_ids(tok)
    for seed in range(20):
        assert len(tok.encode(text_corpus.text_of(tok, corpus, random.Random(seed), 300))) == 300


def test_chat_text_that_never_counts_right_is_refused_with_the_fix():
    from tokenbench.errors import TargetError
    tok = Splitting(every=1)                       # every token decodes to two words: 10 is never reached
    with pytest.raises(TargetError, match="decodes to exactly 11 tokens") as err:
        text_corpus.text_of(tok, text_corpus.corpus_ids(tok), random.Random(0), 11)
    assert "--api completions" in err.value.hint
