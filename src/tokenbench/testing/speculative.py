"""Speculative decoding in the reference server, pure: which prompts look like text, and the steps.

Each decode step drafts `k` tokens; each draft token is accepted with probability p until the first
rejection, and the step emits the accepted tokens plus one (the target model's own token). p is
`spec_accept_text` for a text-like prompt and `spec_accept_random` otherwise. A prompt is text-like
when at most TEXT_DISTINCT_MAX of its token ids are distinct: text repeats its words, random ids over
a large vocabulary almost never repeat (n ids drawn from V repeat little while n << V).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

TEXT_DISTINCT_MAX = 0.9


def text_like(ids: Sequence[int]) -> bool:
    return len(set(ids)) <= TEXT_DISTINCT_MAX * len(ids)


def mean_tokens_per_step(p: float, k: int) -> float:
    """Expected tokens one step emits: 1 + p + p^2 + ... + p^k (before any max_tokens cut)."""
    return sum(p ** i for i in range(k + 1))


@dataclass(slots=True)
class SpecPlan:
    """The steps of one answer: tokens per step (the first is the prefill's token) and acceptances."""

    sizes: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)   # per decode step: accepted draft tokens

    @property
    def drafts(self) -> int:
        return len(self.accepted)


def plan_steps(n_out: int, k: int, p: float, rng: random.Random) -> SpecPlan:
    """Steps emitting `n_out` tokens: 1 from prefill, then 1 + accepted per step (accepted cut so the
    answer ends at exactly n_out)."""
    plan = SpecPlan(sizes=[1])
    left = n_out - 1
    while left > 0:
        accepted = 0
        while accepted < k and rng.random() < p:
            accepted += 1
        accepted = min(accepted, left - 1)
        plan.sizes.append(accepted + 1)
        plan.accepted.append(accepted)
        left -= accepted + 1
    return plan
