"""Where a request's time went: the server's own timings (its OpenTelemetry span, joined to the request by the
trace id the request carried) set against the client's stamps, per request and per cell. Pure functions of
records; formulas: docs/metrics.md, "Where the time went".

The server stamps its span on its own clock, the client on perf_counter_ns. Each joined request is a round
trip in Cristian's sense: the client sent at s and received the first token at c; the server saw the request
arrive at a and emitted the first token at f = a + server TTFT. The offset theta = server clock - client clock
then lies in [f - c, a - s] (the request arrived after it was sent; the token was emitted before it was
received), an interval as wide as the request's round trip outside the server (client TTFT - server TTFT). The
cell's offset is the middle of the intersection of its requests' intervals, +- half its width: never looser
than the smallest round trip alone (the Ray path's rule, load/ray_workers.clock_offset). Where the intervals do
not intersect (a clock stepped, or a server stamping out of order), the smallest round trip's middle is used and
the offset is marked inconsistent."""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from tokenbench.client.records import RequestRecord
from tokenbench.metrics.stats import percentile
from tokenbench.metrics.summary_groups import Group, Number

PhaseName = Literal["network", "queue", "prefill", "server_other", "delivery", "decode", "decode_other",
                    "last_delivery"]
PHASES: tuple[PhaseName, ...] = get_args(PhaseName)
# the phases whose sum is the client's TTFT, in the order the time passes
TTFT_PHASES: tuple[PhaseName, ...] = ("network", "queue", "prefill", "server_other", "delivery")
LedgerStat = Literal["mean", "p50", "p99"]


@dataclass(frozen=True, slots=True)
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


def clock_offset(bounds: Iterable[tuple[int, int]]) -> ClockOffset | None:
    """The offset from every joined request's bounds (`offset_bounds`); None without any."""
    seen = list(bounds)
    if not seen:
        return None
    lo, hi = max(b[0] for b in seen), min(b[1] for b in seen)
    if lo <= hi:
        mid = lo + (hi - lo) // 2
        return ClockOffset(mid, hi - mid, True, len(seen))
    best = min(seen, key=lambda b: b[1] - b[0])            # the smallest round trip
    mid = best[0] + (best[1] - best[0]) // 2
    return ClockOffset(mid, abs(best[1] - mid), False, len(seen))


@dataclass(frozen=True, slots=True)
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


def phases_of(r: RequestRecord) -> RequestPhases | None:
    """The phases of a joined request whose clock offset is known (docs/metrics.md "Where the time went")."""
    if (r.server_arrival_ns is None or r.clock_offset_ns is None or r.server_ttft_ns is None
            or r.server_e2e_ns is None or not r.token_times_ns):
        return None
    arrival = r.server_arrival_ns - r.clock_offset_ns          # on the client's clock
    ttft, e2e = r.server_ttft_ns, r.server_e2e_ns
    decode = r.server_decode_ns
    return RequestPhases(
        network=arrival - r.sent_ns, queue=r.server_queue_ns, prefill=r.server_prefill_ns,
        server_other=_residual(ttft, r.server_queue_ns, r.server_prefill_ns),
        delivery=r.token_times_ns[0] - (arrival + ttft), decode=decode,
        decode_other=_residual(e2e - ttft, decode), last_delivery=r.token_times_ns[-1] - (arrival + e2e),
        error_ns=r.clock_offset_error_ns or 0)


def delivery_flagged(p: RequestPhases, ttft_ns: int, tolerance_ms: Callable[[float], float]) -> bool:
    """The client received the first token later than the server emitted it by more than the client's TTFT
    tolerance, beyond the clock offset's error: the client's own delay shows (a direct check of its stamps)."""
    return (p.delivery - p.error_ns) / 1e6 > tolerance_ms(ttft_ns / 1e6)


class SpanCounts(Group):
    """What the OTLP receiver got over a cell, beside the requests it joined (sweep/traces.py)."""

    unjoined_spans: Number = 0       # request spans whose trace id is no request of the cell
    other_spans: Number = 0          # spans that are not a request's (model loading, a slice unused here)
    dropped_payloads: Number = 0     # export payloads that could not be decoded (malformed, hostile), dropped


