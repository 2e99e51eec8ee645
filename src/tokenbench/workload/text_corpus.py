"""Natural-text prompts of exact length: token ids of a text corpus, a window of exactly N of them.

The corpus is Python's own help text, `pydoc_data.topics` (the language reference's topics as `help()`
shows them: English technical prose with some code; about 465,000 characters, 112,707 Gemma 3 tokens).
It ships with CPython under the PSF licence, so nothing is installed or downloaded. It is tokenized
once per tokenizer and model (the server's /tokenize, or the local tokenizer of --tokenizer), in
chunks of whole paragraphs that fit any context, without special tokens, and kept for the process;
each later use re-tokenizes the first chunk and starts again when it differs (another model behind
the same name). A prompt is the N ids from a seeded random place, wrapping at the end: exact by
construction over the completions API. Over chat the window is decoded and re-tokenized, its end moved
until the text has exactly N tokens. Why text at all: a speculative server accepts drafts on random ids
at a rate unlike text's, usually far lower, sometimes higher (docs/workloads.md).
"""

from __future__ import annotations

import random

from tokenbench.errors import TargetError, UsageError
from tokenbench.workload.chat import Tokenizer

SOURCE = "pydoc_data.topics (CPython's help text, PSF licence)"
CHUNK_CHARS = 2000          # per tokenize call: about 500 tokens, within any server's context
CHAT_STARTS, CHAT_STEPS = 4, 6     # chat: places tried, end moves per place
_cache: dict[tuple[str, str, str], tuple[int, ...]] = {}


def corpus_text() -> list[str]:
    """The corpus in chunks of whole paragraphs (topics in name order), each at most CHUNK_CHARS long
    (a longer paragraph is a chunk of its own, cut at CHUNK_CHARS)."""
    try:
        from pydoc_data.topics import topics
    except ImportError:
        raise UsageError("this Python has no pydoc_data (its help text), the text workload's corpus",
                         "use a full CPython (some distributions ship it as a separate package)") from None
    chunks, current = [], ""
    for name in sorted(topics):
        for para in (p.strip() for p in topics[name].split("\n\n")):
            if current and len(current) + len(para) + 2 > CHUNK_CHARS:
                chunks.append(current)
                current = ""
            current = f"{current}\n\n{para}" if current else para
            while len(current) > CHUNK_CHARS:
                chunks.append(current[:CHUNK_CHARS])
                current = current[CHUNK_CHARS:]
    return chunks + ([current] if current else [])


def _key(tok: Tokenizer) -> tuple[str, str, str]:
    return type(tok).__name__, str(getattr(tok, "source", "")), str(getattr(tok, "model", ""))


def corpus_ids(tok: Tokenizer) -> tuple[int, ...]:
    """The corpus as token ids of this tokenizer (cached per tokenizer and model)."""
    chunks = corpus_text()
    head = tuple(tok.encode(chunks[0]))
    cached = _cache.get(_key(tok))
    if cached is not None and cached[:len(head)] == head:
        return cached
    ids = list(head)
    for chunk in chunks[1:]:
        ids += tok.encode(chunk)
    _cache[_key(tok)] = tuple(ids)
    return _cache[_key(tok)]


def window(ids: tuple[int, ...], start: int, n: int) -> tuple[int, ...]:
    """n ids from `start`, wrapping around the end of the corpus."""
    start %= len(ids)
    out = ids[start:start + n]
    while len(out) < n:
        out += ids[:n - len(out)]
    return out


def text_ids(ids: tuple[int, ...], rng: random.Random, n: int) -> tuple[int, ...]:
    """A prompt of exactly n token ids of the corpus, from a random place."""
    return window(ids, rng.randrange(len(ids)), n)


def _fitted(tok: Tokenizer, ids: tuple[int, ...], start: int, n: int) -> str | None:
    """The text of the window at `start` whose end is moved until it has exactly n tokens (None when it
    cannot: the last id's text adds more than one token)."""
    take = n
    for _ in range(CHAT_STEPS):
        text = tok.decode(list(window(ids, start, take))).strip()
        got = len(tok.encode(text))
        if got == n:
            return text
        take = max(1, take + n - got if abs(n - got) <= 2 else round(take * n / max(got, 1)))
    return None


def text_of(tok: Tokenizer, ids: tuple[int, ...], rng: random.Random, n: int) -> str:
    """Corpus text of exactly n tokens by the tokenizer: a window decoded, its end moved until it counts n
    (from another random place when that window cannot)."""
    for _ in range(CHAT_STARTS):
        text = _fitted(tok, ids, rng.randrange(len(ids)), n)
        if text is not None:
            return text
    raise TargetError(f"no window of the text corpus decodes to exactly {n} tokens ({CHAT_STARTS} places tried, "
                      f"{getattr(tok, 'source', type(tok).__name__)})",
                      "use --api completions (text prompts are then token ids, exact by construction)")
