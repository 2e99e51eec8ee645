"""The reference server's load model, pure: decode step time by batch size, and the prefill queue.

- Decode: one step of a request takes `itl(r) = itl_ms + itl_per_running_ms * r` with r the requests
  running (admitted, not yet ended). With captured batch sizes, r is padded up to the next captured
  size; above the largest the batch runs eager: `(itl_ms + itl_per_running_ms * r) * eager_itl_factor
  + eager_itl_ms`.
- Prefill: one stage, one prompt at a time in arrival order (FIFO), `prefill_ms_per_token` per
  uncached prompt token. The k-th of k requests of L uncached tokens admitted together ends its
  prefill `k * L * prefill_ms_per_token` after admission; the first token is due `ttft_ms` later.

docs/reference-server.md ("Load model") states the same rules and the closed forms built on them
(tokenbench.testing.expect).
"""

from __future__ import annotations

from bisect import bisect_left

from tokenbench.testing.config import ReferenceConfig


def padded(sizes: tuple[int, ...], running: int) -> int | None:
    """The captured batch size a batch of `running` is padded to, or None (eager: above them all)."""
    i = bisect_left(sizes, running)
    return sizes[i] if i < len(sizes) else None


def itl_ms(cfg: ReferenceConfig, running: int) -> float:
    """One decode step (ms) with `running` requests in the batch (at least 1: the one asking)."""
    r = max(running, 1)
    if not cfg.captured_batch_sizes:
        return cfg.itl_ms + cfg.itl_per_running_ms * r
    graph = padded(cfg.captured_batch_sizes, r)
    if graph is not None:
        return cfg.itl_ms + cfg.itl_per_running_ms * graph
    return (cfg.itl_ms + cfg.itl_per_running_ms * r) * cfg.eager_itl_factor + cfg.eager_itl_ms


def eager(cfg: ReferenceConfig, running: int) -> bool:
    """Whether a batch of `running` runs outside the captured sizes (eager mode)."""
    sizes = cfg.captured_batch_sizes
    return bool(sizes) and padded(sizes or (), running) is None


def step_ns(cfg: ReferenceConfig, running: int) -> int:
    """`itl_ms` in integer nanoseconds, the unit of the server's deadlines."""
    if not cfg.load_model:
        return int(cfg.itl_ms * 1e6)   # the fixed ITL, rounded as it always was
    return int(itl_ms(cfg, running) * 1e6)


def ramp_ns(cfg: ReferenceConfig, start_ns: int, now_ns: int) -> int:
    """The ITL ramp (`itl_end_ms`): `itl_ms` at `start_ns`, moving linearly to `itl_end_ms` over `ramp_s`,
    then staying there; integer ns."""
    end = cfg.itl_ms if cfg.itl_end_ms is None else cfg.itl_end_ms
    share = min(max((now_ns - start_ns) / (cfg.ramp_s * 1e9), 0.0), 1.0)
    return int((cfg.itl_ms + (end - cfg.itl_ms) * share) * 1e6)


class PrefillQueue:
    """The prefill stage on a virtual clock (ns): one prompt at a time, in the order added. A prompt
    starts when it is added at `at_ns` or when the one before it ends, whichever is later."""

    def __init__(self) -> None:
        self.free_at = 0

    def add(self, at_ns: int, work_ns: float) -> tuple[int, int]:
        """(start, end) of a prefill of `work_ns` added at `at_ns`."""
        start = max(at_ns, self.free_at)
        self.free_at = start + round(work_ns)
        return start, self.free_at
