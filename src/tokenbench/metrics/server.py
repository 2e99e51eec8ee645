"""What the server itself says about a cell. Its own counters over the measured phase (their increase over it), read
as the summary's `counters` group: the prefix-cache hit rate (tokens looked up and tokens found), beside the rate
from the responses' `cached_tokens` that the tally computes; speculative decoding's acceptance rate and
mean acceptance length, as vLLM defines them, or, where an engine has only gauges (SGLang), their mean
over the cell's scrapes (the cell's monitor reads them as `Readings`; metrics/cell.finish makes the group of them).
Its request-time histograms' means over the phase (the `server_means` group). Its span of each request, joined by the
trace id the request carried: the clock offset, each request's phases and the cell's phase ledger (the `phases`
group). Pure. Formulas: docs/metrics.md, "Prefix-cache hit rate", "Speculative
decoding", "Where the time went".
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenbench.client.records import RequestRecord
from tokenbench.metrics.request import percentile
from tokenbench.metrics.summary_groups import PHASES, PhaseLedger, PhaseName, ServerCounters, ServerMeans

COUNTERS = "counters"
GAUGES = "gauges"


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


def hits_from_counters(queries: float | None, hits: float | None) -> CounterHits | None:
    if queries is None or hits is None:
        return None
    return CounterHits(queries, hits)


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


def acceptance_from_counters(drafts: float | None, draft_tokens: float | None, accepted: float | None) -> Acceptance | None:
    """vLLM's derivation (also llama.cpp's counters): rate = accepted / draft tokens, mean acceptance
    length = 1 + accepted / drafts. None when nothing was drafted (or a counter is missing)."""
    if drafts is None or draft_tokens is None or accepted is None or not drafts or not draft_tokens:
        return None
    return Acceptance(accepted / draft_tokens, 1 + accepted / drafts, drafts, draft_tokens, accepted)


def acceptance_from_gauges(rate: float | None, length: float | None) -> Acceptance | None:
    """SGLang: its acceptance gauges (per decode log window), averaged over the cell's scrapes."""
    if rate is None and length is None:
        return None
    return Acceptance(rate, length, source=GAUGES)


@dataclass(frozen=True)
class Readings:
    """What the server's counters and settings said over a cell's measured phase (study/monitoring.py):
    prefix-cache hits, speculative acceptance, the server's speculative decoding and why its figures are
    not what text gets (the `§` mark), and the window the increases span (`server_counters_*` keys)."""

    hits: CounterHits | None = None
    acceptance: Acceptance | None = None
    speculative: str | None = None       # the server's speculative decoding ("ngram, 3 draft tokens")
    random_prompts: str | None = None    # random prompts to a speculative server, and why that matters
    window: dict[str, float | None] = field(default_factory=dict)


def counters(r: Readings, cache_hit_rate: float | None) -> tuple[dict[str, float], ServerCounters | None]:
    """The summary's `cache_hit_rate` and `total_cached_tokens` from the counters when no response reported
    cached tokens (`cache_hit_rate` None), and the `counters` group: the counters' figures and
    `cache_hit_source` (which one `cache_hit_rate` is); None when the server said nothing of them."""
    out: dict[str, Any] = r.hits.summary() if r.hits else {}
    fill: dict[str, float] = {}
    if cache_hit_rate is not None:
        out["cache_hit_source"] = "usage"
    elif r.hits is not None and r.hits.rate is not None:
        fill = {"cache_hit_rate": r.hits.rate, "total_cached_tokens": r.hits.hit_tokens}
        out["cache_hit_source"] = "counters"
    out |= r.acceptance.summary() if r.acceptance else {}
    if r.speculative:
        out["speculative"] = r.speculative
        out |= {"spec_random_prompts": r.random_prompts} if r.random_prompts else {}
    return fill, ServerCounters.model_validate({**out, **r.window}) if out else None


# ---- the server's spans: each request's own timings, joined by its trace id (docs/metrics.md "Where the time
# went"). The server stamps its span on its own clock, the client on perf_counter_ns. Each joined request is a
# round trip in Cristian's sense: the client sent at s and read the first token at c; the server saw the request
# arrive at a and emitted the first token at f = a + server TTFT. The offset theta = server clock - client clock
# then lies in [f - c, a - s], as wide as the request's round trip outside the server (client TTFT - server
# TTFT). The cell's offset is the middle of the intersection of its requests' intervals, +- half its width:
# never looser than the smallest round trip alone (the Ray path's rule, load/ray_workers.clock_offset). Where
# the intervals do not meet (a clock stepped, or a server stamping out of order), the smallest round trip's
# middle is used and the offset is marked inconsistent.

