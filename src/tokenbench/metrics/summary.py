"""Cell summaries from request records: vLLM `bench serve` key names where the quantity is the same.

Pure functions over records; the figures themselves are computed by metrics/tally.py (a cell that runs
feeds its records there one by one as they finish). Formulas in docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import tally
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.spec.bench import SLO, Load


def tally_of(recs: Sequence[RequestRecord], slo: SLO | None = None) -> tally.CellTally:
    out = tally.CellTally(slo)
    for r in recs:
        out.add(r)
    return out


def _times(recs: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([r.sent_ns for r in recs], np.int64), np.array([r.end_ns for r in recs], np.int64))


def sustained_concurrency(recs: Sequence[RequestRecord], load: Load) -> float | None:
    """Closed loop: time-weighted mean of requests in flight from the moment the C-th request was sent
    (ramp-up done) to the last send (tally.sustained_concurrency)."""
    return tally.sustained_concurrency(*_times(recs), load)


def steady_window(recs: Sequence[RequestRecord], load: Load) -> tuple[int, int] | None:
    """Closed loop: first to last moment the cell held its full concurrency.
    Open loop: from first send + mean E2EL (ramp-up) to the last send."""
    return tally.steady_window(*_times(recs), load) if recs else None


def _steady(ok: Sequence[RequestRecord], window: tuple[int, int] | None) -> dict:
    return tally_of(ok).steady(window)


def summarize(recs: Sequence[RequestRecord], load: Load, input_len: int, output_len: int,
              slo: SLO | None = None) -> CellSummary:
    """Summary of one cell's measured requests (warmup records must be filtered out by the caller)."""
    return tally_of(recs, slo).summary(load, input_len, output_len)
