"""Whether two sides' runs of one cell may be compared at all: the facts that vary between runs and move
figures without any change of the server under test. `compare` and `gate` refuse a verdict, with the
reason, where one of them differs between the sides, and state (without refusing) where the engine's
fingerprint differs: another engine build is what a gate is for.

The seam: `SideFacts` holds what a run recorded of one cell, each field optional (None: not recorded);
`facts_of` reads what the store holds today, and `refusals` judges whatever is present. A fact newly
recorded is a field here and one line in `facts_of`; the judgement reads it where known."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tokenbench.judge.views import RunData
from tokenbench.store.rows import CellRow

CacheState = Literal["cold", "warm", "unknown"]
WARM_SHARE = 0.05        # a cell whose server served this share of its prompt tokens from its prefix cache is warm
HOST_GAP = 0.10          # other processes' share of the host's CPU that may differ between the sides


@dataclass(frozen=True)
class SideFacts:
    """What one run recorded of one cell that varies between runs (None or "unknown": not recorded)."""

    cache: CacheState = "unknown"       # the prefix cache: cold (fresh prompts), warm (prompts it had seen)
    cached_share: float | None = None   # the share of prompt tokens the server said it served from cache
    host_busy: float | None = None      # the share of the host's CPU that processes other than the client
    #                                     and the server took over the cell
    fingerprint: str | None = None      # the engine build: version, model, flags, image


Reason = Literal["cache", "host"]


@dataclass(frozen=True)
class Refusal:
    """A verdict refused: the fact that differs, and each side's values of it (baseline first)."""

    reason: Reason
    values: tuple[tuple[str, ...], tuple[str, ...]]


def cache_state(run: RunData, cell: CellRow) -> tuple[CacheState, float | None]:
    """The cell's prefix-cache state from the server's own counters (judge/fairness reads the same): warm
    when it served at least WARM_SHARE of the prompt tokens from its cache, cold below; unknown where the
    server reported no prompt tokens (no counter)."""
    cached = prompt = 0
    for part in cell.repeats or (cell,):
        counted = run.cache.get(part.id)
        if counted is None or not counted[2] or not counted[1]:
            return "unknown", None
        cached, prompt = cached + counted[0], prompt + counted[1]
    share = cached / prompt
    return ("warm" if share >= WARM_SHARE else "cold"), share


def facts_of(run: RunData, cell: CellRow, fingerprint: str | None = None) -> SideFacts:
    state, share = cache_state(run, cell)
    return SideFacts(cache=state, cached_share=share, fingerprint=fingerprint)


def _cache(base: Sequence[SideFacts], cand: Sequence[SideFacts]) -> Refusal | None:
    states = {f.cache for f in (*base, *cand)} - {"unknown"}
    if len(states) < 2:
        return None
    return Refusal("cache", (tuple(_cache_text(f) for f in base), tuple(_cache_text(f) for f in cand)))


def _cache_text(f: SideFacts) -> str:
    return f.cache if f.cached_share is None else f"{f.cache} ({100 * f.cached_share:.0f} %)"


def _host(base: Sequence[SideFacts], cand: Sequence[SideFacts]) -> Refusal | None:
    a = [f.host_busy for f in base if f.host_busy is not None]
    b = [f.host_busy for f in cand if f.host_busy is not None]
    if not a or not b or abs(max(a + b) - min(a + b)) <= HOST_GAP:
        return None
    return Refusal("host", (tuple(f"{100 * x:.0f} %" for x in a), tuple(f"{100 * x:.0f} %" for x in b)))


def refusals(base: Sequence[SideFacts], cand: Sequence[SideFacts]) -> list[Refusal]:
    """Why the two sides' runs of a cell cannot be compared: their prefix-cache states differ (one cold, one
    warm), or other processes took a share of the host's CPU that differs by more than HOST_GAP."""
    return [r for r in (_cache(base, cand), _host(base, cand)) if r is not None]


def fingerprints_differ(base: Sequence[SideFacts], cand: Sequence[SideFacts]) -> bool:
    """The engine builds differ (stated, never refused: another build is what a gate compares)."""
    known = {f.fingerprint for f in (*base, *cand)} - {None}
    return len(known) > 1