@dataclass(frozen=True, slots=True, kw_only=True)
class ServerTiming:
    """What a server's span says of one request: its arrival on the server's clock (Unix ns) and its phases (ns);
    queue, prefill and decode None where the span does not tell them."""

    arrival_ns: int
    ttft_ns: int
    e2e_ns: int
    queue_ns: int | None = None
    prefill_ns: int | None = None
    decode_ns: int | None = None
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """The server's clock minus the client's, +- error_ns; `consistent` False where the requests' intervals do
    not intersect (the smallest round trip's middle is used then)."""

    offset_ns: int
    error_ns: int
    consistent: bool
    requests: int


def attach(r: RequestRecord, timing: ServerTiming) -> RequestRecord:
    """The record with the server's timings of it (the clock offset is set by `apply_offset`)."""
    r.server_arrival_ns, r.server_ttft_ns, r.server_e2e_ns = timing.arrival_ns, timing.ttft_ns, timing.e2e_ns
    r.server_queue_ns, r.server_prefill_ns, r.server_decode_ns = timing.queue_ns, timing.prefill_ns, timing.decode_ns
    r.server_request_id = timing.request_id
    return r


def apply_offset(r: RequestRecord, offset: ClockOffset | None) -> RequestRecord:
    if offset is not None and r.server_arrival_ns is not None:
        r.clock_offset_ns, r.clock_offset_error_ns = offset.offset_ns, offset.error_ns
    return r


def offset_bounds(r: RequestRecord) -> tuple[int, int] | None:
    """[f - c, a - s]: where the server's clock minus the client's lies, from one joined request (None when the
    request has no span or no token)."""
    if r.server_arrival_ns is None or r.server_ttft_ns is None or not r.token_times_ns:
        return None
    return r.server_arrival_ns + r.server_ttft_ns - r.token_times_ns[0], r.server_arrival_ns - r.sent_ns


class _Bounds:
    """The offset's bounds over a cell's joined requests, as they come: the intersection [lo, hi] and the smallest
    round trip (the fallback where the intersection is empty)."""

    def __init__(self) -> None:
        self.lo: int | None = None
        self.hi: int | None = None
        self.best: tuple[int, int] | None = None
        self.n = 0

    def add(self, b: tuple[int, int]) -> None:
        self.lo = b[0] if self.lo is None else max(self.lo, b[0])
        self.hi = b[1] if self.hi is None else min(self.hi, b[1])
        if self.best is None or b[1] - b[0] < self.best[1] - self.best[0]:
            self.best = b
        self.n += 1

    def offset(self) -> ClockOffset | None:
        if self.lo is None or self.hi is None or self.best is None:
            return None
        if self.lo <= self.hi:
            mid = self.lo + (self.hi - self.lo) // 2
            return ClockOffset(mid, self.hi - mid, True, self.n)
        lo, hi = self.best
        mid = lo + (hi - lo) // 2
        return ClockOffset(mid, abs(hi - mid), False, self.n)


def clock_offset(bounds: Iterable[tuple[int, int]]) -> ClockOffset | None:
    """The offset from every joined request's bounds (`offset_bounds`); None without any."""
    acc = _Bounds()
    for b in bounds:
        acc.add(b)
    return acc.offset()


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestPhases:
    """One request's phases, ns on the client's clock (None where the span does not tell it): the first five sum
    to the client's TTFT; `error_ns` is the clock offset's, by which network and delivery may each be off
    (in opposite directions)."""

    network: int
    queue: int | None
    prefill: int | None
    server_other: int | None
    delivery: int
    decode: int | None
    decode_other: int | None
    last_delivery: int
    error_ns: int

    def get(self, phase: PhaseName) -> int | None:
        return getattr(self, phase)


def _residual(total: int, *parts: int | None) -> int | None:
    return None if any(p is None for p in parts) else total - sum(p for p in parts if p is not None)


def phases_of(r: RequestRecord, offset: int | None = None) -> RequestPhases | None:
    """The phases of a joined request whose clock offset is known (or given: `offset`; docs/metrics.md "Where the
    time went")."""
    theta = r.clock_offset_ns if offset is None else offset
    if (r.server_arrival_ns is None or theta is None or r.server_ttft_ns is None
            or r.server_e2e_ns is None or not r.token_times_ns):
        return None
    arrival = r.server_arrival_ns - theta          # on the client's clock
    ttft, e2e = r.server_ttft_ns, r.server_e2e_ns
    decode = r.server_decode_ns
    return RequestPhases(
        network=arrival - r.sent_ns, queue=r.server_queue_ns, prefill=r.server_prefill_ns,
        server_other=_residual(ttft, r.server_queue_ns, r.server_prefill_ns),
        delivery=r.token_times_ns[0] - (arrival + ttft), decode=decode,
        decode_other=_residual(e2e - ttft, decode), last_delivery=r.token_times_ns[-1] - (arrival + e2e),
        error_ns=r.clock_offset_error_ns or 0)


