"""`--keep-raw FILE`: every request's raw response body, as it came, appended to a JSONL file.

One line per request, written when the request is parsed: the cell, the phase, the request's index,
status and error kind, its send, header and end stamps (ns, the client's clock), and each body read
as `[ns after the send, text]`, the text being the read's bytes as Latin-1 (byte for byte:
`text.encode("latin-1")` gives them back). The body is as the HTTP framing delivered it (chunked
transfer coding removed); a non-200 answer keeps no body here (its first 512 bytes are in the record's
error detail). Without the option the bytes are dropped as soon as the request is parsed.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from tokenbench.client.records import RawExchange
from tokenbench.errors import OutputError

_encode = msgspec.json.Encoder().encode


class RawLog:
    def __init__(self, path: str | Path, cell: str) -> None:
        self.path, self.cell = Path(path), cell
        try:
            self.file = self.path.open("ab")
        except OSError as exc:
            raise OutputError(f"--keep-raw {self.path}: {exc.strerror}", "give --keep-raw a writable file") from None

    def __call__(self, index: int, phase: str, raw: RawExchange) -> None:
        line = {"cell": self.cell, "phase": phase, "index": index, "status": raw.status,
                "error_kind": raw.error_kind, "sent_ns": raw.sent_ns, "headers_ns": raw.headers_ns,
                "end_ns": raw.end_ns, "reads": [[t - raw.sent_ns, body.decode("latin-1")] for t, body in raw.chunks]}
        try:
            self.file.write(_encode(line) + b"\n")
        except OSError as exc:
            raise OutputError(f"--keep-raw {self.path}: {exc.strerror}", "free space or give --keep-raw another file") from None

    def close(self) -> None:
        self.file.close()
