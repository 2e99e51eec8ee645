"""A cell's client health: how far the delays the client measured could have moved each published figure
(`figure_health`, the bounds), and which figures that moves beyond the accuracy tokenbench claims (`marks`,
the verdict's marks: the cell's status does not depend on them).

Every stamp is taken in the event loop's read callback. A stall (metrics/tally.Stalls: the probe's timer,
due at `due`, fired at `woke`) held the loop from some moment after it was last seen running (`start`:
the probe's previous wake, or a later stamp taken before `due`) until `woke`; so a stamp in
(due, woke + r] may be late by up to its time minus `start`, and no other stamp is late by the stall.
From these per-stamp delays each figure's samples get a delay bound d_j (a TTFT's is its first token's,
an E2EL's its end's, a TPOT's the larger of its first and last tokens' over (n - 1) (it ends at the last
token, as the tally's), an ITL gap's the larger of its two ends'). Then:
- a mean moves by at most sum(d_j) / N (mean ITL: its gaps telescope per request);
- a percentile moves by at most the largest d_j, and by at most the distance to the sorted samples k
  ranks away, when k samples have d_j > 0 (changing k samples moves an order statistic by at most k
  ranks);
- a throughput moves by at most the delay of its last end, plus, where a finished request frees a slot
  for the next one, the delays of the ends a stall held back over the slots, over the cell's duration.
Reads that carried several token chunks while the loop was quiet (metrics/tally.Coalesced) are a server's or
a proxy's buffering: they bound the ITL percentiles the same way (the stream's cadence is not measurable
through them), and TTFT and TPOT where a request's first or last token came in such a read (the proxy's
delivery, not the server's generation), and are named as such. Formulas: docs/metrics.md ("Client health")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tokenbench.metrics.cell_summary import CellSummary, known
from tokenbench.metrics.summary_groups import FigureBound, FigureHealth, FigureMark
from tokenbench.metrics.tally import CAUSES, PROBE_RESOLUTION_NS, Cause, CellTally, Stalls
from tokenbench.metrics.token_log import at_rank

MS = 1e6
STATS = ("mean", "median", "p50", "p90", "p95", "p99")
LATENCIES = ("ttft", "tpot", "itl", "e2el")
RATES = ("request_throughput", "output_throughput", "total_token_throughput", "request_goodput")
BUFFERING = CAUSES.index("buffering")

# Client health: the accuracy tokenbench claims for a published latency figure is CLAIM_REL of the
# figure or CLAIM_ABS_MS, whichever is larger (the absolute part is calibrate's delivery limit); for a
# throughput CLAIM_REL of it. A figure the client's measured delays (or a buffered stream) could move by
# more than that is marked, with the cause; the others stay clean, and so does the cell's status.
CLAIM_REL = 0.05
CLAIM_ABS_MS = 1.0
PROBE_RESOLUTION_MS = PROBE_RESOLUTION_NS / 1e6


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
        e.g. with several workers): a stamp taken before a stall's `due` shows the loop still ran then."""
        a = stalls.arrays()
        start, due = a["after"], a["due"]
        if activity is not None and len(activity) and len(due):
            i = np.searchsorted(activity, due, side="right") - 1
            start = np.where(i >= 0, np.maximum(start, activity[np.maximum(i, 0)]), start)
        return cls(start, due, a["woke"] + PROBE_RESOLUTION_NS, a["cause"])

    def delays(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per stamp: how late a stall may have made it (ns, 0: none) and that stall's cause (-1: none).
        A window overlaps at most the one before it (the probe's next due is a period later)."""
        d, c = np.zeros(len(t), np.int64), np.full(len(t), -1, np.int64)
        if not len(self.due) or not len(t):
            return d, c
        j = np.searchsorted(self.due, t, side="left") - 1
        for k in (j, j - 1):
            kk = np.maximum(k, 0)
            inside = (k >= 0) & (t <= self.end[kk])
            dk = np.where(inside, t - self.start[kk], 0)
            better = dk > d
            d, c = np.where(better, dk, d), np.where(better, self.cause[kk], c)
        return d, c



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
        return rank_bound(len(self.values), _ranks(np.sort(self.values)), q, self.delay, self.cause)


def _ranks(sorted_values: np.ndarray) -> Callable[[float], float]:
    return lambda pos: at_rank(sorted_values, pos)


def _dominant(delay: np.ndarray, cause: np.ndarray) -> Cause | None:
    """The cause whose delays add up most (None when nothing was delayed)."""
    hit = delay > 0
    if not hit.any():
        return None
    return CAUSES[int(np.argmax(np.bincount(cause[hit], weights=delay[hit], minlength=len(CAUSES))))]


def rank_bound(n: int, at: Callable[[float], float], q: float, delay: np.ndarray, cause: np.ndarray) -> FigureBound:
    """The q-th percentile of n samples of which k may be off, each by at most its delay: it moves by at
    most the largest delay, and by at most the distance to the samples k ranks above or below."""
    k = int((delay > 0).sum())
    if not n or not k:
        return FigureBound(bound=0.0)
    pos = (n - 1) * q / 100.0
    here = at(pos)
    by_rank = max(at(pos + k) - here, here - at(pos - k))
    return FigureBound(bound=float(min(float(delay.max()), by_rank)), cause=_dominant(delay, cause))


def _at_ms(win: Windows, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d, c = win.delays(t)
    return d / MS, c


def _larger(*pairs: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    d, c = pairs[0]
    for d2, c2 in pairs[1:]:
        d, c = np.where(d2 > d, d2, d), np.where(d2 > d, c2, c)
    return d, c


def _quiet_reads(tally: CellTally, win: Windows) -> tuple[np.ndarray, np.ndarray]:
    """The stamps (sorted) and delays (ns) of the reads of many chunks taken while no stall held the loop."""
    stamp, delay, _, _ = tally.coalesced.arrays()
    quiet = win.delays(stamp)[0] == 0
    order = np.argsort(stamp[quiet])
    return stamp[quiet][order], delay[quiet][order]


def _buffered_at(reads: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per token stamp: its read's delay (ms) and BUFFERING where it was read in a piece of many chunks
    while the loop was quiet (the piece's first token left the server up to that delay earlier)."""
    s, dl = reads
    if not len(s) or not len(t):
        return np.zeros(len(t)), np.full(len(t), -1, np.int64)
    i = np.minimum(np.searchsorted(s, t), len(s) - 1)
    hit = s[i] == t
    return np.where(hit, dl[i], 0) / MS, np.where(hit, BUFFERING, -1)


def latency_samples(tally: CellTally, win: Windows) -> dict[str, Samples]:
    """TTFT, TPOT and E2EL samples of the ok requests (as the tally computes them: TPOT from the first token
    to the last), with their bounds.
    A first or last token read in a buffered piece carries that read's delay (the stream's end is not a
    token: a proxy passes it on as the server ends)."""
    ok = tally.ok
    sent, end, first, last, outs = ok.np("sent"), ok.np("end"), ok.np("first"), ok.np("last"), ok.np("out")
    has_first = first >= 0
    multi = has_first & (outs >= 2)
    reads = _quiet_reads(tally, win)
    d_first, d_last = (_larger(_at_ms(win, t), _buffered_at(reads, t)) for t in (first, last))
    d_end = _at_ms(win, end)
    d_tpot, c_tpot = _larger(d_first, d_last)
    per = np.maximum(outs - 1, 1)
    return {
        "ttft": Samples((first - sent)[has_first] / MS, d_first[0][has_first], d_first[1][has_first]),
        "tpot": Samples(((last - first) / per / MS)[multi], (d_tpot / per)[multi], c_tpot[multi]),
        "e2el": Samples((end - sent) / MS, *d_end),
    }


def _chunk_gaps(tally: CellTally, win: Windows) -> tuple[np.ndarray, np.ndarray]:
    """Each ITL gap's delay bound from the stalls (ms) and its cause: exact per chunk while the token log
    holds every chunk; once folded, every chunk in a 10 ms step a stall touches counted as delayed (two
    gaps each) by the longest stall."""
    held = tally.tokens.chunks()
    if held is None:
        return _folded_gaps(tally, win)
    t, n = held
    d, c = _at_ms(win, t)
    keep = np.ones(max(len(t) - 1, 0), bool)
    starts = np.cumsum(n)[:-1]
    keep[starts[(starts > 0) & (starts <= len(keep))] - 1] = False
    gd, gc = _larger((d[:-1], c[:-1]), (d[1:], c[1:])) if len(t) > 1 else (np.zeros(0), np.zeros(0, np.int64))
    return gd[keep], gc[keep]


def _folded_gaps(tally: CellTally, win: Windows) -> tuple[np.ndarray, np.ndarray]:
    near = [2 * tally.tokens.tokens_near(int(a), int(b)) for a, b in zip(win.due, win.end, strict=True)]
    longest = (win.end - PROBE_RESOLUTION_NS - win.start) / MS
    d = np.repeat(longest, near) if len(near) else np.zeros(0)
    return d, np.repeat(win.cause, near) if len(near) else np.zeros(0, np.int64)


def _buffered_gaps(tally: CellTally, win: Windows) -> tuple[np.ndarray, np.ndarray, int]:
    """Gaps touching a read of several chunks taken while no stall held the loop (buffering), each with
    that read's delay bound (ms); and how many chunks such reads carried."""
    stamp, delay, gaps, chunks = tally.coalesced.arrays()
    quiet = win.delays(stamp)[0] == 0
    d = np.repeat(delay[quiet] / MS, gaps[quiet])
    return d, np.full(len(d), BUFFERING, np.int64), int(chunks[quiet].sum())


def itl_bounds(tally: CellTally, win: Windows) -> tuple[dict[str, FigureBound], int]:
    """ITL's mean (telescoped per request: off by at most its first and last chunks' delays) and
    percentiles (stalls and buffering together); and the chunks read coalesced while the loop was quiet."""
    ok = tally.ok
    n, at = tally.tokens.gap_ranks()
    first, last = ok.np("first"), ok.np("last")
    (df, cf), (dl, cl) = _at_ms(win, first[first >= 0]), _at_ms(win, last[first >= 0])
    d_mean, c_mean = _larger((df, cf), (dl, cl))
    out = {"mean": FigureBound(bound=float(d_mean.sum()) / n if n else 0.0, cause=_dominant(d_mean, c_mean))}
    sd, sc = _chunk_gaps(tally, win)
    bd, bc, coalesced = _buffered_gaps(tally, win)
    d, c = np.concatenate([sd[sd > 0], bd]), np.concatenate([sc[sd > 0], bc])
    for q, name in ((50, "median"), (50, "p50"), (90, "p90"), (95, "p95"), (99, "p99")):
        out[name] = rank_bound(n, at, q, d, c)
    return out, coalesced


def rate_bounds(summary: CellSummary, tally: CellTally, win: Windows) -> dict[str, FigureBound]:
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
    held[last] = max(float(held[last]), float(d[last]))
    share = float(held.sum()) / (summary.duration * 1e9)
    cause = _dominant(held, c)
    return {name: FigureBound(bound=share * float(v), cause=cause) for name in RATES
            if (v := getattr(summary, name)) is not None and v == v}


def figure_health(summary: CellSummary, tally: CellTally, stalls: Stalls, one_loop: bool = True) -> FigureHealth:
    """Every published figure's bound. `one_loop`: every stamp was taken by the loop the stalls were
    seen on (one client process), so a stamp before a stall shows the loop still ran then."""
    win = Windows.of(stalls, _activity(tally) if one_loop else None)
    bounds: dict[str, FigureBound] = {}
    for name, samples in latency_samples(tally, win).items():
        bounds[f"mean_{name}_ms"] = samples.mean_bound()
        for q, stat in ((50, "median"), (50, "p50"), (90, "p90"), (95, "p95"), (99, "p99")):
            bounds[f"{stat}_{name}_ms"] = samples.percentile_bound(q)
    itl, coalesced = itl_bounds(tally, win)
    bounds.update({f"{stat}_itl_ms": b for stat, b in itl.items()})
    bounds.update(rate_bounds(summary, tally, win))
    held = tally.tokens.chunks()
    after = int((win.delays(held[0])[0] > 0).sum()) if held is not None else None
    moved = {k: b for k, b in bounds.items() if b.bound > 0}
    return FigureHealth(client_bounds=moved, token_chunks=_chunk_count(tally), chunks_after_stall=after,
                        chunks_coalesced=coalesced)


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
    """The figures the client's measured delays (or a buffered stream) could move by more than their
    tolerance (`figure_health` computed the bounds), each with its cause; {} when none."""
    bounds = summary.figures.client_bounds if summary.figures else None
    out = {}
    for key, b in (bounds or {}).items():
        value = known(getattr(summary, key, None))
        if value is None or b.cause is None:
            continue
        tol = tolerance(key, float(value))
        if b.bound > tol:
            out[key] = FigureMark(cause=b.cause, bound=b.bound, tolerance=tol)
    return out
