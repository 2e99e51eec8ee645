"""Open-loop arrival schedules as absolute offsets from t0 (never cumulative sleeps).

A schedule of N arrivals at rate r sends its first request at t0 and spans (N - 1) / r: the N - 1 gaps
are drawn (exponential for Poisson; gamma of shape b for burstiness b, as vLLM's --burstiness), then all
scaled by one factor so that they sum to exactly (N - 1) / r, as vLLM rescales its delays so N requests
take N / r (docs/metrics.md, "Open-loop schedules"). The draws are seeded per cell (`arrival_seed`), so a
cell's schedule is the same on every run with the same seed and differs from cell to cell.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator

from tokenbench.spec.bench import Load


def arrival_seed(seed: int, cell_key: str) -> int:
    """The seed of one cell's arrival draws: from the run's seed (+ repeat) and the cell's key, 48 bits."""
    digest = hashlib.sha256(f"{seed}/{cell_key}/arrivals".encode()).digest()
    return int.from_bytes(digest[:6], "big")


def planned_arrivals(load: Load) -> int | None:
    """N of the schedule: num_prompts (sessions: num_sessions, of session starts); a --duration cell
    without it: round(rate x duration), at least 1 (so its N arrivals span (N - 1) / rate, inside the
    duration); None for a closed loop or a trace."""
    rate = load.request_rate or load.session_rate
    if load.concurrency is not None or load.arrival == "trace" or not rate:
        return None
    n = load.num_sessions if load.session_rate else load.num_prompts
    if n is not None:
        return n
    return max(1, round(rate * (load.duration_s or 0.0)))


def _unit_gap(rng: random.Random, burstiness: float) -> float:
    """One gap of mean 1: exponential (Poisson arrivals) or gamma of shape `burstiness`."""
    return rng.expovariate(1.0) if burstiness == 1.0 else rng.gammavariate(burstiness, 1.0 / burstiness)


def _constant(rate: float, count: int | None, duration_s: float | None) -> Iterator[int]:
    i = 0
    while count is None or i < count:
        t = i / rate
        if duration_s is not None and t >= duration_s:
            return
        yield round(t * 1e9)
        i += 1


def _scaled(rng: random.Random, count: int | None, scale: float, burstiness: float,
            duration_s: float | None) -> Iterator[int]:
    t, i = 0.0, 0
    while count is None or i < count:
        if i:
            t += _unit_gap(rng, burstiness) * scale
        if duration_s is not None and t >= duration_s:
            return
        yield round(t * 1e9)
        i += 1


def offsets_ns(rate: float, kind: str, rng: random.Random, count: int | None = None,
               duration_s: float | None = None, burstiness: float = 1.0) -> Iterator[int]:
    """Offsets of `count` arrivals (None: round(rate x duration_s); neither: unbounded), cut at duration_s.
    Constant: i / rate. Poisson / gamma: the count - 1 gaps scaled to sum to (count - 1) / rate; the scale
    is found before this returns (one pass over the same draws), so taking the offsets costs one draw each."""
    if count is None and duration_s is not None:
        count = max(1, round(rate * duration_s))
    if kind == "constant":
        return _constant(rate, count, duration_s)
    scale = 1.0 / rate
    if count is not None and count > 1:
        start = rng.getstate()
        drawn = sum(_unit_gap(rng, burstiness) for _ in range(count - 1))
        rng.setstate(start)
        scale = (count - 1) / rate / drawn if drawn > 0 else scale
    return _scaled(rng, count, scale, burstiness, duration_s)


def arrivals_of(load: Load, prepared: int | None = None) -> int | None:
    """N of a cell's schedule: `planned_arrivals`, or the requests prepared when fewer (a dataset smaller
    than --num-prompts: its N requests then span (N - 1) / rate, not a part of a longer schedule)."""
    n = planned_arrivals(load)
    return n if prepared is None or n is None else min(n, prepared)


def schedule(load: Load, seed: int, count: int | None = None) -> list[int]:
    """A cell's whole open-loop schedule: request i is due at t0 + schedule[i]. With --workers N the
    same schedule is dealt out (worker w sends requests w, w + N, ...), so constant arrivals interleave
    instead of arriving in N-fold bursts, and the cell's arrivals do not depend on N. `count`: the
    requests prepared (`arrivals_of`)."""
    rate = load.request_rate or load.session_rate or 0.0
    return list(offsets_ns(rate, load.arrival, random.Random(seed), arrivals_of(load, count), load.duration_s,
                           load.burstiness))