class PhaseLedger(Group):
    """The cell's phase ledger from the server's spans: mean, p50 and p99 of each phase over the measured
    requests that joined a span, with how many joined, what else arrived, and the clock offset used. Keys are
    stored with the prefix `phase_` (`phase_mean_ms`: {"queue": ..., "prefill": ...})."""

    PREFIX = "phase_"
    requests: Number | None = None           # measured requests that finished ok
    joined: Number | None = None             # ... whose span arrived and was read
    missing: Number | None = None            # ... without one
    unjoined_spans: Number | None = None
    other_spans: Number | None = None
    dropped_payloads: Number | None = None
    clock_offset_ms: float | None = None     # server clock minus client clock
    clock_offset_error_ms: float | None = None
    clock_consistent: bool | None = None
    mean_ms: dict[PhaseName, float] | None = None
    p50_ms: dict[PhaseName, float] | None = None
    p99_ms: dict[PhaseName, float] | None = None
    client_ttft_mean_ms: float | None = None  # the joined requests' client TTFT: the sum of TTFT_PHASES' means
    delivery_flagged: Number | None = None   # joined requests whose delivery exceeds the client's TTFT tolerance
    delivery_max_ms: float | None = None

    def stat(self, phase: PhaseName, statistic: LedgerStat = "mean") -> float | None:
        table = {"mean": self.mean_ms, "p50": self.p50_ms, "p99": self.p99_ms}[statistic]
        return (table or {}).get(phase)

    @property
    def prefill_ms(self) -> float | None:
        """Mean server prefill per request (ms), the split cost figures use."""
        return self.stat("prefill")

    @property
    def decode_ms(self) -> float | None:
        """Mean server decode per request (ms)."""
        return self.stat("decode")


class _Columns:
    """Each phase's values over a cell's joined requests (int64, ns), the client TTFTs and the delivery flags."""

    def __init__(self) -> None:
        self.values: dict[PhaseName, array] = {p: array("q") for p in PHASES}
        self.ttft = array("q")
        self.flagged = 0
        self.backwards = 0          # requests with network or delivery below -error: the offset is inconsistent

    def add(self, p: RequestPhases, ttft_ns: int, tolerance_ms: Callable[[float], float]) -> None:
        for name in PHASES:
            v = p.get(name)
            if v is not None:
                self.values[name].append(v)
        self.ttft.append(ttft_ns)
        self.flagged += delivery_flagged(p, ttft_ns, tolerance_ms)
        self.backwards += min(p.network, p.delivery) < -p.error_ns

    def stats(self) -> dict[str, dict[PhaseName, float]]:
        out: dict[str, dict[PhaseName, float]] = {"mean_ms": {}, "p50_ms": {}, "p99_ms": {}}
        for name, column in self.values.items():
            if not column:
                continue
            ms = np.sort(np.frombuffer(column, np.int64)) / 1e6
            out["mean_ms"][name] = math.fsum(ms) / len(ms)
            out["p50_ms"][name], out["p99_ms"][name] = percentile(ms, 50), percentile(ms, 99)
        return out


def ledger(records: Iterable[RequestRecord], counts: SpanCounts, tolerance_ms: Callable[[float], float]
           ) -> PhaseLedger:
    """The ledger over a cell's measured ok requests (`tolerance_ms`: the client's TTFT tolerance at a TTFT)."""
    cols, requests = _Columns(), 0
    offset: tuple[int | None, int | None] = (None, None)
    for r in records:
        if r.phase != "measure" or not r.ok:
            continue
        requests += 1
        p = phases_of(r)
        if p is not None and r.ttft_ns is not None:
            cols.add(p, r.ttft_ns, tolerance_ms)
            offset = (r.clock_offset_ns, r.clock_offset_error_ns)
    joined = len(cols.ttft)
    base = PhaseLedger(requests=requests, joined=joined, missing=requests - joined, **counts.model_dump())
    if not joined:
        return base
    deliveries = cols.values["delivery"]
    return base.model_copy(update={
        **cols.stats(), "clock_offset_ms": (offset[0] or 0) / 1e6, "clock_offset_error_ms": (offset[1] or 0) / 1e6,
        "clock_consistent": cols.backwards == 0,
        "client_ttft_mean_ms": math.fsum(cols.ttft) / joined / 1e6, "delivery_flagged": cols.flagged,
        "delivery_max_ms": max(deliveries) / 1e6})


class ServerMeans(Group):
    """Per-cell means of the server's own request-time histograms over the measured phase (from the /metrics
    scrapes: increase of each histogram's sum / increase of its count), labelled as the server's means: they
    need no tracing but give no per-request figure and no percentile. Stored with the prefix `server_mean_`."""

    PREFIX = "server_mean_"
    queue_ms: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    inference_ms: float | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    requests: Number | None = None           # requests the e2e histogram counted over the window


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
