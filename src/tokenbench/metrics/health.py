"""A cell's client health: what the client saw while it measured, how far that could have moved each
published figure (`figure_health`, the bounds), and which figures that moves beyond the accuracy tokenbench
claims (`marks`, the verdict's marks: the cell's status does not depend on them). Observations first: a
mark says what was seen and which figures it bounds; a cause is named only where evidence tells it apart.

The client's own delays. Every stamp is taken in the event loop's read callback. A stall (metrics/tally.
Stalls: the probe's timer, due at `due`, fired at `woke`) held the loop from some moment after it was last
seen running (`start`: the probe's previous wake, or a later stamp taken before `due`) until it had caught up
with what waited (`caught`: the first loop iteration after the wake that took at most r); so a stamp in
(due, caught + r] may be late by up to its time minus `start`, and no other stamp is late by that stall.

The stream's shape upstream. A burst (a read that carried two token chunks of one request or more) inside a
stall's window is the client's (its loop read late what had arrived one by one), as far as the stall
explains it (no more chunks than the request's pace lets pile up while the loop was held); any other was
taken while the loop waited idle, and is how the stream reached the socket: written together by the server (multi-step scheduling, a
stream interval, speculative decoding's accepted tokens), or held and flushed by something on the way (a
proxy, a gateway, a server's own buffer). Only evidence tells those apart (`Delivery`): the server's own
account of the chunks it writes at once (its server info, or the study's declaration) explains bursts up to
that size as its own shape (the figures are what it sent: no bound); a declared proxy (`--via-proxy`) names
the proxy; otherwise the cause is "upstream (server or proxy)". When unexplained bursts carry PIECES_SHARE of
the cell's token chunks, its streams arrive in pieces: every stamp of every request may have been held, by
up to its time minus the stamp two reads earlier (the request's send for its first two reads: a piece may
end inside an event; that base moved back by any stall that held it); below that share only the stamps of
bursts of LONE_CHUNKS or more are bounded so (2 or 3 chunks in a read now and then are what a server writing
close together gives).

From these per-stamp delays each figure's samples get a delay bound d_j (a TTFT's is its first token's, an
E2EL's its end's, a TPOT's the larger of its first and last token's over (n - 1), an ITL gap's the larger of
its two ends', a stream tail's the larger of its last token's and its end's). Then:
- a mean moves by at most sum(d_j) / N (mean ITL: its gaps telescope per request);
- a percentile moves by at most the largest d_j, and by at most the distance to the sorted samples k
  ranks away, when k samples have d_j > 0 (changing k samples moves an order statistic by at most k
  ranks);
- a throughput moves by at most the delay of its last end, plus, where a finished request frees a slot
  for the next one, the delays of the ends a stall held back over the slots, over the cell's duration.
Formulas: docs/metrics.md ("Client health")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokenbench.lazy import lazy_module
from tokenbench.metrics.cell_summary import CellSummary, known
from tokenbench.metrics.summary_groups import BurstSource, FigureBound, FigureHealth, FigureMark
from tokenbench.metrics.tally import CAUSES, PROBE_RESOLUTION_NS, Cause, CellTally, Stalls
from tokenbench.metrics.token_log import at_rank

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")   # imported where first used (tokenbench/lazy.py)

MS = 1e6
STATS = ("mean", "median", "p50", "p90", "p95", "p99")
QUANTILES = ((50, "median"), (50, "p50"), (90, "p90"), (95, "p95"), (99, "p99"))
RATES = ("request_throughput", "output_throughput", "total_token_throughput", "request_goodput")
BUFFERING = CAUSES.index("buffering")
PIECES_SHARE = 0.5        # unexplained bursts carrying half the token chunks: the streams come in pieces (a
                          # server starved of CPU writes a few chunks together now and then, a flushing proxy
                          # most of them)

LONE_CHUNKS = 4           # below half, a burst is bounded only from this size: 2 or 3 chunks in a read now and
                          # then are what a server writing close together gives (its timers late on a busy host)

# Client health: the accuracy tokenbench claims for a published latency figure is CLAIM_REL of the
# figure or CLAIM_ABS_MS, whichever is larger (the absolute part is calibrate's delivery limit); for a
# throughput CLAIM_REL of it. A figure the client's measured delays (or a stream held upstream) could move
# by more than that is marked, with the cause; the others stay clean, and so does the cell's status.
CLAIM_REL = 0.05
CLAIM_ABS_MS = 1.0


@dataclass(frozen=True)
class Delivery:
    """What is known of the way from the server to the client besides what the client saw: the chunks the
    server writes at once by its own account (`server_writes`, with where that was read), and whether the
    study declared a proxy on the way (`--via-proxy`)."""

    server_writes: int | None = None
    told_by: str = ""
    via_proxy: bool = False


@dataclass(frozen=True)
class Windows:
    """The stalls as the stamps they may have delayed: a stamp in (due, end] may be late by up to its
    time minus `start`; `cause` indexes CAUSES."""

    start: np.ndarray
    due: np.ndarray
    end: np.ndarray
    cause: np.ndarray

    @classmethod
    def of(cls, stalls: Stalls, activity: np.ndarray | None) -> Windows:
        """`activity`: sorted stamps of the loop that was held up (None: not known to be that loop's,
        e.g. with several workers): a stamp taken before a stall's `due` shows the loop still ran then.
        A window ends r after the stall's catch-up (the wake, for a stall stored without one)."""
        a = stalls.arrays()
        start, due = a["after"], a["due"]
        if activity is not None and len(activity) and len(due):
            i = np.searchsorted(activity, due, side="right") - 1
            start = np.where(i >= 0, np.maximum(start, activity[np.maximum(i, 0)]), start)
        return cls(start, due, np.maximum(a["woke"], a["caught"]) + PROBE_RESOLUTION_NS, a["cause"])

    def delays(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per stamp: how late a stall may have made it (ns, 0: none) and that stall's cause (-1: none): the
        earliest start of the windows that hold it (a long catch-up can hold several later windows)."""
        d, c = np.zeros(len(t), np.int64), np.full(len(t), -1, np.int64)
        if not len(self.due) or not len(t):
            return d, c
        reach = np.maximum.accumulate(self.end)          # the latest end of window k or any before it
        k = np.searchsorted(self.due, t, side="left") - 1
        live = k >= 0
        while live.any():
            kk = np.maximum(k, 0)
            inside = live & (t <= self.end[kk])
            dk = np.where(inside, t - self.start[kk], 0)
            better = dk > d
            d, c = np.where(better, dk, d), np.where(better, self.cause[kk], c)
            k = k - 1
            live = (k >= 0) & (t <= reach[np.maximum(k, 0)])
        return d, c


@dataclass(frozen=True)
class Delays:
    """The delays of a figure's samples folded to what a percentile's bound needs: how many samples may be
    off, the largest delay, and each cause's total."""

    k: int
    largest: float
    weights: np.ndarray

    @classmethod
    def of(cls, d: np.ndarray, c: np.ndarray) -> Delays:
        hit = d > 0
        w = np.bincount(c[hit], weights=d[hit], minlength=len(CAUSES)) if hit.any() else np.zeros(len(CAUSES))
        return cls(int(hit.sum()), float(d.max()) if hit.any() else 0.0, w)

    @classmethod
    def weighted(cls, d: np.ndarray, c: np.ndarray, w: np.ndarray) -> Delays:
        """Samples with delays `d` and causes `c`, each standing for `w` samples: what `of` gives for them
        repeated, without the repeat, so a folded cell's gaps cost one entry per stall (or per burst), not
        one per gap a stall touched (docs/metrics.md, "Large cells")."""
        hit = (d > 0) & (w > 0)
        if not hit.any():
            return cls(0, 0.0, np.zeros(len(CAUSES)))
        return cls(int(w[hit].sum()), float(d[hit].max()),
                   np.bincount(c[hit], weights=d[hit] * w[hit], minlength=len(CAUSES)))

    @classmethod
    def every(cls, n: int, largest: float, cause: int) -> Delays:
        """All n samples, each off by up to `largest`."""
        w = np.zeros(len(CAUSES))
        w[cause] = n * largest
        return cls(n if largest > 0 else 0, largest, w)

    def __add__(self, other: Delays) -> Delays:
        return Delays(self.k + other.k, max(self.largest, other.largest), self.weights + other.weights)

    @property
    def cause(self) -> Cause | None:
        return CAUSES[int(np.argmax(self.weights))] if self.k and self.weights.any() else None


@dataclass(frozen=True)
class Samples:
    """One latency's samples (ms), each with its delay bound (ms) and the cause of that bound (-1: none)."""

    values: np.ndarray
    delay: np.ndarray
    cause: np.ndarray

    def mean_bound(self) -> FigureBound:
        n = len(self.values)
        return FigureBound(bound=float(self.delay.sum()) / n if n else 0.0, cause=_dominant(self.delay, self.cause))

    def percentile_bound(self, q: float) -> FigureBound:
        return rank_bound(len(self.values), _ranks(np.sort(self.values)), q, Delays.of(self.delay, self.cause))


def _ranks(sorted_values: np.ndarray) -> Callable[[float], float]:
    return lambda pos: at_rank(sorted_values, pos)


def _dominant(delay: np.ndarray, cause: np.ndarray) -> Cause | None:
    """The cause whose delays add up most (None when nothing was delayed)."""
    return Delays.of(delay, cause).cause


def rank_bound(n: int, at: Callable[[float], float], q: float, delays: Delays) -> FigureBound:
    """The q-th percentile of n samples of which k may be off, each by at most its delay: it moves by at
    most the largest delay, and by at most the distance to the samples k ranks above or below."""
    k = min(delays.k, n)
    if not n or not k:
        return FigureBound(bound=0.0)
    pos = (n - 1) * q / 100.0
    here = at(pos)
    by_rank = max(at(pos + k) - here, here - at(pos - k))
    return FigureBound(bound=float(min(delays.largest, by_rank)), cause=delays.cause)


def _larger(*pairs: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    d, c = pairs[0]
    for d2, c2 in pairs[1:]:
        d, c = np.where(d2 > d, d2, d), np.where(d2 > d, c2, c)
    return d, c


# ---- what the bursts tell ----

@dataclass(frozen=True, kw_only=True)
class Shape:
    """The cell's bursts sorted out: in a stall's window (the client's), idle and up to the server's own
    writes (its shape), or idle and unexplained (held upstream: `upstream`, their stamps, bases and the gaps
    they touch; `first`, `last`: the ok requests whose first or last read is one); whether the streams came
    in pieces, and what to say about it."""

    upstream_stamp: np.ndarray
    upstream_base: np.ndarray
    upstream_gaps: np.ndarray
    first: np.ndarray
    last: np.ndarray
    pieces: bool
    health: FigureHealth


def _stalled(b: dict[str, np.ndarray], win: Windows) -> np.ndarray:
    """The bursts a stall explains: read in its window, and no more chunks than the request's pace lets pile
    up while the loop was held since the request's read before (twice that, for the server's jitter); a
    request read whole in one burst is the stall's when the stall held the loop most of its wait."""
    held = np.minimum(win.delays(b["stamp"])[0], b["stamp"] - b["prev"])
    paced = 1 + 2 * held / np.maximum(b["pace"], 1)
    whole = 2 * held >= b["stamp"] - b["prev"]
    return (held > 0) & np.where(b["pace"] > 0, b["chunks"] <= paced, whole)


def shape(tally: CellTally, win: Windows, delivery: Delivery, chunks: int) -> Shape:
    b = tally.reads.bursts()
    client = _stalled(b, win)
    own = ~client & (b["chunks"] <= (delivery.server_writes or 1))
    up = ~client & ~own
    idle = ~client
    up_chunks = _with_rest(b, up, tally.reads.more_chunks)
    pieces = up_chunks >= PIECES_SHARE * max(chunks, 1) and up_chunks > 0
    bound = up if pieces else up & (b["chunks"] >= LONE_CHUNKS)
    n = len(tally.ok)
    first, last = np.zeros(n, bool), np.zeros(n, bool)
    first[b["req"][bound & (b["pos"] & 1 > 0)]] = True
    last[b["req"][bound & (b["pos"] & 2 > 0)]] = True
    health = FigureHealth(token_chunks=chunks, chunks_coalesced=int(_with_rest(b, idle, tally.reads.more_chunks)),
                          burst_chunks_upstream=int(up_chunks), **_burst_facts(b, idle, up, delivery))
    return Shape(upstream_stamp=b["stamp"][bound], upstream_base=b["base"][bound], upstream_gaps=b["gaps"][bound],
                 first=first, last=last, pieces=pieces, health=health)


def _with_rest(b: dict[str, np.ndarray], part: np.ndarray, more: int) -> float:
    """The chunks of the kept bursts in `part`, plus their share of the `more` chunks in bursts counted past
    BURSTS_KEPT (taken as the kept ones were)."""
    kept = float(b["chunks"][part].sum())
    return kept + kept * more / max(float(b["chunks"].sum()), 1.0)


def _burst_facts(b: dict[str, np.ndarray], idle: np.ndarray, up: np.ndarray, delivery: Delivery) -> dict:
    """What the idle bursts looked like: their size (median, largest), how far apart (median gap since
    the request's read before), and whose shape they are on the evidence."""
    if not idle.any():
        return {}
    sizes = b["chunks"][idle]
    after = np.where(b["pos"] & 1 > 0, 0, b["stamp"] - b["prev"])[idle]
    source: BurstSource = "server" if not up.any() else "proxy" if delivery.via_proxy else "upstream"
    out = {"burst_size_median": float(np.median(sizes)), "burst_size_max": int(sizes.max()), "burst_source": source,
           "server_writes": delivery.server_writes, "server_writes_from": delivery.told_by or None}
    if (after > 0).any():
        out["burst_period_ms"] = float(np.median(after[after > 0])) / MS
    return {k: v for k, v in out.items() if v is not None}


# ---- the delay of each stamp ----

@dataclass(frozen=True)
class Stamps:
    """Per ok request, each stamp's delay bound (ms) and its cause: its first token, last token, end and first
    answer token; `held`: the largest hold of its reads (ms, 0 unless its stream came in pieces), and
    `end_hold`: its end's hold alone (ms)."""

    first: tuple[np.ndarray, np.ndarray]
    last: tuple[np.ndarray, np.ndarray]
    end: tuple[np.ndarray, np.ndarray]
    ttfc: tuple[np.ndarray, np.ndarray]
    held: np.ndarray
    end_hold: np.ndarray


def _at_ms(win: Windows, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d, c = win.delays(t)
    return d / MS, c


def _hold(win: Windows, t: np.ndarray, base: np.ndarray, on: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where `on`: t minus the base, moved back by any stall that held the base (ms, BUFFERING)."""
    back, _ = win.delays(base)
    d = np.where(on, t - base + back, 0) / MS
    return d, np.where(d > 0, BUFFERING, -1)


def stamps(tally: CellTally, win: Windows, sh: Shape) -> Stamps:
    ok, r = tally.ok, tally.reads.requests
    first, last, end, ttfc = ok.np("first"), ok.np("last"), ok.np("end"), ok.np("ttfc")
    has = first >= 0
    every = np.full(len(first), sh.pieces) & has
    on_first, on_last = every | sh.first, every | sh.last
    b_first, b_last, b_end = r.np("first"), r.np("last"), r.np("end")
    pairs = {"first": (first, b_first, on_first), "last": (last, b_last, on_last), "end": (end, b_end, on_last),
             "ttfc": (np.where(ttfc >= 0, ttfc, first), b_first, on_first)}
    holds = {k: _hold(win, t, base, on) for k, (t, base, on) in pairs.items()}
    out = {k: _larger(_at_ms(win, pairs[k][0]), h) for k, h in holds.items()}
    held = np.where(every, r.np("hold"), 0) / MS
    return Stamps(out["first"], out["last"], out["end"], out["ttfc"], held, holds["end"][0])


# ---- the figures ----

def latency_samples(tally: CellTally, st: Stamps) -> dict[str, Samples]:
    """TTFT, TPOT, E2EL, NTPOT, TTFC and the stream tail of the ok requests (as the summary computes them),
    each sample with its bound."""
    ok = tally.ok
    sent, end, first, last, outs, ttfc = (ok.np(k) for k in ("sent", "end", "first", "last", "out", "ttfc"))
    has, told = first >= 0, ttfc >= 0
    multi = has & (outs >= 2)
    per = np.maximum(outs - 1, 1)
    d_tpot, c_tpot = _larger(st.first, st.last)
    d_tail, c_tail = _larger(st.last, st.end)
    d_end, c_end = st.end
    n_out = np.maximum(outs, 1)
    return {
        "ttft": Samples((first - sent)[has] / MS, st.first[0][has], st.first[1][has]),
        "tpot": Samples(((last - first) / per / MS)[multi], (d_tpot / per)[multi], c_tpot[multi]),
        "e2el": Samples((end - sent) / MS, d_end, c_end),
        "ntpot": Samples(((end - sent) / n_out / MS)[outs > 0], (d_end / n_out)[outs > 0], c_end[outs > 0]),
        "ttfc": Samples((ttfc - sent)[told] / MS, st.ttfc[0][told], st.ttfc[1][told]),
        "stream_tail": Samples(((end - last) / MS)[has], d_tail[has], c_tail[has]),
    }


def _chunk_gaps(tally: CellTally, win: Windows) -> Delays:
    """The ITL gaps a stall may have moved (ms): exact per chunk while the token log holds every chunk;
    once folded, every chunk in a 10 ms step a stall touches counted as delayed (two gaps each) by the
    longest stall."""
    held = tally.tokens.chunks()
    if held is None:
        near = np.array([2 * tally.tokens.tokens_near(int(a), int(b)) for a, b in zip(win.due, win.end, strict=True)],
                        np.int64)
        return Delays.weighted((win.end - PROBE_RESOLUTION_NS - win.start) / MS, win.cause, near)
    t, n = held
    d, c = _at_ms(win, t)
    keep = np.ones(max(len(t) - 1, 0), bool)
    starts = np.cumsum(n)[:-1]
    keep[starts[(starts > 0) & (starts <= len(keep))] - 1] = False
    gd, gc = _larger((d[:-1], c[:-1]), (d[1:], c[1:])) if len(t) > 1 else (np.zeros(0), np.zeros(0, np.int64))
    return Delays.of(gd[keep], gc[keep])


def _held_gaps(n: int, win: Windows, sh: Shape, st: Stamps) -> Delays:
    """The ITL gaps held upstream: every gap when the streams came in pieces (each by up to the largest
    hold of any read), else the gaps each unexplained burst touches, by that burst's hold."""
    if sh.pieces:
        back = float((win.end - win.start).max()) / MS if len(win.due) else 0.0
        return Delays.every(n, float(st.held.max()) + back if len(st.held) else 0.0, BUFFERING)
    d, _ = _hold(win, sh.upstream_stamp, sh.upstream_base, np.ones(len(sh.upstream_stamp), bool))
    return Delays.weighted(d, np.full(len(d), BUFFERING, np.int64), np.asarray(sh.upstream_gaps, np.int64))


def itl_bounds(tally: CellTally, win: Windows, sh: Shape, st: Stamps) -> dict[str, FigureBound]:
    """ITL's mean (telescoped per request: off by at most its first and last chunks' delays) and
    percentiles (the client's stalls and the stream's holds together)."""
    n, at = tally.tokens.gap_ranks()
    has = tally.ok.np("first") >= 0
    d_mean, c_mean = _larger((st.first[0][has], st.first[1][has]), (st.last[0][has], st.last[1][has]))
    out = {"mean": FigureBound(bound=float(d_mean.sum()) / n if n else 0.0, cause=_dominant(d_mean, c_mean))}
    delays = _chunk_gaps(tally, win) + _held_gaps(n, win, sh, st)
    for q, name in QUANTILES:
        out[name] = rank_bound(n, at, q, delays)
    return out


def rate_bounds(summary: CellSummary, tally: CellTally, win: Windows, st: Stamps) -> dict[str, FigureBound]:
    """Each throughput moves by at most (its window's end delayed, plus, where a finished request frees
    a slot for the next one (closed loop, or a cap), the sends held back: every end a stall delayed,
    over the slots) over the duration: a slot idle for d costs at most d / C of the cell's work."""
    if not len(tally.ok) or not summary.duration:
        return {}
    end = tally.all.np("end")
    d, c = win.delays(end)
    slots = summary.concurrency or summary.max_concurrency
    held = d.astype(np.float64) / slots if slots else np.zeros(len(d))
    last = int(np.argmax(end))
    ok_end = tally.ok.np("end")
    upstream = float(st.end_hold[int(np.argmax(ok_end))]) * MS if ok_end.max() == end[last] else 0.0
    held[last] = max(float(held[last]), float(d[last]), upstream)
    share = float(held.sum()) / (summary.duration * 1e9)
    cause = CAUSES[BUFFERING] if upstream >= held[last] > 0 else _dominant(held, c)
    return {name: FigureBound(bound=share * float(v), cause=cause) for name in RATES
            if (v := getattr(summary, name)) is not None and v == v}


def figure_health(summary: CellSummary, tally: CellTally, stalls: Stalls, one_loop: bool = True,
                  delivery: Delivery = Delivery()) -> FigureHealth:
    """What the client saw and every published figure's bound. `one_loop`: every stamp was taken by the
    loop the stalls were seen on (one client process), so a stamp before a stall shows the loop still ran
    then; `delivery`: what is known of the way from the server (its own writes, a declared proxy)."""
    win = Windows.of(stalls, _activity(tally) if one_loop else None)
    sh = shape(tally, win, delivery, _chunk_count(tally))
    st = stamps(tally, win, sh)
    bounds: dict[str, FigureBound] = {}
    for name, samples in latency_samples(tally, st).items():
        bounds[f"mean_{name}_ms"] = samples.mean_bound()
        for q, stat in QUANTILES:
            bounds[f"{stat}_{name}_ms"] = samples.percentile_bound(q)
        bounds[f"max_{name}_ms"] = samples.percentile_bound(100)
    bounds.update({f"{stat}_itl_ms": b for stat, b in itl_bounds(tally, win, sh, st).items()})
    bounds.update(rate_bounds(summary, tally, win, st))
    held = tally.tokens.chunks()
    after = int((win.delays(held[0])[0] > 0).sum()) if held is not None else None
    shown = summary.to_dict()
    moved = {k: b for k, b in bounds.items() if b.bound > 0 and known(shown.get(k)) is not None}
    return sh.health.model_copy(update={"client_bounds": moved, "chunks_after_stall": after,
                                        "held_upstream": sh.pieces})


def _activity(tally: CellTally) -> np.ndarray:
    """Every stamp of the cell, sorted: moments its loop ran."""
    held = tally.tokens.chunks()
    parts = [tally.all.np("sent"), tally.all.np("end"), tally.ok.np("first"), *([held[0]] if held else [])]
    return np.sort(np.concatenate(parts))


def _chunk_count(tally: CellTally) -> int:
    held = tally.tokens.chunks()
    n, _ = tally.tokens.gap_ranks()
    return len(held[0]) if held is not None else n + int((tally.ok.np("first") >= 0).sum())


def claim_ms(scale_ms: float) -> float:
    """The largest error tokenbench claims for a latency figure of this scale."""
    return max(CLAIM_REL * scale_ms, CLAIM_ABS_MS)


def tolerance(key: str, value: float) -> float:
    """The stated tolerance of a figure (its summary key and value), in its unit."""
    return claim_ms(value) if key.endswith("_ms") else CLAIM_REL * abs(value)


def marks(summary: CellSummary) -> dict[str, FigureMark]:
    """The figures the client's measured delays (or a stream held upstream) could move by more than their
    tolerance (`figure_health` computed the bounds), each with its cause; {} when none."""
    bounds = summary.figures.client_bounds if summary.figures else None
    flat = summary.to_dict() if bounds else {}
    out = {}
    for key, b in (bounds or {}).items():
        value = known(flat.get(key))
        if value is None or b.cause is None:
            continue
        tol = tolerance(key, float(value))
        if b.bound > tol:
            out[key] = FigureMark(cause=b.cause, bound=b.bound, tolerance=tol)
    return out
