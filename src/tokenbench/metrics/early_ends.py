"""Requests the server ended before their asked output length where the request could not forbid it (the
server refused ignore_eos and min_tokens: load/probe.py). They are not wrong lengths, and not hidden: the
cell counts them and gives the distribution of their output lengths. Formulas: docs/metrics.md ("Early
ends")."""

from __future__ import annotations

import numpy as np

from tokenbench.metrics.stats import percentile
from tokenbench.metrics.summary_groups import Group, Number


class EarlyEnds(Group):
    """Over ok requests whose output (usage, else counted) is shorter than asked without a length error."""

    ended_early: Number = 0                        # how many
    ended_early_share: float | None = None         # of the ok requests
    ended_early_out_min: Number | None = None      # their output lengths, tokens
    ended_early_out_median: float | None = None
    ended_early_out_mean: float | None = None
    ended_early_out_max: Number | None = None


def early_ends(outs: np.ndarray, ok: int) -> EarlyEnds | None:
    """The group over the early-ended requests' output lengths; None when none ended early."""
    if not len(outs):
        return None
    x = np.sort(outs.astype(np.float64))
    return EarlyEnds(ended_early=len(x), ended_early_share=len(x) / ok if ok else None,
                     ended_early_out_min=int(x[0]), ended_early_out_median=percentile(x, 50),
                     ended_early_out_mean=float(x.mean()), ended_early_out_max=int(x[-1]))
