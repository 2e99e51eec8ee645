"""metrics/verdict.py, rule by rule at each edge: the error budget (failed / sent above --max-error-rate fails, at it
passes), every request refused with a 4xx (429 is load, not refusal), the last three sends all refused
connections (the server gone), the client out of descriptors, length mismatches and the cause each names (the
most common difference, the count it covers), a server that died, an interrupted cell. Each message's numbers
are checked against the records they came from, over any mix of outcomes hypothesis draws."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.client.records import OUT_OF_FILES, RequestRecord
from tokenbench.metrics import verdict as v
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import ClientHealth, Interruption
from tokenbench.metrics.tally import UNREACHABLE_AFTER, Outcomes


def rec(i: int, kind: str | None = None, sent: int | None = None, **fields) -> RequestRecord:
    """Request i (sent at 10 i ns unless told), 4 tokens asked and given, failed with `kind`; `fields`: the
    record's own (status, error_detail, length_error, completion_tokens, prompt_tokens, finish_reason, ...)."""
    sent = i * 10 if sent is None else sent
    fields = {"status": 200, "finish_reason": "length", **fields}
    return RequestRecord(index=i, phase="measure", input_len=8, output_len=4, intended_ns=sent, sent_ns=sent,
                         end_ns=sent + 5, token_times_ns=[sent + 1], token_counts=[4],
                         error_kind=kind, **fields)


# ---- the error budget --------------------------------------------------------------------------
@pytest.mark.parametrize(("failed", "rate", "status"), [(0, 0.0, "ok"), (1, 0.0, "failed"), (1, 0.1, "ok"),
                                                         (2, 0.1, "failed"), (5, 0.5, "ok"), (6, 0.5, "failed")])
def test_a_cell_fails_when_more_requests_failed_than_the_rate_allows_and_passes_at_it(failed, rate, status):
    recs = [rec(i, "timeout" if i < failed else None, error_detail=f"slow {i}") for i in range(10)]
    got, message = v.verdict(recs, False, rate)
    assert got == status
    if status == "failed":
        assert message.startswith(f"{failed}/10 requests failed (timeout={failed}); first: slow 0 ")
        assert "raise --max-error-rate" in message


def test_the_failure_message_counts_each_kind_most_common_first_and_names_the_first_failure_by_index():
    recs = [rec(5, "timeout", error_detail="t5"), rec(3, "connect", error_detail="c3"), rec(4, "timeout", error_detail="t4"),
            rec(9, "timeout", error_detail="t9"), rec(0), rec(1, "http_status", status=500, error_detail="h1")]
    _, message = v.verdict(recs, False, 0.0)
    assert message.startswith("5/6 requests failed (timeout=3, connect=1, http_status=1); first: h1 ")
    long = [rec(0, "timeout", error_detail="x" * 300), rec(1)]
    assert f"first: {'x' * 200} (every failure is a request that outlived --timeout" in v.verdict(long, False, 0.0)[1]


@pytest.mark.parametrize("kind", ["connect", "stream", "http_status"])
def test_one_failure_that_is_no_timeout_is_never_advised_a_longer_timeout(kind):
    """One of ten requests failed, not by --timeout: the advice is the error budget's, and --timeout is named
    only where every failure was one."""
    recs = [rec(0, kind, status=503 if kind == "http_status" else 200, error_detail="x"), *map(rec, range(1, 10))]
    got, message = v.verdict(recs, False, 0.0)
    assert got == "failed" and message.endswith(f"({v.BUDGET})") and "--timeout" not in message
    timed_out = [rec(0, "timeout", error_detail="x"), *map(rec, range(1, 10))]
    assert "outlived --timeout" in v.verdict(timed_out, False, 0.0)[1]


def test_no_request_sent_fails():
    assert v.verdict([], False, 1.0) == ("failed", "no request was sent")


@settings(deadline=None)
@given(st.lists(st.sampled_from([None, "timeout", "connect", "http_status", "stream"]), min_size=1, max_size=40),
       st.floats(0.0, 1.0))
def test_the_budget_is_failed_over_sent_whatever_the_mix(kinds, rate):
    recs = [rec(i, k, status=503 if k == "http_status" else 200) for i, k in enumerate(kinds)]
    failed = sum(k is not None for k in kinds)
    status, message = v.verdict(recs, False, rate)
    assert status == ("failed" if failed / len(kinds) > rate else "ok")
    if status == "failed":
        counts = Counter(k for k in kinds if k is not None).most_common()
        assert message.startswith(f"{failed}/{len(kinds)} requests failed ({', '.join(f'{k}={n}' for k, n in counts)})")


