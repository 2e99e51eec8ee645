"""Percentiles and distribution summaries (numpy's default linear interpolation)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

PERCENTILES = (50, 90, 95, 99)


def percentile(sorted_values: Sequence[float] | np.ndarray, q: float) -> float:
    """Linear interpolation between closest ranks, as numpy.percentile(method="linear")."""
    if len(sorted_values) == 0:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


def describe(values: Sequence[float] | np.ndarray, name: str, unit: str = "ms") -> dict[str, float]:
    """mean/median/p90/p95/p99/max/std keyed the way vLLM's `bench serve` names them (sorted as one
    float64 array: a cell's millions of ITLs cost 8 bytes each, not a Python float each)."""
    vals = np.sort(np.asarray(values, dtype=np.float64))
    n = len(vals)
    mean = float(vals.sum()) / n if n else math.nan
    std = float(np.sqrt(((vals - mean) ** 2).sum() / n)) if n else math.nan
    out = {
        f"mean_{name}_{unit}": mean,
        f"median_{name}_{unit}": float(percentile(vals, 50)),
        f"std_{name}_{unit}": std,
        f"min_{name}_{unit}": float(vals[0]) if n else math.nan,
        f"max_{name}_{unit}": float(vals[-1]) if n else math.nan,
    }
    for q in PERCENTILES:
        out[f"p{q}_{name}_{unit}"] = float(percentile(vals, q))
    return out
