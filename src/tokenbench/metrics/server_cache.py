"""A cell's prefix-cache hit rate by the server's own counters: the increase over the measured phase of
the prompt tokens the cache was asked about and of those it found (vLLM `prefix_cache_queries` /
`prefix_cache_hits`, SGLang `prompt_tokens` / `cached_tokens`), beside the rate the responses'
`cached_tokens` give (the tally's `cache_hit_rate`). Pure. Formula: docs/metrics.md, "Prefix-cache hit rate".
"""

from __future__ import annotations

from typing import ClassVar

from tokenbench.metrics.summary_groups import Group, Number


class ServerCache(Group):
    """Keys `server_prefix_cache_queries`, `_hits`, `_hit_rate`, and `_window_s`: the seconds between the
    two reads of the counters (the measured phase's start and the cell's end)."""

    PREFIX: ClassVar[str] = "server_prefix_cache_"
    queries: Number | None = None
    hits: Number | None = None
    hit_rate: float | None = None
    window_s: float | None = None

    @classmethod
    def of(cls, queries: float | None, hits: float | None, window_s: float | None) -> ServerCache | None:
        """The figures from the counters' increases; None when the server does not count both."""
        if queries is None or hits is None:
            return None
        return cls(queries=queries, hits=hits, hit_rate=hits / queries if queries else None, window_s=window_s)
