"""The stream tail: from a request's last token-bearing chunk to the end of its stream (the usage-only
chunk and `[DONE]` after the last token, or a gateway's hook, moderation or billing before them). TPOT
and ITL end at the last token (as vLLM's); E2EL runs to the end of the stream, so it includes the tail,
and this group says how much of it that was. Formulas and when a report shows it: docs/metrics.md
("Stream tail")."""

from __future__ import annotations

import numpy as np

from tokenbench.metrics.stats import percentile
from tokenbench.metrics.summary_groups import Group

MS = 1e6
FLOOR_MS = 1.0        # below this a tail cannot be told from the client's own stamping (calibrate's limit)
SHARE = 0.01          # ... nor matter to E2EL: half the smallest effect `compare` names by default (2 %)


class StreamTail(Group):
    """Tail = end of stream - last token-bearing chunk, over ok requests with a token, ms."""

    mean_stream_tail_ms: float | None = None
    median_stream_tail_ms: float | None = None
    p99_stream_tail_ms: float | None = None
    max_stream_tail_ms: float | None = None

    def matters(self, mean_e2el_ms: float | None, p99_e2el_ms: float | None) -> bool:
        """Worth showing: the mean or the p99 tail above FLOOR_MS and above SHARE of the same E2EL figure."""
        pairs = ((self.mean_stream_tail_ms, mean_e2el_ms), (self.p99_stream_tail_ms, p99_e2el_ms))
        return any(tail is not None and e2el and tail > max(FLOOR_MS, SHARE * e2el) for tail, e2el in pairs)


def stream_tail(tails_ns: np.ndarray) -> StreamTail | None:
    """The group over the requests' tails (ns); None without any."""
    if not len(tails_ns):
        return None
    ms = np.sort(tails_ns.astype(np.float64)) / MS
    return StreamTail(mean_stream_tail_ms=float(ms.mean()), median_stream_tail_ms=percentile(ms, 50),
                      p99_stream_tail_ms=percentile(ms, 99), max_stream_tail_ms=float(ms[-1]))