# ---- refused requests --------------------------------------------------------------------------
@pytest.mark.parametrize("code", [400, 404, 422, 499])
def test_every_request_refused_with_a_4xx_is_a_request_problem_not_load(code):
    recs = [rec(i, "http_status", status=code, error_detail="bad model " + "y" * 300) for i in range(4)]
    status, message = v.verdict(recs, False, 1.0)
    assert status == "failed"
    assert message.startswith(f"every request was refused with HTTP {code} (bad model {'y' * 150}): a request problem")
    assert "y" * 151 not in message and message.endswith("and what the server accepts")
    assert "drop --no-probe" in v.verdict(recs, False, 1.0, no_probe=True)[1]


@pytest.mark.parametrize("codes", [[429] * 3, [400, 400, 500], [399, 400], [500], [400, 400, 429]])
def test_429_a_5xx_or_a_mix_with_them_is_not_a_refusal(codes):
    recs = [rec(i, "http_status", status=c) for i, c in enumerate(codes)]
    assert v.refused_requests(Outcomes.of(recs), False) is None


def test_a_refusal_needs_every_request_answered_4xx():
    recs = [rec(0, "http_status", status=400), rec(1)]
    assert v.refused_requests(Outcomes.of(recs), False) is None
    assert v.refused_requests(Outcomes.of([rec(0, "http_status", status=400)]), False) is not None
    assert v.refused_requests(Outcomes(), False) is None


@pytest.mark.parametrize("code", [401, 403])
def test_a_refused_key_says_which_fix(code):
    recs = [rec(i, "http_status", status=code, error_detail="denied") for i in range(3)]
    assert v.refused_requests(Outcomes.of(recs), True) == (
        f"the server rejected the API key: every request got HTTP {code} (denied); check the key's value")
    assert v.refused_requests(Outcomes.of(recs), False) == (
        f"the server requires an API key: every request got HTTP {code} (denied); pass --api-key-env VAR")


def test_the_most_common_code_is_named():
    recs = [rec(0, "http_status", status=404), rec(1, "http_status", status=400), rec(2, "http_status", status=400)]
    assert "refused with HTTP 400" in v.refused_requests(Outcomes.of(recs), False)


# ---- the server gone, the client out of descriptors --------------------------------------------
def test_the_last_three_sends_refused_mean_the_server_is_gone():
    assert UNREACHABLE_AFTER == 3
    ok = [rec(0), rec(1)]
    gone = [rec(i, "connect", error_detail=f"refused {i}") for i in range(2, 5)]
    assert v.unreachable([*ok, *gone]) == "refused 4"
    assert v.unreachable([*ok, *gone[:2]]) is None                      # two are not enough
    assert v.unreachable([*gone[:2], rec(9, sent=100), gone[2]]) is None  # the last send answered
    assert v.unreachable([rec(i, "connect") for i in range(3)]) == "connection refused"
    assert v.unreachable([rec(i, "connect", error_detail="z" * 300) for i in range(3)]) == "z" * 200
    assert v.unreachable([rec(i, "timeout") for i in range(3)]) is None


def test_the_tail_is_in_send_order_not_index_order():
    recs = [rec(0, "connect", sent=50), rec(1, "connect", sent=60), rec(2, "connect", sent=70), rec(3, sent=10)]
    assert v.unreachable(recs) is not None
    assert v.unreachable([rec(0, sent=90), *recs[:3]]) is None


def _cell(recs: list[RequestRecord], planned: int | None = None, **policy) -> v.Verdict:
    return v.cell_verdict(Outcomes.of(recs), CellSummary(), v.VerdictPolicy(base_url="http://h:1", **policy), planned)


def test_a_server_gone_fails_the_cell_with_what_was_not_sent():
    recs = [rec(0), *(rec(i, "connect", error_detail="refused") for i in range(1, 4))]
    got = _cell(recs, planned=10, max_error_rate=1.0)
    assert got.status == "failed" and got.unreachable == got.message
    assert got.message == ("server unreachable at http://h:1: 3 consecutive connection failures (refused); "
                           "6 of 10 requests not sent")
    assert _cell(recs, max_error_rate=1.0).message.endswith("; the rest not sent")


def test_a_client_out_of_descriptors_says_so_before_the_server():
    recs = [rec(0), *(rec(i, "connect", error_detail=f"{OUT_OF_FILES} {'d' * 200}") for i in range(1, 4))]
    got = _cell(recs, planned=8, max_error_rate=1.0)
    assert got.status == "failed" and got.message.startswith(
        f"the client ran out of file descriptors ({OUT_OF_FILES} {'d' * (160 - len(OUT_OF_FILES) - 1)}): lower")
    assert got.message.endswith("raise `ulimit -n`; 4 of 8 requests not sent")


