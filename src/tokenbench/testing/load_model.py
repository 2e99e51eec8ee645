"""The reference server's load model, pure: decode step time by batch size, and the shared prefill stage.

- Decode: one step of a request takes `itl(r) = itl_ms + itl_per_running_ms * r` with r the requests
  running (admitted, not yet ended). With captured batch sizes, r is padded up to the next captured
  size; above the largest the batch runs eager: `(itl_ms + itl_per_running_ms * r) * eager_itl_factor
  + eager_itl_ms`.
- Prefill: one stage that processes `1 / prefill_ms_per_token` tokens per ms, shared equally by the
  requests prefilling at the time (processor sharing). k requests of L uncached tokens admitted together
  all end their prefill `k * L * prefill_ms_per_token` after admission; the first token is due `ttft_ms`
  later.

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


class SharedPrefill:
    """Processor sharing on a virtual clock (ns): `add` work, `advance` time, read what finished.

    The clock never goes back: work added at a time before the last update starts at that update.
    Completion times are exact (theoretical), whatever the moment `advance` is called.
    """

    def __init__(self) -> None:
        self.t = 0
        self.left: dict[object, float] = {}    # job -> exclusive work left (ns)

    def add(self, key: object, at_ns: int, work_ns: float) -> list[tuple[object, int]]:
        """Start `key` at `at_ns` with `work_ns` of work; returns the jobs that finished before it."""
        done = self.advance(at_ns)
        self.left[key] = float(work_ns)
        return done

    def remove(self, key: object, at_ns: int) -> list[tuple[object, int]]:
        """Drop `key` (its request went away) at `at_ns`; returns the jobs that finished before it."""
        done = self.advance(at_ns)
        self.left.pop(key, None)
        return done

    def next_end(self) -> int | None:
        """When the next job ends if nothing else is added, or None when idle."""
        if not self.left:
            return None
        return self.t + int(-(-min(self.left.values()) * len(self.left) // 1))

    def advance(self, to_ns: int) -> list[tuple[object, int]]:
        """Move the clock to `to_ns`; returns (job, end time) of every job that ended on the way."""
        done: list[tuple[object, int]] = []
        while (end := self.next_end()) is not None and end <= to_ns:
            self._spend(end)
            finished = [k for k, v in self.left.items() if v <= 0.5]
            for k in finished:
                del self.left[k]
            done += [(k, end) for k in finished]
        self._spend(max(to_ns, self.t))
        return done

    def _spend(self, to_ns: int) -> None:
        if self.left and to_ns > self.t:
            share = (to_ns - self.t) / len(self.left)
            self.left = {k: v - share for k, v in self.left.items()}
        self.t = max(self.t, to_ns)
