"""Percentiles and distribution summaries (numpy's default linear interpolation, without numpy)."""

from __future__ import annotations

import math
from collections.abc import Sequence

PERCENTILES = (50, 90, 95, 99)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks, as numpy.percentile(method="linear")."""
    if not sorted_values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def describe(values: Sequence[float], name: str, unit: str = "ms") -> dict[str, float]:
    """mean/median/p90/p95/p99/max/std keyed the way vLLM's `bench serve` names them."""
    vals = sorted(values)
    n = len(vals)
    mean = sum(vals) / n if n else math.nan
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / n) if n else math.nan
    out = {
        f"mean_{name}_{unit}": mean,
        f"median_{name}_{unit}": percentile(vals, 50),
        f"std_{name}_{unit}": std,
        f"min_{name}_{unit}": vals[0] if n else math.nan,
        f"max_{name}_{unit}": vals[-1] if n else math.nan,
    }
    for q in PERCENTILES:
        out[f"p{q}_{name}_{unit}"] = percentile(vals, q)
    return out
