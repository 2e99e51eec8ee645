"""Per-request figures (metrics/request.py) against their formulas in docs/metrics.md, each at its edges
(no token, one token, two; a reused or a new connection; a connection counted in TTFT or not), and the
goodput test of one request against each SLO at its bound (issue 39: a test for every behaviour a
single-point change could alter)."""

from __future__ import annotations

import pytest

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import request as rm
from tokenbench.spec.bench import SLO

MS = 1_000_000


def rec(times_ms: list[float], sent_ms: float = 10.0, end_ms: float | None = None, out: int | None = None,
        **kw) -> RequestRecord:
    times = [int(t * MS) for t in times_ms]
    end = int((end_ms if end_ms is not None else (times_ms[-1] + 1 if times_ms else sent_ms + 5)) * MS)
    n = len(times) if out is None else out
    return RequestRecord(index=0, phase="measure", input_len=4, output_len=n, intended_ns=int(2 * MS),
                         sent_ns=int(sent_ms * MS), end_ns=end, token_times_ns=times, token_counts=[1] * len(times),
                         completion_tokens=n, usage_source="server", **kw)


def test_each_figure_of_a_request_is_its_formula():
    r = rec([30.0, 34.0, 41.0, 50.0], sent_ms=10.0, end_ms=53.0)
    assert rm.ttft_ms(r) == 20.0                                  # first token - send
    assert rm.e2el_ms(r) == 43.0                                  # end - send
    assert rm.tpot_ms(r) == pytest.approx(20.0 / 3)               # (last - first) / (n - 1), not to the end
    assert rm.stream_tail_ms(r) == 3.0                            # end - last token
    assert rm.ntpot_ms(r) == pytest.approx(43.0 / 4)              # e2el / n
    assert rm.itl_ms(r) == [4.0, 7.0, 9.0]
    assert rm.queue_ms(r) == 8.0                                  # send - intended
    assert rm.ttft_ms(r) + 3 * rm.tpot_ms(r) + rm.stream_tail_ms(r) == pytest.approx(rm.e2el_ms(r))


def test_tokens_per_chunk_divide_tpot_by_the_tokens_not_the_chunks():
    r = rec([30.0, 40.0], out=6)                                  # 6 tokens in 2 chunks
    assert rm.tpot_ms(r) == pytest.approx(10.0 / 5) and rm.itl_ms(r) == [10.0]


def test_the_edges_of_zero_one_and_two_tokens():
    none = rec([], out=0)
    assert (rm.ttft_ms(none), rm.tpot_ms(none), rm.stream_tail_ms(none), rm.ntpot_ms(none)) == (None, None, None, None)
    assert rm.itl_ms(none) == [] and rm.slo_tpot_ms(none) is None
    one = rec([30.0])
    assert rm.ttft_ms(one) == 20.0 and rm.tpot_ms(one) is None and rm.slo_tpot_ms(one) == 0.0
    assert rm.ntpot_ms(one) == rm.e2el_ms(one) and rm.itl_ms(one) == []
    two = rec([30.0, 36.0])
    assert rm.tpot_ms(two) == 6.0 == rm.slo_tpot_ms(two)


def test_first_content_token_and_connection_setup():
    r = rec([30.0, 40.0], first_content_ns=int(40 * MS))
    assert rm.ttfc_ms(r) == 30.0 and rm.ttfc_ms(rec([30.0])) is None
    assert rm.connect_ms(rec([30.0])) is None
    new = rec([30.0], connect_ns=int(3 * MS))
    assert rm.connect_ms(new) == 3.0 and rm.queue_ms(new) == 5.0          # set-up is not queue time
    counted = rec([30.0], connect_ns=int(3 * MS), connect_in_ttft=True)
    assert rm.queue_ms(counted) == 8.0                                      # sent_ns already moved back to it


@pytest.mark.parametrize("slo,ok", [
    (SLO(ttft_ms=20.0), True), (SLO(ttft_ms=19.999), False), (SLO(tpot_ms=6.0), True), (SLO(tpot_ms=5.9), False),
    (SLO(e2el_ms=27.0), True), (SLO(e2el_ms=26.9), False), (SLO(ttft_ms=20.0, tpot_ms=6.0, e2el_ms=27.0), True),
    (SLO(ttft_ms=20.0, tpot_ms=5.0, e2el_ms=27.0), False), (SLO(), True)])
def test_a_request_meets_every_slo_set_at_its_bound(slo, ok):
    assert rm.meets_slo(rec([30.0, 36.0], end_ms=37.0), slo) is ok


def test_a_failed_request_or_one_without_a_token_meets_no_slo():
    assert not rm.meets_slo(rec([30.0, 36.0], error_kind="timeout"), SLO())
    assert not rm.meets_slo(rec([], out=0), SLO(ttft_ms=1e9))
    assert rm.meets_slo(rec([], out=0), SLO(e2el_ms=1e9))                 # only what is set is judged
    assert rm.meets_slo(rec([30.0]), SLO(tpot_ms=0.001))                  # one token: TPOT 0, as vLLM's goodput
