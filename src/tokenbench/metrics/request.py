"""Per-request figures, pure functions of a RequestRecord, and the distribution statistics over many of them
(percentiles and `describe`, numpy's default linear interpolation). Formulas: docs/metrics.md."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tokenbench.client.records import RequestRecord
from tokenbench.lazy import lazy_module
from tokenbench.spec.bench import SLO

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")   # imported where first used (tokenbench/lazy.py)

NS_PER_MS = 1_000_000
PERCENTILES = (50, 90, 95, 99)


def ttft_ms(r: RequestRecord) -> float | None:
    """Time to first token: first token-bearing chunk arrival - send."""
    return r.ttft_ns / NS_PER_MS if r.ttft_ns is not None else None


def ttfc_ms(r: RequestRecord) -> float | None:
    """Time to first content token: first answer (non-reasoning) token arrival - send."""
    return r.ttfc_ns / NS_PER_MS if r.ttfc_ns is not None else None


def e2el_ms(r: RequestRecord) -> float:
    """End-to-end latency: end of stream - send."""
    return r.e2el_ns / NS_PER_MS


def tpot_ms(r: RequestRecord) -> float | None:
    """Time per output token after the first: (last token - first token) / (output_tokens - 1); it ends at
    the last token-bearing chunk, as vLLM's (the stream's tail after it is `stream_tail_ms`)."""
    if r.ttft_ns is None or r.output_tokens < 2:
        return None
    return (r.token_times_ns[-1] - r.token_times_ns[0]) / (r.output_tokens - 1) / NS_PER_MS


def stream_tail_ms(r: RequestRecord) -> float | None:
    """Stream tail: end of stream - last token-bearing chunk (None without a token)."""
    return (r.end_ns - r.token_times_ns[-1]) / NS_PER_MS if r.token_times_ns else None


def ntpot_ms(r: RequestRecord) -> float | None:
    """Normalised time per output token: E2EL / output_tokens."""
    return r.e2el_ns / r.output_tokens / NS_PER_MS if r.output_tokens else None


def itl_ms(r: RequestRecord) -> list[float]:
    """Inter-token latencies: gaps between consecutive token-bearing chunks."""
    t = r.token_times_ns
    return [(b - a) / NS_PER_MS for a, b in zip(t, t[1:], strict=False)]


def queue_ms(r: RequestRecord) -> float:
    """Client queue time: actual send - intended start (late sends in open-loop runs), less any
    connection set-up (its own figure, `connect_ms`)."""
    return r.queue_ns / NS_PER_MS


def slo_tpot_ms(r: RequestRecord) -> float | None:
    """TPOT as vLLM's goodput judges it: 0 for a request with fewer than 2 output tokens."""
    return 0.0 if r.ttft_ns is not None and r.output_tokens < 2 else tpot_ms(r)


def connect_ms(r: RequestRecord) -> float | None:
    """Connection set-up of a request that opened a new connection (None when one was reused)."""
    return r.connect_ns / NS_PER_MS if r.connect_ns else None


def meets_slo(r: RequestRecord, slo: SLO) -> bool:
    """True when a completed request satisfies every SLO that is set (TPOT as `slo_tpot_ms`)."""
    if not r.ok:
        return False
    checks = ((slo.ttft_ms, ttft_ms(r)), (slo.tpot_ms, slo_tpot_ms(r)), (slo.e2el_ms, e2el_ms(r)))
    return all(limit is None or (value is not None and value <= limit) for limit, value in checks)


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
