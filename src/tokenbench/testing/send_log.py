"""The reference server's send log (one JSON line per request, written one per loop turn so a burst
of finished requests never blocks the writes that are due) and its arrival log (every generation
request's arrival, in arrival order, served at GET /arrivals)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from tokenbench.errors import UsageError


def _line(record: dict) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"


class SendLog:
    def __init__(self, path: str | None) -> None:
        try:
            self._file = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
        except OSError as exc:
            raise UsageError(f"cannot write the send log {path}: {exc.strerror}",
                             hint="pass a path in a writable folder") from None
        self._pending: deque[dict] = deque()
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._drain()) if path else None

    def add(self, record: dict) -> None:
        if self._file is not None:
            self._pending.append(record)
            self._wake.set()

    async def _drain(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending and self._file is not None:
                self._file.write(_line(self._pending.popleft()))
                await asyncio.sleep(0)
            if self._file is not None:
                self._file.flush()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            while self._pending and self._file is not None:
                self._file.write(_line(self._pending.popleft()))
            if self._file is not None:
                self._file.close()


@dataclass(frozen=True, slots=True)
class Arrival:
    recv_ns: int               # the handler started (perf_counter_ns), as the send log's recv_ns
    path: str
    x_request_id: str | None
    session_id: str | None


def gaps_ms(recv_ns: Sequence[int]) -> list[float]:
    """Gaps between consecutive arrivals (ms), in arrival order."""
    ordered = sorted(recv_ns)
    return [(b - a) / 1e6 for a, b in zip(ordered, ordered[1:], strict=False)]


def achieved_rate(recv_ns: Sequence[int]) -> float | None:
    """Arrivals per second from the first to the last: (n - 1) / (last - first); None under 2."""
    if len(recv_ns) < 2 or max(recv_ns) == min(recv_ns):
        return None
    return (len(recv_ns) - 1) / ((max(recv_ns) - min(recv_ns)) / 1e9)


class ArrivalLog:
    """Every generation request's arrival (refused ones too), kept in memory in arrival order."""

    def __init__(self) -> None:
        self.rows: list[Arrival] = []

    def add(self, arrival: Arrival) -> None:
        self.rows.append(arrival)

    def since(self, first: int = 0) -> dict:
        """The JSON of GET /arrivals?since=first: arrivals from index `first` on and their gaps."""
        rows = self.rows[max(first, 0):]
        return {"count": len(self.rows), "since": max(first, 0), "arrivals": [asdict(r) for r in rows],
                "gaps_ms": gaps_ms([r.recv_ns for r in rows]),
                "rate_per_s": achieved_rate([r.recv_ns for r in rows])}
