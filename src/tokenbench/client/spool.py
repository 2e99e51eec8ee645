"""A cell's records on disk while it runs: each finished record is appended as one JSON line to an
anonymous temporary file (deleted when closed, or when the process ends), so memory holds none of them
but 16 bytes of order per record; the store and the JSON result read them back, as often as they need,
after the cell: warmup first, then measured, each in index order (the order they were sent)."""

from __future__ import annotations

import dataclasses
import tempfile
from array import array
from collections.abc import Iterator
from operator import attrgetter

import msgspec
import numpy as np

from tokenbench.client.records import RequestRecord

FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord))
_values = attrgetter(*FIELDS)             # a record's fields in order, as a tuple (read in C)
PHASE_RANK = {"warmup": 0, "measure": 1}
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(list).decode


class Spool:
    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile("w+b")
        self.keys, self.offsets = array("q"), array("q")      # phase rank and index; where its line starts
        self.end = 0

    def add(self, r: RequestRecord) -> None:
        line = _encode(_values(r)) + b"\n"
        self.file.write(line)
        self.keys.append(PHASE_RANK[r.phase] << 40 | r.index)
        self.offsets.append(self.end)
        self.end += len(line)

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator[RequestRecord]:
        """Every record, warmup then measured, by index (a fresh pass each time it is iterated)."""
        self.file.flush()
        if not self.offsets:
            return
        order = np.argsort(np.frombuffer(self.keys, np.int64), kind="stable")
        offsets = np.frombuffer(self.offsets, np.int64)
        try:
            for k in order:
                self.file.seek(int(offsets[k]))
                yield RequestRecord(**dict(zip(FIELDS, _decode(self.file.readline()), strict=True)))
        finally:
            self.file.seek(self.end)

    def close(self) -> None:
        self.file.close()
