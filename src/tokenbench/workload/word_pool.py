"""Text of exactly N tokens by any tokenizer, by construction (chat prompts; docs/workloads.md).

Every common tokenizer splits text at spaces before its model sees it (byte-level BPE: the GPT-2 and
Llama 3 regexes; WordPiece: whitespace; SentencePiece BPE and Unigram: the ▁ metaspace, whose pieces
never span words), so the tokens of `w1 w2 ... wk` are the tokens of each word in its place: the first
word as it stands, every later one after its space. A pool of words whose token counts in both places
were measured once per tokenizer therefore gives any length exactly: words are drawn at random while
many tokens are left, and the last ones are planned by exact change (a table of the sums the words'
counts make) so that the counts sum to N. The text is then verified with the tokenizer (one encode);
nothing is adjusted round by round.

The pool: token ids drawn (seeded) from the safe id range are decoded one by one; each decoded text
that is one printable word (no space, no broken UTF-8, not a <tag>) is a candidate, and so are
COMPOUNDS pairs of them written as one word and the PADDING units (single letters, digits and
punctuation: the short units that make small remainders); each is kept with the number of tokens it
adds in its place (at most MAX_TOKENS more than the layout's own) and the number it takes at the start
of a text. A layout is accepted only when texts of its words count exactly the sum of their parts
(every word, twice, among random neighbours). Words separated by a space come first; a tokenizer trained
without splitting at spaces (its merges span them) fails that check, and is tried with a newline
between words, then with every word fenced by a fixed word (`X w1 X w2 X ...`: merges reach the fence
on both sides of each word, always the same way; the fence alone, ` X`, is a unit too), which every
prompt then starts with. A tokenizer that passes none is refused with the fix.

The promise (checked when the pool is built): every whole text of N >= lead + 1 tokens (lead: the
fence's tokens; 0 when words are separated by a space or a newline) and every continuation of N >= 2
tokens (1 too where some unit takes one token) can be made. A layout that passes the check but not the
promise is used only when no layout keeps it, and a length its words cannot make is refused in one
line naming the lengths they can.
"""

from __future__ import annotations

import functools
import math
import random
import unicodedata
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from tokenbench.errors import TargetError
from tokenbench.workload.random_ids import random_ids
from tokenbench.workload.vocab import Vocab

CANDIDATES = 256        # token ids decoded into candidate words, once per tokenizer (one call each to a server)
COMPOUNDS = 32          # two candidates written as one word: more token counts (a tiny vocabulary's
                        # words may all take 2 tokens after a space, so odd lengths need a 3-token one)
PADDING = tuple("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?-")   # short units: 1-token steps where the
                        # tokenizer has them (` a`, ` .`), so small remainders are reachable
MAX_TOKENS = 4          # a word that takes more tokens than this (beyond its layout's) is left out
FILL_TO = 24            # words are drawn freely until about this many tokens are left, then planned
FENCES = 4              # the cheapest decoded candidates tried as fences (then the 2 longest compounds)
CHECK_ROUNDS = 2        # every later word this many times, among random neighbours, ...
CHECK_WORDS = 24        # ... in texts of this many words that must count exactly the sum of their parts
SUFFIX_FLOOR = 2        # promised: every continuation of this many tokens or more
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
    text: str           # as written in its place (a later word with the layout's pre and post)
    tokens: int         # tokens it adds there


@dataclass(frozen=True)
class Change:
    """Exact change: which sums the unit sizes make, with repeats (reach[r] up to `top`; above it, every
    multiple of their common divisor, as top is past their Frobenius number, below max(sizes)**2)."""
    sizes: tuple[int, ...]
    reach: tuple[bool, ...]
    common: int

    @classmethod
    def of(cls, sizes: tuple[int, ...]) -> Change:
        reach = [True] + [False] * max(FILL_TO, max(sizes) ** 2)
        for r in range(1, len(reach)):
            reach[r] = any(s <= r and reach[r - s] for s in sizes)
        return cls(sizes, tuple(reach), functools.reduce(math.gcd, sizes))

    @property
    def top(self) -> int:
        return len(self.reach) - 1

    def makes(self, r: int) -> bool:
        return r >= 0 and (self.reach[r] if r <= self.top else r % self.common == 0)

    def steps(self, r: int) -> list[int]:
        """The sizes that can come next on the way to exactly r."""
        return [s for s in self.sizes if self.makes(r - s)]


