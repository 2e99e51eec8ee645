"""Reads that carried many token chunks of one request (BUFFERED_CHUNKS or more: they share the read's
stamp), kept as the cell's requests are tallied: the evidence of a stream delivered in pieces (two or
three chunks in a read happen whenever a server writes them close together). Whether the client's loop was
held up at that moment (its own stall) or quiet (a server or proxy buffered the stream) is decided once
the cell's stalls are known (metrics/figure_bounds.py). Formulas: docs/metrics.md ("Client health")."""

from __future__ import annotations

from array import array
from itertools import groupby

import numpy as np

BUFFERED_CHUNKS = 4     # a read of at least this many token chunks of one request: the stream came in pieces


def _reads(times: list[int]) -> list[tuple[int, int]]:
    """(stamp, chunks) of each read, in order (chunks of one read share its stamp)."""
    return [(t, sum(1 for _ in group)) for t, group in groupby(times)]


class Coalesced:
    """Per read of many chunks: its stamp, how late its chunks may be (`delay`), and the ITL gaps it
    touches. The delay of a chunk in such a read is its stamp minus the stamp two reads earlier (the
    request's send for the first two reads): a piece may end inside an event, so the chunk's event may
    have left the server before the previous read."""

    def __init__(self) -> None:
        self.stamp, self.delay, self.gaps, self.chunks = array("q"), array("q"), array("q"), array("q")

    def add(self, times: list[int], sent: int) -> None:
        k = BUFFERED_CHUNKS - 1
        if not any(a == b for a, b in zip(times, times[k:], strict=False)):
            return                                   # no read of BUFFERED_CHUNKS chunks: the common case
        reads = _reads(times)
        for g, (stamp, n) in enumerate(reads):
            if n < BUFFERED_CHUNKS:
                continue
            base = reads[g - 2][0] if g >= 2 else sent
            out = g + 1 < len(reads) and reads[g + 1][1] < BUFFERED_CHUNKS   # the gap out, unless the next owns it
            self.stamp.append(stamp)
            self.delay.append(stamp - base)
            self.gaps.append(n - 1 + (g > 0) + out)
            self.chunks.append(n)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(stamp, delay, gaps, chunks) of every coalesced read, ns and counts."""
        def view(a: array) -> np.ndarray:
            return np.frombuffer(a, np.int64) if a else np.zeros(0, np.int64)
        return view(self.stamp), view(self.delay), view(self.gaps), view(self.chunks)
