"""Prefix-cache hit rate of a cell from the engine's counters (the increase over the measured phase of
tokens looked up and tokens found), beside the rate from the responses' `cached_tokens` that the
summary tally computes. Pure. Formulas: docs/metrics.md, "Prefix-cache hit rate".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenbench.metrics.cell_summary import CellSummary


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


def from_counters(queries: float | None, hits: float | None) -> CounterHits | None:
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
        filled = summary.with_(cache_hit_rate=counters.rate, total_cached_tokens=counters.hit_tokens)
        return filled, {**out, "cache_hit_source": "counters"}
    return summary, out
