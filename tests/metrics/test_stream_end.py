"""Stream ends (issue 24, build 4), over real loopback HTTP against the reference server: a stream whose
end comes late (`slow_end`: `[DONE]` 300 ms after the last token, as after a gateway's hook) keeps the
TPOT and ITL of the same server without the fault, and its stream tail shows the delay; a stream that ends
cleanly without `[DONE]` (`no_done`) is a complete request. Bounds: the tolerance plus what the client and
the servers waited for a CPU meanwhile (tests/contention.py)."""

from __future__ import annotations

import pytest

from tests.contention import WatchedReference, mean_allowance_ms
from tokenbench.load.cell import CellResult
from tokenbench.report.explain import tail_note
from tokenbench.spec.study import StudySpec
from tokenbench.study.run import measure
from tokenbench.testing.reference_server import ReferenceConfig

pytestmark = pytest.mark.slow

N, OUT, ITL_MS, SLOW_S = 8, 12, 10.0, 0.3
TOLERANCE = 0.05          # the accuracy tokenbench claims for a figure (docs/metrics.md, "Client health")


def cell(faults: dict[str, float]) -> tuple[CellResult, list[dict], float]:
    """One concurrency-1 cell against a fresh reference server; its result, the server's send log of the
    measured requests and what the client and the server waited for a CPU meanwhile (ms)."""
    cfg = ReferenceConfig(ttft_ms=20, itl_ms=ITL_MS, faults=faults, slow_end_s=SLOW_S)
    with WatchedReference(cfg) as ref:
        spec = StudySpec(target={"base_url": ref.url}, pairs=[(16, OUT)], concurrency=[1],
                         requests={"num_prompts": N}, warmup_requests=0)
        [result] = measure(spec).results
        waited = ref.waited.ms
    log = sorted(ref.send_log(), key=lambda r: r["recv_ns"])
    return result, log, waited


def test_slow_end_keeps_tpot_and_itl_and_shows_the_stream_tail():
    plain, _, waited_plain = cell({})
    slow, log, waited_slow = cell({"slow_end": 1.0})
    assert slow.status == plain.status == "ok"
    a, b = plain.summary, slow.summary
    gap_allow = mean_allowance_ms(waited_plain + waited_slow, 1, N, OUT - 1)
    # TPOT and ITL end at the last token: the same as without the fault, within the tolerance
    assert b.mean_tpot_ms == pytest.approx(a.mean_tpot_ms, abs=TOLERANCE * a.mean_tpot_ms + gap_allow)
    assert b.mean_itl_ms == pytest.approx(a.mean_itl_ms, abs=TOLERANCE * a.mean_itl_ms + gap_allow)
    assert b.p99_itl_ms == pytest.approx(a.p99_itl_ms, abs=TOLERANCE * a.p99_itl_ms + waited_plain + waited_slow)
    # the tail is its own figure: each request's, against the server's own (its [DONE] minus its last token)
    truth = [(r["done_ns"] - r["write_ns"][-1]) / 1e6 for r in log]
    got = [(r.end_ns - r.token_times_ns[-1]) / 1e6 for r in slow.records]
    assert min(truth) >= SLOW_S * 1e3 - 20 - waited_slow               # the server's delay, ~300 ms
    assert all(g == pytest.approx(t, abs=1.0 + waited_slow) for g, t in zip(got, truth, strict=True))
    assert b.tail is not None and b.tail.mean_stream_tail_ms == pytest.approx(sum(got) / N)
    # E2EL runs to the end of the stream: it includes the tail, and nothing else changed
    assert b.mean_e2el_ms - b.tail.mean_stream_tail_ms == pytest.approx(
        a.mean_e2el_ms, abs=TOLERANCE * a.mean_e2el_ms + mean_allowance_ms(waited_plain + waited_slow, 1, N))
    # the report and the console say so where it matters, and only there
    assert tail_note("c", b) is not None and "E2EL includes this stream tail" in tail_note("c", b)
    assert tail_note("c", a) is None


def test_no_done_is_a_complete_request():
    plain, _, waited_plain = cell({})
    bare, log, waited = cell({"no_done": 1.0})
    assert all(r["fault"] == "no_done" and r["done_ns"] is None for r in log)
    s = bare.summary
    assert bare.status == "ok" and (s.completed, s.failed) == (N, 0) and s.total_output_tokens == N * OUT
    assert all(r.ok and r.finish_reason == "length" and r.output_tokens == OUT for r in bare.records)
    gap_allow = mean_allowance_ms(waited_plain + waited, 1, N, OUT - 1)
    assert s.mean_tpot_ms == pytest.approx(plain.summary.mean_tpot_ms, abs=TOLERANCE * s.mean_tpot_ms + gap_allow)
    assert s.tail is not None and s.tail.max_stream_tail_ms <= 1.0 + waited     # the body ends with the last token
