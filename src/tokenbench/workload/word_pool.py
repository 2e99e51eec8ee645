"""Text of exactly N tokens by any tokenizer, by construction (chat prompts; docs/workloads.md).

Every common tokenizer splits text at spaces before its model sees it (byte-level BPE: the GPT-2 and
Llama 3 regexes; WordPiece: whitespace; SentencePiece BPE and Unigram: the ▁ metaspace, whose pieces
never span words), so the tokens of `w1 w2 ... wk` are the tokens of each word in its place: the first
word as it stands, every later one after its space. A pool of words whose token counts in both places
were measured once per tokenizer therefore gives any length exactly: words are drawn at random, and the
last ones chosen so that the counts sum to N. The text is then verified with the tokenizer (one
encode); nothing is adjusted round by round.

The pool: token ids drawn (seeded) from the safe id range are decoded one by one; each decoded text
that is one printable word (no space, no broken UTF-8, not a <tag>) is a candidate (so are COMPOUNDS
pairs of them written as one word, for more token counts), kept with the number of tokens it adds in
its place (at most MAX_TOKENS more than the layout's own). The first FIRST candidates are also
measured at the start of a text. A layout is accepted only when random sequences
of its words count exactly the sum of their parts. Words separated by a space come first; a tokenizer
trained without splitting at spaces (its merges span them) fails that check, and is tried with a
newline between words, then with every word fenced by a fixed long word (`X w1 X w2 X ...`: merges
reach the fence on both sides of each word, always the same way), which every prompt then starts with.
A tokenizer that passes none is refused with the fix.
"""

from __future__ import annotations

import functools
import math
import random
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tokenbench.errors import TargetError
from tokenbench.workload.random_ids import random_ids
from tokenbench.workload.vocab import Vocab

CANDIDATES = 256        # token ids decoded into candidate words, once per tokenizer (one call each to a server)
COMPOUNDS = 32          # two candidates written as one word: more token counts (a tiny vocabulary's
                        # words may all take 2 tokens after a space, so odd lengths need a 3-token one)
FIRST = 32              # candidates also measured at the start of a text
MAX_TOKENS = 4          # a word that takes more tokens than this (beyond its layout's) is left out
FILL_TO = 24            # words are drawn freely until about this many tokens are left, then chosen to fit
FENCES = 3              # the longest candidates tried as fences
CHECKS = 8              # random sequences of ...
CHECK_WORDS = 24        # ... this many words that must count exactly the sum of their parts
FIX = "use --api completions (token-id prompts are exact by construction)"


class Codec(Protocol):
    """What the pool needs of a tokenizer (workload/chat.py's Tokenizer)."""

    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...


@dataclass(frozen=True)
class Layout:
    """How words are laid out: `lead` + (first word) + (pre + word + post) for each later word."""
    pre: str
    lead: str = ""      # a fence every text starts with ("": texts start with a first word)
    post: str = ""


@dataclass(frozen=True)
class Word:
    text: str
    tokens: int         # tokens it adds in its place (the layout's pre and post included)


@dataclass(frozen=True)
class WordPool:
    layout: Layout
    lead_tokens: int
    first: tuple[Word, ...]     # measured at the start of a text (no lead only)
    later: tuple[Word, ...]     # measured as pre + word + post

    def sizes(self) -> tuple[int, ...]:
        return tuple(sorted({w.tokens for w in self.later}))

    def unit(self, word: str) -> str:
        return self.layout.pre + word + self.layout.post


def text_of_length(tok: Codec, rng: random.Random, n: int, vocab: Vocab, after: bool = False) -> str:
    """Text of exactly n tokens; `after`: a continuation of a text made by this pool (it adds n tokens
    to it). TargetError when this tokenizer's words cannot make n."""
    pool = pool_for(tok, vocab)
    lead = "" if after else pool.layout.lead
    opening = None if after or lead else _first_word(pool, rng, n)
    rest = n - (opening.tokens if opening else pool.lead_tokens if lead else 0)
    if rest < 0:
        raise TargetError(f"no chat prompt of exactly {n} tokens: this tokenizer's prompts start with "
                          f"{pool.lead_tokens} fixed tokens", FIX)
    words = _fill(pool, rng, rest)
    return lead + (opening.text if opening else "") + "".join(pool.unit(w.text) for w in words)


def pool_for(tok: Codec, vocab: Vocab) -> WordPool:
    """The pool of this tokenizer (built once per tokenizer and id range, see the module doc)."""
    key = (type(tok).__qualname__, getattr(tok, "source", None) or id(tok), getattr(tok, "model", None), vocab)
    if key in _POOLS:
        _POOLS.move_to_end(key)
        return _POOLS[key][1]
    pool = build_pool(tok, vocab)
    _POOLS[key] = (tok, pool)            # the tokenizer is kept too, so its id is not reused meanwhile
    while len(_POOLS) > POOLS_KEPT:
        _POOLS.popitem(last=False)
    return pool


POOLS_KEPT = 8
_POOLS: OrderedDict[tuple, tuple[object, WordPool]] = OrderedDict()


