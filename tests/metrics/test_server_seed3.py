"""metrics/server.py at an edge a held-out mutation draw (seed 3) found untested: a cell whose only joined
requests are its warmup's (or failed ones) has a clock offset from them but no measured request to put on the
ledger: the ledger counts its requests, states no phase, and does not fail."""

from __future__ import annotations

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import server as sv
from tokenbench.metrics.health import claim_ms

MS = 1_000_000


def _record(index: int, phase: str = "measure", error: str | None = None) -> RequestRecord:
    return RequestRecord(index=index, phase=phase, input_len=8, output_len=4, intended_ns=0, sent_ns=0,
                         end_ns=21 * MS, status=200, token_times_ns=[10 * MS, 20 * MS], token_counts=[1, 1],
                         error_kind=error)


def test_an_offset_from_warmup_spans_alone_puts_no_measured_request_on_the_ledger():
    timing = sv.ServerTiming(arrival_ns=3 * MS, ttft_ns=4 * MS, e2e_ns=10 * MS)
    warm = sv.attach(_record(0, phase="warmup"), timing)
    failed = sv.attach(_record(1, error="http_status"), timing)
    join = sv.CellJoin()
    for r in (warm, failed, _record(2), _record(3)):
        join.add(r)
    assert join.bounds.offset() is not None                      # the warmup's span gives the offset
    book = join.ledger(sv.SpanCounts(), claim_ms)
    assert (book.requests, book.joined, book.missing) == (2, 0, 2)
    assert book.mean_ms is None and book.clock_offset_ms is None and book.delivery_flagged is None
