"""The cell verdict: were the lengths what was asked, and did few enough requests fail?"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tokenbench.client.records import RequestRecord


def _expected(r: RequestRecord) -> int:
    return r.expected_prompt_tokens if r.expected_prompt_tokens is not None else r.input_len


def diagnose_mismatch(recs: Sequence[RequestRecord]) -> str:
    """Name the likely cause of length mismatches from what the server reported."""
    bad = [r for r in recs if r.length_error]
    short = [r for r in bad if r.output_tokens < r.output_len]
    if short and all(r.finish_reason == "stop" for r in short):
        return ("the server stopped at end-of-sequence before max_tokens: it likely ignores "
                "ignore_eos/min_tokens (enable them on the server, or pass --allow-length-mismatch)")
    prompt_off = [r.prompt_tokens - _expected(r) for r in bad if r.prompt_tokens is not None
                  and r.prompt_tokens != _expected(r)]
    if prompt_off:
        diff = Counter(prompt_off).most_common(1)[0][0]
        return (f"the server counted {diff:+d} prompt tokens versus the workload's count "
                f"({len(prompt_off)} requests): it likely adds special tokens (BOS) or re-tokenizes text with "
                "another tokenizer; use --api completions with token ids, or the server's own --tokenizer DIR")
    output_off = [r.output_tokens - r.output_len for r in bad if r.output_tokens != r.output_len]
    if output_off:
        diff = Counter(output_off).most_common(1)[0][0]
        return (f"the server generated {diff:+d} output tokens versus max_tokens ({len(output_off)} requests; "
                "the prompts matched the expected counts): it does not honour max_tokens/min_tokens exactly "
                "(check its sampling settings, or pass --allow-length-mismatch)")
    return "the server returned a different number of tokens than asked (see each request's error_detail)"


UNREACHABLE_AFTER = 3     # the load runner stops sending after this many consecutive `connect` failures


def unreachable(recs: Sequence[RequestRecord]) -> str | None:
    """The last error when the cell's last UNREACHABLE_AFTER requests (in send order) all failed to connect:
    the server went away (or never answered); None otherwise."""
    tail = sorted(recs, key=lambda r: (r.sent_ns, r.index))[-UNREACHABLE_AFTER:]
    if len(tail) == UNREACHABLE_AFTER and all(r.error_kind == "connect" for r in tail):
        return tail[-1].error_detail[:200] or "connection refused"
    return None


def refused_requests(recs: Sequence[RequestRecord], api_key_sent: bool) -> str | None:
    """Every request answered HTTP 4xx: a problem of the requests (or the key), not of load."""
    codes = Counter(r.status for r in recs if r.error_kind == "http_status")
    if not recs or sum(codes.values()) != len(recs) or not all(c and 400 <= c < 500 and c != 429 for c in codes):
        return None
    code, detail = codes.most_common(1)[0][0], recs[0].error_detail[:160]
    if code in (401, 403):
        return (f"the server rejected the API key: every request got HTTP {code} ({detail}); check the key's value"
                if api_key_sent else
                f"the server requires an API key: every request got HTTP {code} ({detail}); pass --api-key-env VAR")
    return (f"every request was refused with HTTP {code} ({detail}): a request problem, not load; check the model "
            "name (--model), the API (--api completions|chat) and what the server accepts")


def verdict(recs: Sequence[RequestRecord], allow_mismatch: bool, max_error_rate: float,
            api_key_sent: bool = False) -> tuple[str, str]:
    """("ok", "") or ("failed", one-line reason). Length mismatches fail unless allowed; a cell whose
    requests all got 4xx, or whose server became unreachable, says so instead of blaming the error budget."""
    if not recs:
        return "failed", "no request was sent"
    refused = refused_requests(recs, api_key_sent)
    if refused:
        return "failed", refused
    mismatched = sum(1 for r in recs if r.length_error)
    if mismatched and not allow_mismatch:
        return "failed", f"{mismatched}/{len(recs)} requests had the wrong length: {diagnose_mismatch(recs)}"
    failed = [r for r in recs if not r.ok]
    if len(failed) / len(recs) > max_error_rate:
        kinds = Counter(r.error_kind for r in failed)
        first = failed[0]
        detail = ", ".join(f"{k}={n}" for k, n in kinds.most_common())
        return "failed", (f"{len(failed)}/{len(recs)} requests failed ({detail}); first: {first.error_detail[:200]} "
                          f"(raise --max-error-rate to tolerate failures)")
    return "ok", ""


# Client self-honesty thresholds (docs/metrics.md, "Client health"). A cell beyond any of them is
# marked invalid: its numbers measure the client, not the server.
LOOP_LAG_P99_MAX_MS = 50.0        # the event loop woke this late: chunk stamps can be this wrong
LOOP_LAG_SHARE_OF_ITL = 0.25      # p50 loop lag above this share of the median ITL ...
LOOP_LAG_P50_FLOOR_MS = 2.0       # ... and above this floor (asyncio timers alone run ~1 ms late)
SCHEDULE_LAG_P99_MAX_MS = 50.0    # open loop without a cap: sends this late versus the schedule
CLIENT_CPU_MAX_PERCENT = 90.0     # per client process: one core nearly saturated


def client_health_verdict(summary: dict, load) -> tuple[str, str]:
    """("ok", "") or ("invalid", reason) from the client's own observations during the cell."""
    reasons = []
    lag99, lag50 = summary.get("loop_lag_p99_ms"), summary.get("loop_lag_p50_ms")
    if lag99 is not None and lag99 > LOOP_LAG_P99_MAX_MS:
        reasons.append(f"event-loop lag p99 {lag99:.1f} ms > {LOOP_LAG_P99_MAX_MS:g} ms")
    itl = summary.get("median_itl_ms")
    if lag50 is not None and itl and itl == itl and lag50 > max(LOOP_LAG_SHARE_OF_ITL * itl, LOOP_LAG_P50_FLOOR_MS):
        reasons.append(f"event-loop lag p50 {lag50:.1f} ms > {LOOP_LAG_SHARE_OF_ITL:.0%} of median ITL {itl:.1f} ms")
    q99 = summary.get("p99_queue_ms")
    if load.concurrency is None and load.max_concurrency is None and q99 and q99 > SCHEDULE_LAG_P99_MAX_MS:
        reasons.append(f"sends ran {q99:.1f} ms (p99) behind the arrival schedule")
    cpu = summary.get("client_cpu_percent")
    per_proc = (cpu or 0) / (summary.get("client_workers") or 1)
    if per_proc > CLIENT_CPU_MAX_PERCENT:
        reasons.append(f"client CPU {per_proc:.0f}% of a core per process > {CLIENT_CPU_MAX_PERCENT:g}%")
    if reasons:
        return "invalid", "client overloaded: " + "; ".join(reasons) + " (use --workers N or a lighter load)"
    return "ok", ""