@dataclass(frozen=True)
class WordPool:
    layout: Layout
    lead_tokens: int
    first: tuple[Word, ...]     # measured at the start of a text (no lead only)
    later: tuple[Word, ...]     # measured in place after the lead or a first word

    @functools.cached_property
    def change(self) -> Change:
        return Change.of(tuple(sorted({w.tokens for w in self.later})))

    @functools.cached_property
    def by_size(self) -> dict[int, tuple[Word, ...]]:
        return {s: tuple(w for w in self.later if w.tokens == s) for s in self.change.sizes}

    def openings(self, after: bool) -> tuple[int, ...]:
        """Tokens a text can start with before its later words: none (a continuation), the lead, or a
        first word."""
        if after:
            return (0,)
        return (self.lead_tokens,) if self.layout.lead else tuple(sorted({w.tokens for w in self.first}))

    def makes(self, n: int, after: bool = False) -> bool:
        """A text of exactly n tokens (after: a continuation adding n) can be made of these words."""
        if n == 0 and (after or not self.layout.lead):
            return True
        return any(self.change.makes(n - k) for k in self.openings(after))

    def floor(self, after: bool = False) -> int | None:
        """Every length from this one up can be made (None: only multiples of the sizes' divisor)."""
        if self.change.common != 1:
            return None
        missing = [n for n in range(1, self.change.top + max(self.openings(after)) + 2) if not self.makes(n, after)]
        return max(missing, default=0) + 1

    def keeps_promise(self) -> bool:
        whole, after = self.floor(), self.floor(after=True)
        return whole is not None and after is not None and whole <= self.lead_tokens + 1 and after <= SUFFIX_FLOOR


def text_of_length(tok: Codec, rng: random.Random, n: int, vocab: Vocab, after: bool = False) -> str:
    """Text of exactly n tokens; `after`: a continuation of a text made by this pool (it adds n tokens
    to it). TargetError in one line when this tokenizer's words cannot make n."""
    pool = pool_for(tok, vocab)
    if not pool.makes(n, after):
        raise _unmade(pool, n, after)
    opening = _opening(pool, rng, n, after)
    return opening.text + "".join(w.text for w in _fill(pool, rng, n - opening.tokens))


def _opening(pool: WordPool, rng: random.Random, n: int, after: bool) -> Word:
    """What the text starts with: nothing (a continuation, or n = 0), the lead, or a first word whose
    remainder the later words can make exactly."""
    if after or n == 0:
        return Word("", 0)
    if pool.layout.lead:
        return Word(pool.layout.lead, pool.lead_tokens)
    return rng.choice([w for w in pool.first if pool.change.makes(n - w.tokens)])


def _fill(pool: WordPool, rng: random.Random, n: int) -> list[Word]:
    """Later words whose tokens sum to exactly n: drawn freely while more than the change table's top
    are left (every remainder past it can be made), then planned by exact change."""
    out: list[Word] = []
    while n > pool.change.top:
        out.append(rng.choice(pool.later))
        n -= out[-1].tokens
    while n:
        size = rng.choice(pool.change.steps(n))
        out.append(rng.choice(pool.by_size[size]))
        n -= size
    return out


def _unmade(pool: WordPool, n: int, after: bool) -> TargetError:
    """The one-line refusal of a length these words cannot make, with the lengths they can."""
    tokens = f"{n} token{'s' * (n != 1)}"
    what = f"continuation of exactly {tokens} after a shared prefix" if after else f"chat prompt of exactly {tokens}"
    floor = pool.floor(after)
    if floor is None:
        return TargetError(f"no {what} can be made from this tokenizer's words: their token counts "
                           f"{list(pool.change.sizes)} only make multiples of {pool.change.common}", FIX)
    made = [m for m in range(1, floor) if pool.makes(m, after)]
    fence = "" if after or not pool.layout.lead else \
        f"; every prompt starts with the {pool.lead_tokens}-token fence {pool.layout.lead!r} (its merges span spaces)"
    also = f" and {', '.join(map(str, made))}" if made else ""
    return TargetError(f"no {what} can be made from this tokenizer's words: they make every length from "
                       f"{floor} up{also}{fence}", f"ask for {floor} tokens or more, or {FIX}")


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
    """The first layout whose words are additive and keep the promise; else the additive one that
    comes closest; else a one-line refusal."""
    decoded = _decoded(tok, vocab)
    compounds = [a + b for a, b in zip(decoded[:COMPOUNDS], decoded[COMPOUNDS:2 * COMPOUNDS], strict=False)]
    texts = list(dict.fromkeys(decoded + compounds + list(PADDING)))
    usable: list[WordPool] = []
    for layout in _layouts(tok, decoded, compounds):
        pool = _measured(tok, texts, layout)
        if (pool.first or layout.lead) and pool.later and _additive(tok, pool):
            if pool.keeps_promise():
                return pool
            usable.append(pool)
    if usable:
        return min(usable, key=_shortfall)
    raise TargetError("the tokenizer merges tokens across spaces, newlines and fences (or splits every word "
                      f"into more than {MAX_TOKENS} tokens), so no chat prompt of an exact length can be built", FIX)


