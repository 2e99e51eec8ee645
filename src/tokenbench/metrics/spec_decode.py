"""Speculative decoding over a cell: acceptance rate and mean acceptance length from the server's
counters (their increase over the measured phase), as vLLM defines them; or, where an engine has only
gauges (SGLang), their mean over the cell's scrapes. Pure. Formulas: docs/metrics.md, "Speculative decoding".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COUNTERS = "counters"
GAUGES = "gauges"


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


def from_counters(drafts: float | None, draft_tokens: float | None, accepted: float | None) -> Acceptance | None:
    """vLLM's derivation (also llama.cpp's counters): rate = accepted / draft tokens, mean acceptance
    length = 1 + accepted / drafts. None when nothing was drafted (or a counter is missing)."""
    if drafts is None or draft_tokens is None or accepted is None or not drafts or not draft_tokens:
        return None
    return Acceptance(accepted / draft_tokens, 1 + accepted / drafts, drafts, draft_tokens, accepted)


def from_gauges(rate: float | None, length: float | None) -> Acceptance | None:
    """SGLang: its acceptance gauges (per decode log window), averaged over the cell's scrapes."""
    if rate is None and length is None:
        return None
    return Acceptance(rate, length, source=GAUGES)
