"""Open-loop arrival schedules as absolute offsets from t0 (never cumulative sleeps)."""

from __future__ import annotations

import random
from collections.abc import Iterator

from tokenbench.spec.bench import Load


def offsets_ns(rate: float, kind: str, rng: random.Random, count: int | None = None,
               duration_s: float | None = None, burstiness: float = 1.0) -> Iterator[int]:
    """Offsets of arrivals: Poisson (exponential gaps; with burstiness b != 1, gamma gaps of shape b and
    mean 1/rate, as vLLM's --burstiness) or constant spacing, until count or duration."""
    t, i = 0.0, 0
    while (count is None or i < count):
        if kind == "constant":
            t = i / rate
        elif i:
            t += rng.expovariate(rate) if burstiness == 1.0 else rng.gammavariate(burstiness, 1 / (rate * burstiness))
        if duration_s is not None and t >= duration_s:
            return
        yield int(t * 1e9)
        i += 1


def schedule(load: Load, seed: int, count: int) -> list[int]:
    """A cell's whole open-loop schedule: request i is due at t0 + schedule[i]. With --workers N the
    same schedule is dealt out (worker w sends requests w, w + N, ...), so constant arrivals interleave
    instead of arriving in N-fold bursts, and the cell's arrivals do not depend on N."""
    return list(offsets_ns(load.request_rate or 0.0, load.arrival, random.Random(seed), count, load.duration_s,
                           load.burstiness))
