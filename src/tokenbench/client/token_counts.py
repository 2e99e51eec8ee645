"""Tokens per chunk for a whole stream, once it ended (docs/metrics.md, "Tokens").

In order of trust: `token_ids` on every token-bearing choice (exact); else a cumulative
`usage.completion_tokens` on every token-bearing chunk (vLLM `continuous_usage_stats`; exact, and it
finds tokens whose text is empty); else one token per chunk with text or an empty-text token, then
reconciled with the final usage: empty-text chunks beyond the server's count were not tokens (dropped,
first ones first); a finish chunk without text is the last token when usage says one is missing, and
when usage still says more (speculative decoding, a stream interval: several tokens per
chunk) the remainder is spread over the chunks after the first. A chunk count never stands for a token
count when the server said otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(slots=True, kw_only=True)
class Chunk:
    """One event with choices: when it came, what its choices carry, its cumulative usage if any."""

    t_ns: int
    guess: int                  # tokens by token ids, else 1 per choice with text or an empty-text token
    all_ids: bool               # every token-bearing choice sent token_ids
    mark: int | None            # usage.completion_tokens on this chunk
    content: bool               # carries answer text (content, text or tool-call text)
    reasoning_only: bool        # carries reasoning text and no answer text
    empty_finish: bool          # a finish chunk with no text: a token on some servers, none on others
    empty_only: bool = False    # counted only for an empty text field (no text, no token ids)


@dataclass(slots=True)
class Counted:
    times: list[int] = field(default_factory=list)       # arrival of each token-bearing chunk
    counts: list[int] = field(default_factory=list)      # tokens it carried (all > 0)
    source: str = "none"        # "token_ids" | "continuous_usage" | "chunks" | "chunks+usage" | "none"
    first_content_ns: int | None = None
    reasoning_tokens: int = 0


def _is_count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _continuous(chunks: Sequence[Chunk]) -> list[int] | None:
    """Per-chunk increments of a cumulative usage count carried by every token-bearing chunk."""
    marked = [c for c in chunks if c.mark is not None]
    if len(marked) < 2 or any(c.guess and c.mark is None for c in chunks):
        return None
    if not all(_is_count(c.mark) for c in marked):
        return None
    out, prev = [], 0
    for c in chunks:
        mark = c.mark
        if mark is None:
            out.append(0)
            continue
        if mark < prev:
            return None
        out.append(mark - prev)
        prev = mark
    return out


def _reconciled(chunks: Sequence[Chunk], total: int | None) -> tuple[list[int], str]:
    """1 per chunk with text, then made to agree with the server's final count where it is larger."""
    counts = [c.guess for c in chunks]
    if not isinstance(total, int) or not _is_count(total) or total == sum(counts):
        return counts, "chunks"
    if total < sum(counts):
        return _without_empty(chunks, counts, total), "chunks+usage"
    last = max((i for i, c in enumerate(chunks) if c.empty_finish), default=None)
    if last is not None and last == len(chunks) - 1 and counts[last] == 0:
        counts[last] = 1
    missing = total - sum(counts)
    bearing = [i for i, k in enumerate(counts) if k][1:]
    if missing > 0 and bearing:
        share, extra = divmod(missing, len(bearing))
        for n, i in enumerate(bearing):
            counts[i] += share + (1 if n < extra else 0)
    return counts, "chunks+usage"


def _without_empty(chunks: Sequence[Chunk], counts: list[int], total: int) -> list[int]:
    """More chunks than the server's tokens: empty-text chunks were not all tokens (a gateway's
    keep-alive); drop them, first ones first, until the count agrees (text chunks are never dropped)."""
    extra = sum(counts) - total
    for i, c in enumerate(chunks):
        if extra <= 0:
            break
        if c.empty_only and counts[i]:
            extra -= counts[i]
            counts[i] = 0
    return counts


def resolve(chunks: Sequence[Chunk], usage: dict | None) -> Counted:
    total = (usage or {}).get("completion_tokens")
    total = total if isinstance(total, int) else None
    if chunks and all(c.all_ids for c in chunks if c.guess) and any(c.guess for c in chunks):
        counts, source = [c.guess for c in chunks], "token_ids"
    elif (steps := _continuous(chunks)) is not None:
        counts, source = steps, "continuous_usage"
    else:
        counts, source = _reconciled(chunks, total)
    out = Counted(source=source if any(counts) else "none")
    for c, k in zip(chunks, counts, strict=True):
        if k <= 0:
            continue
        out.times.append(c.t_ns)
        out.counts.append(k)
        if c.content and out.first_content_ns is None:
            out.first_content_ns = c.t_ns
        if c.reasoning_only:
            out.reasoning_tokens += k
    _usage_reasoning(out, usage)
    return out


def resolve_plain(times: Sequence[int], usage: dict | None, empty_finish_ns: int | None) -> Counted:
    """`resolve` for a stream whose every chunk carries one token's text and no token ids or usage
    marks, with perhaps a text-less finish chunk as the last chunk (client.plain): the same Counted,
    without a Chunk per event. One per chunk; a larger final count first makes the finish chunk a
    token, then spreads the rest over the chunks after the first; a smaller one changes nothing."""
    total = (usage or {}).get("completion_tokens")
    out = Counted(times=list(times), counts=[1] * len(times), source="chunks",
                  first_content_ns=times[0] if times else None)
    if isinstance(total, int) and _is_count(total) and total != len(times):
        out.source = "chunks+usage"
        if total > len(times) and empty_finish_ns is not None:
            out.times.append(empty_finish_ns)
            out.counts.append(1)
        missing, bearing = total - len(out.counts), len(out.counts) - 1
        if missing > 0 and bearing > 0:
            share, extra = divmod(missing, bearing)
            out.counts[1:] = [1 + share + (1 if n < extra else 0) for n in range(bearing)]
    if not out.counts:
        out.source = "none"
    _usage_reasoning(out, usage)
    return out


def _usage_reasoning(out: Counted, usage: dict | None) -> None:
    details = (usage or {}).get("completion_tokens_details")
    if isinstance(details, dict) and _is_count(details.get("reasoning_tokens")) and details["reasoning_tokens"]:
        out.reasoning_tokens = details["reasoning_tokens"]
