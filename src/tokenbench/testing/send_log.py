"""The reference server's send log: one JSON line per request, written one per loop turn so a burst
of finished requests never blocks the writes that are due."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque

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
