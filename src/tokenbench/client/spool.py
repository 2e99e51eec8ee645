"""A cell's records on disk while it runs: each finished record is appended as one JSON line to an
anonymous temporary file (deleted when closed, or when the process ends), so memory holds none of them;
the store and the JSON result read them back, as often as they need, after the cell."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Iterator

from tokenbench.client.records import RequestRecord

FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord))


class Spool:
    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile("w+", encoding="utf-8")
        self.count = 0

    def add(self, r: RequestRecord) -> None:
        self.file.write(json.dumps([getattr(r, f) for f in FIELDS], separators=(",", ":")))
        self.file.write("\n")
        self.count += 1

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[RequestRecord]:
        """Every record in the order added (a fresh pass each time it is iterated)."""
        self.file.flush()
        self.file.seek(0)
        for line in self.file:
            yield RequestRecord(**dict(zip(FIELDS, json.loads(line), strict=True)))
        self.file.seek(0, 2)

    def close(self) -> None:
        self.file.close()
