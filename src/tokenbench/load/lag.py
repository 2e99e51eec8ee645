"""Self-observation: how late the event loop wakes up while a cell runs (client health)."""

from __future__ import annotations

import asyncio
import time

from tokenbench.load.clock import sleep_until
from tokenbench.metrics.stats import percentile
from tokenbench.metrics.summary_groups import ClientHealth


class LoopLagProbe:
    """Sleeps `period_s` in a loop and records how much later than asked it woke up."""

    def __init__(self, period_s: float = 0.01) -> None:
        self.period_ns = int(period_s * 1e9)
        self.lags_ns: list[int] = []
        self._task: asyncio.Task | None = None
        self._cpu0 = 0.0
        self._wall0 = 0

    async def _run(self) -> None:
        due = time.perf_counter_ns() + self.period_ns
        while True:
            await sleep_until(due)
            now = time.perf_counter_ns()
            self.lags_ns.append(now - due)
            due = max(due + self.period_ns, now)

    def start(self) -> None:
        self._cpu0, self._wall0 = time.process_time(), time.perf_counter_ns()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> ClientHealth:
        if self._task:
            self._task.cancel()
        wall = (time.perf_counter_ns() - self._wall0) / 1e9 or 1e-9
        lags = sorted(x / 1e6 for x in self.lags_ns)
        return ClientHealth(loop_lag_p50_ms=percentile(lags, 50) if lags else None,
                            loop_lag_p99_ms=percentile(lags, 99) if lags else None,
                            loop_lag_max_ms=lags[-1] if lags else None,
                            client_cpu_percent=100.0 * (time.process_time() - self._cpu0) / wall)
