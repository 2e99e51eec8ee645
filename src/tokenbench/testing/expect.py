"""Closed forms of the reference server's load model: what a load should measure, and the highest load
that meets an SLO. Pure; docs/reference-server.md ("Load model") derives each formula.

Notation (ms): t0 = ttft_ms, c = prefill_ms_per_token, L = prompt tokens, h = cached prompt tokens,
n = output tokens (exact: ignore_eos), itl(r) = the decode step with r running (load_model.itl_ms),
m = tokens per step (1; under speculative decoding 1 + p + ... + p^k), S = the slots admission allows
(max_running and kv_capacity_tokens // (L + n); unlimited when neither is set).

One prefill takes w = c*(L-h), one at a time (FIFO).

- Closed loop, C users (each sends again as soon as its answer ends), steady state: k = min(C, S)
  hold a slot, TPOT = itl(k)/m, decode D = (n-1)*TPOT. A slot's cycle is H = max(t0 + w + D, k*w)
  (the prefill queue binds past the max); throughput k/H; each request spends R = C*H/k from arrival
  to its last token (Little's law): TTFT = R - D. With C <= S every request is alike (p99 = mean).
- Constant rate R: gaps of 1/R, each prefill alone (w <= 1/R, else unstable): TTFT = t0 + w; N running
  solves N = R*(t0 + w + (n-1)*itl(N)/m) (itl linear between whole N); every request alike.
- Poisson rate R: the prefill queue is M/D/1 (rho = R*w < 1): TTFT = t0 + w + the M/D/1 wait, mean
  rho*w/(2(1-rho)) and p99 from its exact distribution (Erlang); a request runs with 1 + Poisson(N)
  others, N = R*E2EL (mean field, M/G/inf): TPOT = E[itl(1+X)]/m (means only).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Literal

from tokenbench.errors import UsageError
from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.load_model import eager, itl_ms
from tokenbench.testing.speculative import mean_tokens_per_step

Metric = Literal["ttft", "tpot", "e2el"]
Stat = Literal["mean", "p99"]
_SCAN_LIMIT = 1_000_000


@dataclass(frozen=True, slots=True)
class Shape:
    """Every request of the load: exact lengths; `cached_tokens` found in the prefix cache (steady
    state); `text` whether the prompt is text-like (speculative decoding's acceptance)."""

    prompt_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    text: bool = False


@dataclass(frozen=True, slots=True)
class Slo:
    metric: Metric
    stat: Stat
    max_ms: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """What the load model predicts (ms; rates per second). A p99 is None where it has no closed form.
    `stable` False: the closed form does not cover the load (more than the server serves, so a queue
    grows; or Poisson arrivals would find the slots full more than 1 % of the time): times are inf."""

    ttft_mean_ms: float
    ttft_p99_ms: float | None
    tpot_mean_ms: float
    tpot_p99_ms: float | None
    e2el_mean_ms: float
    e2el_p99_ms: float | None
    running: float
    request_rate: float
    output_tps: float
    eager: bool
    stable: bool = True

    def value(self, metric: Metric, stat: Stat) -> float | None:
        return getattr(self, f"{metric}_{stat}_ms")

    def meets(self, slos: Sequence[Slo]) -> bool:
        """Every SLO holds (a figure without a closed form cannot be said to hold)."""
        return self.stable and all((v := self.value(s.metric, s.stat)) is not None and v <= s.max_ms
                                   for s in slos)


def slots(cfg: ReferenceConfig, shape: Shape) -> int | None:
    """Requests of this shape that run at once: max_running and KV capacity (None: no limit)."""
    limits = [cfg.max_running] if cfg.max_running else []
    if cfg.kv_capacity_tokens:
        limits.append(cfg.kv_capacity_tokens // (shape.prompt_tokens + shape.output_tokens))
    return min(limits) if limits else None


def tokens_per_step(cfg: ReferenceConfig, shape: Shape) -> float:
    if not cfg.spec_tokens:
        return 1.0
    p = cfg.spec_accept_text if shape.text else cfg.spec_accept_random
    return mean_tokens_per_step(p, cfg.spec_tokens)


def _prefill_ms(cfg: ReferenceConfig, shape: Shape, together: int = 1) -> float:
    return cfg.prefill_ms_per_token * together * (shape.prompt_tokens - shape.cached_tokens)


def _unstable(rate: float, running: float) -> Expected:
    inf = math.inf
    return Expected(ttft_mean_ms=inf, ttft_p99_ms=inf, tpot_mean_ms=inf, tpot_p99_ms=inf, e2el_mean_ms=inf,
                    e2el_p99_ms=inf, running=running, request_rate=rate, output_tps=0.0, eager=False, stable=False)


def closed_loop(cfg: ReferenceConfig, concurrency: int, shape: Shape) -> Expected:
    """C users in a closed loop, in steady state (the first round differs: the k-th of a burst waits
    for the k-1 prefills before its own). Past the slots only the means have a closed form."""
    cap = slots(cfg, shape)
    if cap == 0:
        return _unstable(0.0, 0.0)
    k = concurrency if cap is None else min(concurrency, cap)
    w, n = _prefill_ms(cfg, shape), shape.output_tokens
    tpot = itl_ms(cfg, k) / tokens_per_step(cfg, shape)
    decode = (n - 1) * tpot
    hold = max(cfg.ttft_ms + w + decode, k * w)
    stay = concurrency * hold / k
    alike = concurrency == k
    return Expected(ttft_mean_ms=stay - decode, ttft_p99_ms=stay - decode if alike else None, tpot_mean_ms=tpot,
                    tpot_p99_ms=tpot, e2el_mean_ms=stay, e2el_p99_ms=stay if alike else None, running=float(k),
                    request_rate=1000.0 * k / hold, output_tps=1000.0 * k * n / hold, eager=eager(cfg, k))


def _mean_itl(cfg: ReferenceConfig, running: float) -> float:
    """The step averaged over a running count that alternates between floor and ceil of `running`."""
    lo = math.floor(running)
    f = running - lo
    return (1 - f) * itl_ms(cfg, lo) + f * itl_ms(cfg, lo + 1) if f else itl_ms(cfg, lo)


def _fixed_point(need: Callable[[float], float], cap: int | None, bend: int) -> float | None:
    """The smallest N > 0 with need(N) = N, or None when there is none within the cap. `need` (the
    running count that N co-runners imply) is nondecreasing, linear between whole numbers and linear
    past `bend` (above the captured sizes), so the root is found exactly."""
    if need(1.0) <= 1.0:
        found: float | None = need(1.0)           # under one running: every request runs alone
    else:
        found = next((_root(need, j) for j in range(1, bend) if need(j + 1.0) <= j + 1.0), None)
    if found is None:
        b = float(max(bend, 1))
        slope = need(b + 1.0) - need(b)
        if slope >= 1.0:
            return None                           # each added stream adds a stream or more: no end
        found = b + (need(b) - b) / (1.0 - slope)
    return found if cap is None or found <= cap else None


def _root(need: Callable[[float], float], j: int) -> float:
    """need(x) = x on [j, j+1], need linear there, need(j) > j and need(j+1) <= j+1."""
    above, below = need(float(j)) - j, need(j + 1.0) - (j + 1)
    return j + above / (above - below)


def constant_rate(cfg: ReferenceConfig, rate: float, shape: Shape) -> Expected:
    """Arrivals every 1/rate s, in steady state; every request alike."""
    w, n, m = _prefill_ms(cfg, shape), shape.output_tokens, tokens_per_step(cfg, shape)
    if rate <= 0 or w * rate >= 1000.0:
        return _unstable(rate, math.inf)
    ttft = cfg.ttft_ms + w

    def need(running: float) -> float:
        return rate / 1000.0 * (ttft + (n - 1) * _mean_itl(cfg, max(running, 1.0)) / m)

    bend = max(cfg.captured_batch_sizes) + 1 if cfg.captured_batch_sizes else 1
    running = _fixed_point(need, slots(cfg, shape), bend)
    if running is None:
        return _unstable(rate, math.inf)
    tpot = _mean_itl(cfg, max(running, 1.0)) / m
    e2el = ttft + (n - 1) * tpot
    return Expected(ttft_mean_ms=ttft, ttft_p99_ms=ttft, tpot_mean_ms=tpot, tpot_p99_ms=tpot, e2el_mean_ms=e2el,
                    e2el_p99_ms=e2el, running=running, request_rate=rate, output_tps=rate * n,
                    eager=eager(cfg, math.ceil(running)))


def _pmf(mean: float, x: int) -> float:
    return math.exp(-mean + x * math.log(mean) - math.lgamma(x + 1)) if mean > 0 else float(x == 0)


def _window(mean: float) -> range:
    """Where a Poisson(mean) holds all but ~1e-30 of its mass."""
    spread = 12 * math.sqrt(mean) + 30
    return range(max(0, int(mean - spread)), int(mean + spread) + 1)


def _poisson_itl(cfg: ReferenceConfig, others: float) -> float:
    """E[itl(1 + X)], X ~ Poisson(others)."""
    if not cfg.captured_batch_sizes:
        return itl_ms(cfg, 1) + cfg.itl_per_running_ms * others
    return sum(_pmf(others, x) * itl_ms(cfg, 1 + x) for x in _window(others))


def _poisson_tail(mean: float, at_least: int) -> float:
    """P(X >= at_least), X ~ Poisson(mean)."""
    return sum(_pmf(mean, x) for x in _window(mean) if x >= at_least)


def md1_wait_cdf(t_ms: float, rate: float, service_ms: float) -> float:
    """P(W <= t) of the M/D/1 queue (Erlang): (1-rho) * sum_{k=0}^{t/D} e^{a_k} (-a_k)^k / k!, with
    a_k = lambda*(t - k*D). Summed in decimal arithmetic: the terms are large and alternate."""
    lam, rho = rate / 1000.0, rate * service_ms / 1000.0
    if t_ms < 0:
        return 0.0
    with localcontext() as ctx:
        ctx.prec = int(lam * t_ms / 2.3) + 40
        total = Decimal(0)
        for k in range(int(t_ms // service_ms) + 1):
            a = Decimal(lam) * (Decimal(t_ms) - k * Decimal(service_ms))
            total += a.exp() * ((-a) ** k if k else 1) / math.factorial(k)
        return min(1.0, max(0.0, float(Decimal(1 - rho) * total)))


def md1_wait_quantile(q: float, rate: float, service_ms: float) -> float:
    """The q-quantile (ms) of the M/D/1 wait: 0 when 1 - rho >= q (that share never waits)."""
    if md1_wait_cdf(0.0, rate, service_ms) >= q:
        return 0.0
    lo, hi = 0.0, service_ms
    while md1_wait_cdf(hi, rate, service_ms) < q:
        lo, hi = hi, hi * 2
    while hi - lo > 1e-6 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if md1_wait_cdf(mid, rate, service_ms) >= q else (mid, hi)
    return hi


def poisson_rate(cfg: ReferenceConfig, rate: float, shape: Shape) -> Expected:
    """Poisson arrivals at `rate`/s: TTFT mean and p99 (M/D/1, exact), TPOT and E2EL means (mean
    field). Not stable past rho = 1, nor where the slots bind (P(running > slots) > 1 %)."""
    w, n, m = _prefill_ms(cfg, shape), shape.output_tokens, tokens_per_step(cfg, shape)
    rho = rate * w / 1000.0
    if rate <= 0 or rho >= 1.0:
        return _unstable(rate, math.inf)
    ttft = cfg.ttft_ms + w + rho * w / (2 * (1 - rho))
    ttft_p99 = cfg.ttft_ms + w + (md1_wait_quantile(0.99, rate, w) if w else 0.0)

    def excess(others: float) -> float:
        return rate / 1000.0 * (ttft + (n - 1) * _poisson_itl(cfg, others) / m) - others

    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
        if hi > _SCAN_LIMIT:
            return _unstable(rate, math.inf)
    lo = 0.0
    for _ in range(80):
        lo, hi = (lo, (lo + hi) / 2) if excess((lo + hi) / 2) <= 0 else ((lo + hi) / 2, hi)
    cap = slots(cfg, shape)
    if cap is not None and _poisson_tail(hi, cap) > 0.01:    # 1 + X > cap  <=>  X >= cap
        return _unstable(rate, hi)
    tpot = _poisson_itl(cfg, hi) / m
    return Expected(ttft_mean_ms=ttft, ttft_p99_ms=ttft_p99, tpot_mean_ms=tpot, tpot_p99_ms=None,
                    e2el_mean_ms=ttft + (n - 1) * tpot, e2el_p99_ms=None, running=hi, request_rate=rate,
                    output_tps=rate * n, eager=eager(cfg, math.ceil(hi) + 1))


def max_concurrency(cfg: ReferenceConfig, slos: Sequence[Slo], shape: Shape, limit: int = 4096) -> int:
    """The highest C (<= limit) whose closed-loop expectation meets every SLO; 0 when C = 1 does not.
    Every figure is nondecreasing in C, so the first C that fails ends the search."""
    best = 0
    for c in range(1, limit + 1):
        if not closed_loop(cfg, c, shape).meets(slos):
            break
        best = c
    return best


def max_rate(cfg: ReferenceConfig, slos: Sequence[Slo], shape: Shape,
             arrival: Literal["constant", "poisson"] = "constant", rel_tol: float = 1e-6) -> float:
    """The highest rate (req/s) whose expectation meets every SLO (0.0 when none does), by bisection:
    every figure is nondecreasing in the rate."""
    if arrival == "poisson" and any(s.stat == "p99" and s.metric != "ttft" for s in slos):
        raise UsageError("Poisson arrivals have a closed-form p99 of TTFT only",
                         hint="state the TPOT or E2EL SLO on the mean, or use arrival='constant'")
    at = constant_rate if arrival == "constant" else poisson_rate
    lo, hi = 0.0, 1.0
    while at(cfg, hi, shape).meets(slos):
        lo, hi = hi, hi * 2
        if hi > 1e9:
            return math.inf
    while hi - lo > rel_tol * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if at(cfg, mid, shape).meets(slos) else (lo, mid)
    return lo
