"""Per-request metrics, pure functions of a RequestRecord. Formulas: docs/metrics.md."""

from __future__ import annotations

from tokenbench.client.records import RequestRecord
from tokenbench.spec.bench import SLO

NS_PER_MS = 1_000_000


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