def test_an_ok_cell_has_its_status_and_no_loss():
    got = _cell([rec(0), rec(1)])
    assert (got.status, got.message, got.unreachable, got.died, got.marks) == ("ok", "", None, None, {})


# ---- lengths -----------------------------------------------------------------------------------
def test_a_length_mismatch_fails_unless_allowed_and_counts_the_requests():
    recs = [rec(0, length_error="short", completion_tokens=2, finish_reason="stop"), rec(1), rec(2)]
    status, message = v.verdict(recs, False, 1.0)
    assert status == "failed" and message.startswith("1/3 requests had the wrong length: the server stopped at "
                                                     "end-of-sequence before max_tokens")
    assert v.verdict(recs, True, 1.0) == ("ok", "")


@pytest.mark.parametrize("finish", v.EOS_REASONS)
def test_early_ends_at_end_of_sequence_name_ignore_eos(finish):
    bad = [rec(i, length_error="x", completion_tokens=1, finish_reason=finish) for i in range(3)]
    assert v.diagnose_mismatch(bad).startswith("the server stopped at end-of-sequence before max_tokens")


def test_early_ends_of_which_one_is_not_at_end_of_sequence_are_not_named_eos():
    bad = [rec(0, length_error="x", completion_tokens=1, finish_reason="stop"), rec(1, length_error="x", completion_tokens=1,
                                                                      finish_reason="length")]
    assert "end-of-sequence" not in v.diagnose_mismatch(bad)
    assert v.diagnose_mismatch(bad).startswith("the server generated -3 output tokens versus max_tokens (2 requests")


def test_a_prompt_counted_differently_names_the_most_common_difference():
    bad = [rec(0, length_error="x", prompt_tokens=9, completion_tokens=4), rec(1, length_error="x", prompt_tokens=9, completion_tokens=4),
           rec(2, length_error="x", prompt_tokens=6, completion_tokens=4), rec(3, length_error="x", prompt_tokens=8, completion_tokens=4)]
    assert v.diagnose_mismatch(bad).startswith(
        "the server counted +1 prompt tokens versus the workload's count (3 requests): it likely adds special")
    told = [rec(0, length_error="x", prompt_tokens=12, completion_tokens=4, expected_prompt_tokens=10)]
    assert v.diagnose_mismatch(told).startswith("the server counted +2 prompt tokens")
    assert v.diagnose_mismatch([rec(0, length_error="x", prompt_tokens=10, completion_tokens=4, expected_prompt_tokens=10)]).startswith(
        "the server returned a different number")


def test_outputs_off_the_asked_length_name_max_tokens():
    bad = [rec(0, length_error="x", completion_tokens=6), rec(1, length_error="x", completion_tokens=6),
           rec(2, length_error="x", completion_tokens=3), rec(3, length_error="x", completion_tokens=4)]
    assert v.diagnose_mismatch(bad).startswith("the server generated +2 output tokens versus max_tokens (3 requests;")
    assert v.diagnose_mismatch([rec(0)]).startswith("the server returned a different number of tokens")


# ---- a server that died, a cell interrupted ------------------------------------------------------
def test_a_server_that_died_fails_the_cell_with_the_cause_first():
    ok = v.Verdict("ok")
    ours = v.server_gone(ok, "exit 137", ours=True)
    assert (ours.status, ours.message, ours.died) == ("failed", "server died during the cell: exit 137", "exit 137")
    theirs = v.server_gone(v.Verdict("failed", "2/4 requests failed"), "no answer", ours=False)
    assert theirs.message == "server unreachable: no answer; 2/4 requests failed" and theirs.died == "no answer"
    said = v.Verdict("failed", "gone", unreachable="gone")
    assert v.server_gone(said, "no answer", ours=False) == said
    assert v.server_gone(ok, None, ours=True) is ok and v.server_gone(ok, "", ours=False) is ok


def test_an_interrupted_cell_says_how_far_it_got():
    s = CellSummary().with_(ClientHealth(stopped_after_s=12.345), Interruption(planned=10, cut=2))
    got = v.interrupted(s, 7)
    assert got.status == "interrupted"
    assert got.message == ("interrupted by the user after 12.3 s: 7 of 10 requests finished, 2 cut off (stored as "
                           "cancelled); --resume measures the cell again in full")
    assert v.how_far(CellSummary(), 3) == "3 requests finished, 0 cut off (stored as cancelled)"
    assert v.interrupted(CellSummary(), 0).message.startswith("interrupted by the user after 0.0 s: 0 requests")
