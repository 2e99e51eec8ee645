"""Metric formulas on tiny integer-nanosecond records (1 ms = 1_000_000 ns)."""

import math
import random

import pytest

from tokenbench.client.records import RequestRecord
from tokenbench.load.arrivals import offsets_ns
from tokenbench.metrics import request as rm
from tokenbench.metrics.request import describe, percentile
from tokenbench.metrics.summary import steady_window, summarize, sustained_concurrency
from tokenbench.spec.bench import SLO, Load

MS = 1_000_000


def rec(i, sent_ms, token_ms, counts=None, intended_ms=None, error=None):
    counts, prompt = counts or [1] * len(token_ms), 4
    return RequestRecord(index=i, phase="measure", input_len=prompt, output_len=sum(counts),
                         intended_ns=(intended_ms if intended_ms is not None else sent_ms) * MS,
                         sent_ns=sent_ms * MS, end_ns=(token_ms[-1] + 1) * MS if token_ms else sent_ms * MS,
                         token_times_ns=[t * MS for t in token_ms], token_counts=counts,
                         prompt_tokens=prompt, completion_tokens=sum(counts), usage_source="server",
                         error_kind=error)


def test_request_formulas():
    r = rec(0, 0, [100, 120, 140, 160])   # end at 161 ms
    assert rm.ttft_ms(r) == 100
    assert rm.e2el_ms(r) == 161                              # to the end of the stream: the tail included
    assert rm.tpot_ms(r) == pytest.approx((160 - 100) / 3)   # to the last token (vLLM's)
    assert rm.stream_tail_ms(r) == 1
    assert rm.itl_ms(r) == [20, 20, 20]
    assert rm.ntpot_ms(r) == pytest.approx(161 / 4)


def test_chunk_with_k_tokens_counts_k():
    r = rec(0, 0, [100, 140], counts=[2, 2])
    assert r.output_tokens == 4
    assert rm.tpot_ms(r) == pytest.approx((140 - 100) / 3)
    assert rm.itl_ms(r) == [40]


def test_single_token_has_no_tpot():
    assert rm.tpot_ms(rec(0, 0, [50])) is None


def test_queue_time_is_send_minus_intended():
    assert rm.queue_ms(rec(0, 30, [40], intended_ms=10)) == 20


def test_percentiles_one_value_and_ties():
    assert percentile([5.0], 99) == 5.0
    assert percentile([1.0, 1.0, 1.0, 2.0], 50) == 1.0
    assert percentile([0.0, 10.0], 90) == pytest.approx(9.0)   # numpy linear interpolation
    assert math.isnan(percentile([], 50))
    d = describe([3.0, 1.0, 2.0], "x")
    assert d["median_x_ms"] == 2.0 and d["max_x_ms"] == 3.0 and d["mean_x_ms"] == 2.0


def test_summary_throughputs_and_counts():
    recs = [rec(0, 0, [100, 200]), rec(1, 0, [100, 300]), rec(2, 0, [50], error="http_status")]
    load = Load(concurrency=3, num_prompts=3)
    s = summarize(recs, load, 4, 2, SLO(ttft_ms=150, e2el_ms=250)).to_dict()
    assert s["completed"] == 2 and s["failed"] == 1 and s["failed_by_kind"] == {"http_status": 1}
    dur = 0.301   # first intended 0 -> last end 301 ms
    assert s["duration"] == pytest.approx(dur)
    assert s["request_throughput"] == pytest.approx(2 / dur)
    assert s["output_throughput"] == pytest.approx(4 / dur)       # 2 ok requests x 2 tokens
    assert s["total_token_throughput"] == pytest.approx((8 + 4) / dur)
    assert s["request_goodput"] == pytest.approx(1 / dur)          # only request 0 meets e2el <= 250
    assert s["achieved_concurrency"] == pytest.approx((0.201 + 0.301 + 0.051) / dur)


def test_throughput_times_duration_equals_tokens():
    rng = random.Random(1)
    recs = [rec(i, rng.randrange(0, 50), sorted(rng.sample(range(60, 400), 5))) for i in range(20)]
    s = summarize(recs, Load(concurrency=4, num_prompts=20), 4, 5).to_dict()
    assert s["output_throughput"] * s["duration"] == pytest.approx(s["total_output_tokens"])


def test_steady_window_closed_loop():
    # two slots: full from t=10 (second send) until the first end after the last refill
    recs = [rec(0, 0, [50]), rec(1, 10, [60]), rec(2, 51, [90]), rec(3, 61, [100])]
    w = steady_window(recs, Load(concurrency=2, num_prompts=4))
    assert w == (10 * MS, 91 * MS)


def test_poisson_arrivals_hit_requested_rate():
    offs = list(offsets_ns(20.0, "poisson", random.Random(7), count=4000))
    rate = (len(offs) - 1) / (offs[-1] / 1e9)
    assert rate == pytest.approx(20.0, rel=0.05)
    gaps = [b - a for a, b in zip(offs, offs[1:], strict=False)]
    cv = (sum((g - sum(gaps) / len(gaps)) ** 2 for g in gaps) / len(gaps)) ** 0.5 / (sum(gaps) / len(gaps))
    assert cv == pytest.approx(1.0, abs=0.1)   # exponential gaps


def test_constant_arrivals_are_absolute():
    offs = list(offsets_ns(4.0, "constant", random.Random(0), duration_s=1.0))
    assert offs == [0, 250_000_000, 500_000_000, 750_000_000]


def test_sustained_concurrency_counts_the_replacement_gaps_only():
    # C=2: ends at 10 and 11 (end = last token + 1); replacements sent 2 ms and 2 ms late.
    # From the 2nd send (1) to the last send (13): 2 in flight for 9 ms, 1 for 1, 0 for 1, 1 for 1.
    recs = [rec(0, 0, [5, 9]), rec(1, 1, [6, 10]), rec(2, 12, [15, 19]), rec(3, 13, [16, 20])]
    load = Load(concurrency=2, num_prompts=4)
    assert sustained_concurrency(recs, load) == pytest.approx((2 * 9 + 1 + 0 + 1) / 12)
    # replaced the moment each ended: exactly C, although the ramp and the drain hold fewer
    tight = [rec(0, 0, [5, 9]), rec(1, 1, [6, 10]), rec(2, 10, [15, 19]), rec(3, 11, [16, 20])]
    assert sustained_concurrency(tight, load) == pytest.approx(2.0)
    assert summarize(tight, load, 4, 2).achieved_concurrency < 2.0
    assert sustained_concurrency(recs[:2], Load(concurrency=2, num_prompts=2)) is None    # nothing replaced
    assert sustained_concurrency(recs, Load(request_rate=5.0, num_prompts=4)) is None    # open loop


def test_throughput_truth_is_what_the_server_wrote_over_its_own_span():
    from tokenbench.agreement.calibrate import throughput_truth
    log = [{"recv_ns": 1 * MS, "write_ns": [100 * MS, 300 * MS], "completion_tokens": 10},
           {"recv_ns": 2 * MS, "write_ns": [101 * MS, 501 * MS], "completion_tokens": 30},
           {"recv_ns": 3 * MS, "write_ns": [], "completion_tokens": 0}]          # failed before a token
    assert throughput_truth(log) == pytest.approx(40 / 0.5)