def build_pool(tok: Codec, vocab: Vocab) -> WordPool:
    ids = random_ids(random.Random(f"word-pool/{vocab.size}"), CANDIDATES, vocab)
    texts = list(dict.fromkeys(t for t in (_word(tok.decode([i])) for i in dict.fromkeys(ids)) if t))
    if not texts:
        raise TargetError("the tokenizer decodes no token of the id range to a plain word, so no chat prompt "
                          "of an exact length can be built", FIX)
    texts += [a + b for a, b in zip(texts[:COMPOUNDS], texts[COMPOUNDS:2 * COMPOUNDS], strict=False)]
    fences = sorted(texts, key=len, reverse=True)[:FENCES]
    layouts = [Layout(" "), Layout("\n"), *(Layout(" ", x, " " + x) for x in fences)]
    for layout in layouts:
        pool = _measured(tok, texts, layout)
        if (pool.first or layout.lead) and pool.later and _additive(tok, pool):
            return pool
    raise TargetError("the tokenizer merges tokens across spaces, newlines and fences (or splits every word "
                      f"into more than {MAX_TOKENS} tokens), so no chat prompt of an exact length can be built", FIX)


def _measured(tok: Codec, texts: list[str], layout: Layout) -> WordPool:
    """Each candidate's tokens in its place, measured after the lead (or after an anchor word)."""
    start = layout.lead or texts[0]
    base = len(tok.encode(start))
    own = len(tok.encode(start + layout.pre + layout.post)) - base if layout.lead else 0
    later = (Word(t, len(tok.encode(start + layout.pre + t + layout.post)) - base) for t in texts)
    first = () if layout.lead else (Word(t, len(tok.encode(t))) for t in texts[:FIRST])
    return WordPool(layout, len(tok.encode(layout.lead)) if layout.lead else 0,
                    tuple(w for w in first if _kept(w, 0)), tuple(w for w in later if _kept(w, own)))


def _kept(w: Word, own: int) -> bool:
    return 1 <= w.tokens - own <= MAX_TOKENS


def _additive(tok: Codec, pool: WordPool) -> bool:
    """Random texts of the pool's words count exactly the sum of their parts (seeded)."""
    rng = random.Random("word-pool/check")
    for _ in range(CHECKS):
        opening = rng.choice(pool.first) if pool.first else None
        words = [rng.choice(pool.later) for _ in range(CHECK_WORDS)]
        text = pool.layout.lead + (opening.text if opening else "") + "".join(pool.unit(w.text) for w in words)
        want = (opening.tokens if opening else pool.lead_tokens) + sum(w.tokens for w in words)
        if len(tok.encode(text)) != want:
            return False
    return True


def _word(text: str) -> str | None:
    """The decoded text as one plain word, or None."""
    parts = text.split()
    if len(parts) != 1:
        return None
    w = parts[0]
    plain = w.isprintable() and "\ufffd" not in w and unicodedata.normalize("NFC", w) == w
    tag = w.startswith("<") and w.endswith(">") or w.startswith("[") and w.endswith("]")
    return w if plain and not tag else None


def _first_word(pool: WordPool, rng: random.Random, n: int) -> Word | None:
    """A first word whose remainder the later words can make exactly (None: n is 0)."""
    if n == 0:
        return None
    reach = _reachable(pool.sizes())
    fits = [w for w in pool.first if w.tokens <= n and reach(n - w.tokens)]
    if not fits:
        raise TargetError(f"no chat prompt of exactly {n} tokens can be made from this tokenizer's words "
                          f"(first words take {sorted({w.tokens for w in pool.first})} tokens, later ones "
                          f"{list(pool.sizes())})", FIX)
    return rng.choice(fits)


def _fill(pool: WordPool, rng: random.Random, n: int) -> list[Word]:
    """Later words whose tokens sum to exactly n: drawn freely down to the fitting threshold, then chosen."""
    sizes = pool.sizes()
    if not _reachable(sizes)(n):
        raise TargetError(f"no chat prompt of exactly {n} more tokens can be made from words of "
                          f"{list(sizes)} tokens", FIX)
    out: list[Word] = []
    while n > _threshold(sizes):
        w = rng.choice(pool.later)
        out.append(w)
        n -= w.tokens
    return out + _fit(pool, rng, n)


def _fit(pool: WordPool, rng: random.Random, n: int) -> list[Word]:
    """A random choice of later words summing to exactly n (n small), by the table of reachable sums."""
    sizes = pool.sizes()
    reach = _table(sizes, n)
    by_size = {s: [w for w in pool.later if w.tokens == s] for s in sizes}
    out = []
    while n:
        s = rng.choice([s for s in sizes if s <= n and reach[n - s]])
        out.append(rng.choice(by_size[s]))
        n -= s
    return out


def _threshold(sizes: Sequence[int]) -> int:
    """Above it every multiple of the sizes' common divisor is a sum of sizes (past their Frobenius
    number, which is below max(sizes)**2), so words can be drawn freely down to it."""
    return max(FILL_TO, max(sizes) ** 2)


@functools.lru_cache(maxsize=64)
def _table(sizes: tuple[int, ...], n: int) -> list[bool]:
    """reach[r]: r is a sum of sizes (with repeats)."""
    reach = [True] + [False] * n
    for r in range(1, n + 1):
        reach[r] = any(s <= r and reach[r - s] for s in sizes)
    return reach


def _reachable(sizes: tuple[int, ...]) -> Callable[[int], bool]:
    top = _threshold(sizes)
    table = _table(sizes, top)
    common = functools.reduce(math.gcd, sizes)
    return lambda r: r >= 0 and (table[r] if r <= top else r % common == 0)
