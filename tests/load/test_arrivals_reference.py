"""load/arrivals.py against the schedule docs/metrics.md ("Open-loop schedules") states, written out here with the
same seeded generator: Poisson gaps are exponential draws of mean 1, a burstiness b other than 1 draws gamma gaps
of shape b and mean 1, the N - 1 gaps are scaled by one factor to sum to (N - 1) / rate, constant arrivals are
i / rate, a duration cuts the schedule and sets N = round(rate x duration) (at least 1) where no count is given;
offsets in whole ns. The same seed gives the same offsets to the nanosecond."""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.load import arrivals as ar
from tokenbench.spec.bench import Load


def reference(rate: float, kind: str, seed: int, count: int, burstiness: float = 1.0,
              duration_s: float | None = None) -> list[int]:
    if kind == "constant":
        times = [i / rate for i in range(count)]
    else:
        rng = random.Random(seed)
        draw = (lambda: rng.expovariate(1.0)) if burstiness == 1.0 else (
            lambda: rng.gammavariate(burstiness, 1.0 / burstiness))
        gaps = [draw() for _ in range(count - 1)]
        scale = (count - 1) / rate / sum(gaps) if gaps and sum(gaps) > 0 else 1.0 / rate
        times, t = [0.0], 0.0
        for g in gaps:
            t += g * scale
            times.append(t)
    return [round(t * 1e9) for t in times if duration_s is None or t < duration_s]


@settings(deadline=None)
@given(st.floats(0.1, 500.0), st.integers(1, 300), st.integers(0, 2**48),
       st.sampled_from([1.0, 1.1, 0.9, 0.5, 2.0, 4.0]))
def test_poisson_and_gamma_schedules_are_the_documented_draws_to_the_nanosecond(rate, n, seed, burstiness):
    got = ar.schedule(Load(request_rate=rate, num_prompts=n, burstiness=burstiness), seed)
    assert got == reference(rate, "poisson", seed, n, burstiness)


@pytest.mark.parametrize(("rate", "n"), [(4.0, 9), (0.5, 3), (1000.0, 50)])
def test_constant_arrivals_are_i_over_the_rate(rate, n):
    assert ar.schedule(Load(request_rate=rate, num_prompts=n, arrival="constant"), 1) == reference(rate, "constant", 1, n)


@pytest.mark.parametrize(("rate", "duration", "n"), [(2.0, 10.0, 20), (3.0, 0.1, 1), (0.7, 5.0, 4), (5.0, 0.5, 2)])
def test_a_duration_cell_has_round_rate_times_duration_arrivals_at_least_1(rate, duration, n):
    load = Load(request_rate=rate, duration_s=duration)
    assert ar.planned_arrivals(load) == n and ar.arrivals_of(load) == n and ar.arrivals_of(load, 1) == 1
    assert ar.schedule(load, 3) == reference(rate, "poisson", 3, n, duration_s=duration)


@pytest.mark.parametrize(("rate", "duration", "n"), [(1.2, 1.0, 1), (1.6, 1.0, 2), (0.2, 1.0, 1), (4.4, 1.0, 4)])
@pytest.mark.parametrize("kind", ["constant", "poisson"])
def test_offsets_without_a_count_take_round_rate_times_duration_at_least_1(rate, duration, n, kind):
    got = list(ar.offsets_ns(rate, kind, random.Random(4), duration_s=duration))
    assert got == reference(rate, kind, 4, n, duration_s=duration)


def test_a_count_cut_at_the_duration_and_an_unbounded_schedule():
    load = Load(request_rate=10.0, num_prompts=100, duration_s=2.0, arrival="constant")
    assert ar.schedule(load, 0) == [round(i / 10.0 * 1e9) for i in range(20)]
    endless = ar.offsets_ns(4.0, "poisson", random.Random(9))
    rng = random.Random(9)
    want, t = [0], 0.0
    for _ in range(5):
        t += rng.expovariate(1.0) / 4.0
        want.append(round(t * 1e9))
    assert [next(endless) for _ in range(6)] == want
    gamma = ar.offsets_ns(4.0, "poisson", random.Random(9), burstiness=2.0)
    rng, want, t = random.Random(9), [0], 0.0
    for _ in range(5):
        t += rng.gammavariate(2.0, 0.5) / 4.0
        want.append(round(t * 1e9))
    assert [next(gamma) for _ in range(6)] == want


def test_n_of_a_schedule():
    assert ar.planned_arrivals(Load(request_rate=2.0, num_prompts=7)) == 7
    assert ar.planned_arrivals(Load(session_rate=2.0, num_sessions=3)) == 3
    assert ar.planned_arrivals(Load(concurrency=2, num_prompts=7)) is None
    assert ar.planned_arrivals(Load(arrival="trace", num_prompts=7)) is None
    assert ar.arrivals_of(Load(request_rate=2.0, num_prompts=7), 5) == 5
    assert ar.arrivals_of(Load(request_rate=2.0, num_prompts=7), 9) == 7
    assert ar.schedule(Load(session_rate=4.0, num_sessions=3, arrival="constant"), 0) == [0, 250_000_000, 500_000_000]


def test_each_cell_its_own_48_bit_seed():
    a, b = ar.arrival_seed(1, "c=1"), ar.arrival_seed(1, "c=2")
    assert a != b and 0 <= a < 2**48 and a == ar.arrival_seed(1, "c=1") and ar.arrival_seed(2, "c=1") != a


@pytest.mark.parametrize(("seed", "key"), [(0, "c=1"), (1, "rate=2.5"), (7, "in=128,out=64,c=4"), (123, "")])
def test_a_cells_seed_is_the_first_48_bits_of_sha256_of_its_seed_and_key(seed, key):
    """docs/metrics.md: arrival_seed = first 48 bits of sha256("{seed}/{cell key}/arrivals"), so a published
    study's arrivals are drawn again the same by any later version."""
    digest = hashlib.sha256(f"{seed}/{key}/arrivals".encode()).digest()
    assert ar.arrival_seed(seed, key) == int.from_bytes(digest, "big") >> (256 - 48)