def delivery_flagged(p: RequestPhases, ttft_ns: int, tolerance_ms: Callable[[float], float]) -> bool:
    """The client read the first token later after the server's first-token time than the client's TTFT tolerance,
    beyond the clock offset's error (the ledger counts these: `CellJoin.ledger`): a direct check of the client's
    first-token stamp against the server's own."""
    return (p.delivery - p.error_ns) / 1e6 > tolerance_ms(ttft_ns / 1e6)


@dataclass(frozen=True, slots=True)
class SpanCounts:
    """What the OTLP receiver got over a cell, beside the requests it joined (study/traces.py)."""

    unjoined_spans: int = 0          # request spans whose trace id is no request of the cell
    other_spans: int = 0             # spans that are not a request's (model loading, a slice unused here)
    dropped_payloads: int = 0        # export payloads that could not be decoded (malformed, hostile), dropped


SHIFT: dict[PhaseName, int] = {"network": -1, "delivery": 1, "last_delivery": 1}   # how a phase moves with the offset


class CellJoin:
    """One pass over a cell's records, each with its span's timings attached or none: the clock offset's bounds
    from every joined request (warmup too), and the phases of the measured ok ones taken at offset 0 (network and
    the deliveries move with the offset, the server's own phases do not), shifted when the offset is known."""

    def __init__(self) -> None:
        self.bounds = _Bounds()
        self.values: dict[PhaseName, array] = {p: array("q") for p in PHASES}
        self.ttft = array("q")
        self.requests = 0

    def add(self, r: RequestRecord) -> None:
        b = offset_bounds(r)
        if b is not None:
            self.bounds.add(b)
        if r.phase != "measure" or not r.ok:
            return
        self.requests += 1
        p = phases_of(r, 0)
        if p is None or r.ttft_ns is None:
            return
        for name in PHASES:
            v = p.get(name)
            if v is not None:
                self.values[name].append(v)
        self.ttft.append(r.ttft_ns)

    def ledger(self, counts: SpanCounts, tolerance_ms: Callable[[float], float]) -> PhaseLedger:
        """The ledger at the offset the bounds give (`tolerance_ms`: the client's TTFT tolerance at a TTFT)."""
        joined, off = len(self.ttft), self.bounds.offset()
        base = PhaseLedger(requests=self.requests, joined=joined, missing=self.requests - joined,
                           **dataclasses.asdict(counts))
        if not joined or off is None:
            return base
        ns = {p: np.frombuffer(c, np.int64) + SHIFT.get(p, 0) * off.offset_ns for p, c in self.values.items() if c}
        ttft_ms = np.frombuffer(self.ttft, np.int64) / 1e6
        late = (ns["delivery"] - off.error_ns) / 1e6 > np.array([tolerance_ms(t) for t in ttft_ms])
        backwards = np.minimum(ns["network"], ns["delivery"]) < -off.error_ns
        return base.model_copy(update={
            **_stats(ns), "clock_offset_ms": off.offset_ns / 1e6, "clock_offset_error_ms": off.error_ns / 1e6,
            "clock_consistent": not backwards.any(), "client_ttft_mean_ms": math.fsum(ttft_ms) / joined,
            "delivery_flagged": int(late.sum()), "delivery_max_ms": float(ns["delivery"].max()) / 1e6})


def _stats(ns: dict[PhaseName, np.ndarray]) -> dict[str, dict[PhaseName, float]]:
    """Mean, p50 and p99 of each phase (ms)."""
    out: dict[str, dict[PhaseName, float]] = {"mean_ms": {}, "p50_ms": {}, "p99_ms": {}}
    for name, values in ns.items():
        ms = np.sort(values) / 1e6
        out["mean_ms"][name] = math.fsum(ms) / len(ms)
        out["p50_ms"][name], out["p99_ms"][name] = percentile(ms, 50), percentile(ms, 99)
    return out


def ledger(records: Iterable[RequestRecord], counts: SpanCounts, tolerance_ms: Callable[[float], float]
           ) -> PhaseLedger:
    """The ledger over a cell's records, their spans' timings attached (the offset found from them)."""
    join = CellJoin()
    for r in records:
        join.add(r)
    return join.ledger(counts, tolerance_ms)


HISTOGRAM_ROLES = ("queue", "prefill", "decode", "inference", "ttft", "e2e")


def server_means(increases: dict[str, float]) -> ServerMeans | None:
    """The means from the histograms' increases over the window (`{role}_sum` in seconds, `{role}_count`);
    None when no histogram counted a request."""
    means = {f"{role}_ms": increases[f"{role}_sum"] / n * 1e3 for role in HISTOGRAM_ROLES
             if (n := increases.get(f"{role}_count") or 0) > 0 and f"{role}_sum" in increases}
    if not means:
        return None
    count = increases.get("e2e_count")
    return ServerMeans(**means, **({"requests": count} if count is not None else {}))
