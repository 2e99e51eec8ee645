"""What the server's own counters say about a cell's measured phase (their increase over it), read as the
summary's `counters` group: the prefix-cache hit rate (tokens looked up and tokens found), beside the rate
from the responses' `cached_tokens` that the tally computes; speculative decoding's acceptance rate and
mean acceptance length, as vLLM defines them, or, where an engine has only gauges (SGLang), their mean
over the cell's scrapes. Pure. Formulas: docs/metrics.md, "Prefix-cache hit rate", "Speculative decoding".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenbench.metrics.cell_summary import CellSummary

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


def fill_in(summary: CellSummary, counters: CounterHits | None) -> tuple[CellSummary, dict[str, Any]]:
    """The summary with `cache_hit_rate` (and `total_cached_tokens`) from the counters when no response
    reported cached_tokens, and the server-counter keys: the counters' figures and `cache_hit_source`, which
    one `cache_hit_rate` is."""
    out: dict[str, Any] = counters.summary() if counters else {}
    if summary.cache_hit_rate is not None:
        return summary, {**out, "cache_hit_source": "usage"}
    if counters is not None and counters.rate is not None:
        filled = summary.model_copy(update={"cache_hit_rate": counters.rate, "total_cached_tokens": counters.hit_tokens})
        return filled, {**out, "cache_hit_source": "counters"}
    return summary, out


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
