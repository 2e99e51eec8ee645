"""Server-sent events decoding without I/O: `feed(bytes) -> events`, then `flush()`.

Bytes are split into lines at the byte level (so a UTF-8 character split across reads is never
decoded half), lines are grouped into events at blank lines, and only `data:` fields are kept.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class SSEEvent:
    data: str | None = None        # joined `data:` field lines; None for a malformed event
    malformed: str | None = None   # the offending line, when the event could not be understood


class SSEDecoder:
    def __init__(self) -> None:
        self._buf = bytearray()
        self._data: list[str] = []
        self._bad: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._buf += chunk
        events: list[SSEEvent] = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                return events
            line = bytes(self._buf[:nl])
            del self._buf[: nl + 1]
            event = self._line(line[:-1] if line.endswith(b"\r") else line)
            if event is not None:
                events.append(event)

    def flush(self) -> list[SSEEvent]:
        """End of stream: a trailing line without newline, then any unterminated event."""
        events: list[SSEEvent] = []
        if self._buf:
            line = bytes(self._buf)
            self._buf.clear()
            event = self._line(line)
            if event is not None:
                events.append(event)
        end = self._line(b"")
        if end is not None:
            events.append(end)
        return events

    def _line(self, line: bytes) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            self._bad = self._bad or repr(line[:80])
            return None
        if text.startswith(":"):
            return None  # comment / keep-alive
        field, sep, value = text.partition(":")
        if not sep:
            self._bad = self._bad or text[:80]
            return None
        if field == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        elif field not in ("event", "id", "retry"):
            self._bad = self._bad or text[:80]
        return None

    def _dispatch(self) -> SSEEvent | None:
        if self._bad is not None:
            bad, self._bad, self._data = self._bad, None, []
            return SSEEvent(malformed=bad)
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return SSEEvent(data=data)