def _decoded(tok: Codec, vocab: Vocab) -> list[str]:
    """The plain words that token ids drawn from the safe range decode to."""
    ids = random_ids(random.Random(f"word-pool/{vocab.size}"), CANDIDATES, vocab)
    words = list(dict.fromkeys(t for t in (_word(tok.decode([i])) for i in dict.fromkeys(ids)) if t))
    if not words:
        raise TargetError("the tokenizer decodes no token of the id range to a plain word, so no chat prompt "
                          "of an exact length can be built", FIX)
    return words


def _layouts(tok: Codec, decoded: list[str], compounds: list[str]) -> Iterator[Layout]:
    """A space, a newline, then fences (built only when both fail)."""
    yield Layout(" ")
    yield Layout("\n")
    for fence in _fences(tok, decoded, compounds):
        yield Layout(" ", fence, " " + fence)


def _fences(tok: Codec, decoded: list[str], compounds: list[str]) -> list[str]:
    """The FENCES cheapest fences (fewest tokens for `X X`, the lead and the fence alone as a unit, so
    small lengths stay reachable; the longer first), then the 2 longest compounds (long fences keep
    merges away from the next word, but every word costs their tokens)."""
    cheapest = sorted(decoded, key=lambda x: (len(tok.encode(x + " " + x)), -len(x)))[:FENCES]
    return list(dict.fromkeys(cheapest + sorted(compounds, key=len, reverse=True)[:2]))


def _shortfall(pool: WordPool) -> tuple[int, int]:
    """How far a pool's smallest lengths are from the promise (for choosing among pools that miss it)."""
    whole, after = pool.floor(), pool.floor(after=True)
    far = 1 << 30
    return (far if whole is None else whole - pool.lead_tokens, far if after is None else after)


def _measured(tok: Codec, texts: list[str], layout: Layout) -> WordPool:
    """Each candidate's tokens in its place, measured after the lead (or after an anchor word); with a
    lead, the fence alone is a unit too."""
    start = layout.lead or texts[0]
    base = len(tok.encode(start))

    def in_place(unit: str) -> Word:
        return Word(unit, len(tok.encode(start + unit)) - base)

    bare = (in_place(layout.post),) if layout.lead else ()
    own = bare[0].tokens if bare else 0
    later = (in_place(layout.pre + t + layout.post) for t in texts)
    first = () if layout.lead else (Word(t, len(tok.encode(t))) for t in texts)
    return WordPool(layout, base if layout.lead else 0, tuple(w for w in first if _kept(w, 0)),
                    tuple(w for w in (*bare, *later) if _kept(w, own)))


def _kept(w: Word, own: int) -> bool:
    return 1 <= w.tokens <= own + MAX_TOKENS


def _additive(tok: Codec, pool: WordPool) -> bool:
    """Texts of the pool's words count exactly the sum of their parts: every later word CHECK_ROUNDS
    times among random neighbours, after a lead or a first word (seeded)."""
    rng = random.Random("word-pool/check")
    openings = [Word(pool.layout.lead, pool.lead_tokens)] if pool.layout.lead else list(pool.first)
    rng.shuffle(openings)
    for i, words in enumerate(_check_runs(pool, rng)):
        opening = openings[i % len(openings)]
        text = opening.text + "".join(w.text for w in words)
        if len(tok.encode(text)) != opening.tokens + sum(w.tokens for w in words):
            return False
    return True


def _check_runs(pool: WordPool, rng: random.Random) -> Iterator[list[Word]]:
    for _ in range(CHECK_ROUNDS):
        order = list(pool.later)
        rng.shuffle(order)
        yield from (order[i:i + CHECK_WORDS] for i in range(0, len(order), CHECK_WORDS))


def _word(text: str) -> str | None:
    """The decoded text as one plain word, or None."""
    parts = text.split()
    if len(parts) != 1:
        return None
    w = parts[0]
    plain = w.isprintable() and "\ufffd" not in w and unicodedata.normalize("NFC", w) == w
    tag = w.startswith("<") and w.endswith(">") or w.startswith("[") and w.endswith("]")
    return w if plain and not tag else None
