"""What the server's own counters say about a cell's measured phase (their increase over it), read as the
summary's `counters` group: the prefix-cache hit rate (tokens looked up and tokens found), beside the rate
from the responses' `cached_tokens` that the tally computes; speculative decoding's acceptance rate and
mean acceptance length, as vLLM defines them, or, where an engine has only gauges (SGLang), their mean
over the cell's scrapes. The cell's monitor reads them (study/monitoring.py) as `Readings`; metrics/cell.finish
makes the group of them (`counters`). Pure. Formulas: docs/metrics.md, "Prefix-cache hit rate", "Speculative
decoding".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenbench.metrics.summary_groups import ServerCounters

COUNTERS = "counters"
GAUGES = "gauges"


@dataclass(frozen=True, slots=True)
class CounterHits:
    queried_tokens: float          # prompt tokens the cache was asked for (vLLM prefix_cache_queries)
    hit_tokens: float              # of them, found in the cache (vLLM prefix_cache_hits)

    @property
    def rate(self) -> float | None:
        return self.hit_tokens / self.queried_tokens if self.queried_tokens else None

    def summary(self) -> dict[str, Any]:
        """The server-counter keys (metrics/summary_groups.ServerCounters)."""
        return {"server_prefix_cache_queries": self.queried_tokens, "server_prefix_cache_hits": self.hit_tokens,
                "server_prefix_cache_hit_rate": self.rate}


def hits_from_counters(queries: float | None, hits: float | None) -> CounterHits | None:
    if queries is None or hits is None:
        return None
    return CounterHits(queries, hits)


@dataclass(frozen=True, slots=True)
class Acceptance:
    rate: float | None             # accepted draft tokens / draft tokens
    mean_length: float | None      # tokens per verify step, the target model's own token included
    drafts: float | None = None    # verify steps that drafted (counters only)
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    source: str = COUNTERS         # "counters" (increase over the cell) | "gauges" (mean of scrapes)

    def summary(self) -> dict[str, Any]:
        """The server-counter keys of the cell summary (metrics/summary_groups.ServerCounters; docs/metrics.md)."""
        out = {"spec_acceptance_rate": self.rate, "spec_mean_acceptance_length": self.mean_length,
               "spec_source": self.source}
        if self.source == COUNTERS:
            out |= {"spec_drafts": self.drafts, "spec_draft_tokens": self.draft_tokens,
                    "spec_accepted_tokens": self.accepted_tokens}
        return out


def acceptance_from_counters(drafts: float | None, draft_tokens: float | None, accepted: float | None) -> Acceptance | None:
    """vLLM's derivation (also llama.cpp's counters): rate = accepted / draft tokens, mean acceptance
    length = 1 + accepted / drafts. None when nothing was drafted (or a counter is missing)."""
    if drafts is None or draft_tokens is None or accepted is None or not drafts or not draft_tokens:
        return None
    return Acceptance(accepted / draft_tokens, 1 + accepted / drafts, drafts, draft_tokens, accepted)


def acceptance_from_gauges(rate: float | None, length: float | None) -> Acceptance | None:
    """SGLang: its acceptance gauges (per decode log window), averaged over the cell's scrapes."""
    if rate is None and length is None:
        return None
    return Acceptance(rate, length, source=GAUGES)


@dataclass(frozen=True)
class Readings:
    """What the server's counters and settings said over a cell's measured phase (study/monitoring.py):
    prefix-cache hits, speculative acceptance, the server's speculative decoding and why its figures are
    not what text gets (the `§` mark), and the window the increases span (`server_counters_*` keys)."""

    hits: CounterHits | None = None
    acceptance: Acceptance | None = None
    speculative: str | None = None       # the server's speculative decoding ("ngram, 3 draft tokens")
    random_prompts: str | None = None    # random prompts to a speculative server, and why that matters
    window: dict[str, float | None] = field(default_factory=dict)


def counters(r: Readings, cache_hit_rate: float | None) -> tuple[dict[str, float], ServerCounters | None]:
    """The summary's `cache_hit_rate` and `total_cached_tokens` from the counters when no response reported
    cached tokens (`cache_hit_rate` None), and the `counters` group: the counters' figures and
    `cache_hit_source` (which one `cache_hit_rate` is); None when the server said nothing of them."""
    out: dict[str, Any] = r.hits.summary() if r.hits else {}
    fill: dict[str, float] = {}
    if cache_hit_rate is not None:
        out["cache_hit_source"] = "usage"
    elif r.hits is not None and r.hits.rate is not None:
        fill = {"cache_hit_rate": r.hits.rate, "total_cached_tokens": r.hits.hit_tokens}
        out["cache_hit_source"] = "counters"
    out |= r.acceptance.summary() if r.acceptance else {}
    if r.speculative:
        out["speculative"] = r.speculative
        out |= {"spec_random_prompts": r.random_prompts} if r.random_prompts else {}
    return fill, ServerCounters.model_validate({**out, **r.window}) if out else None
