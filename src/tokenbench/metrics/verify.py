"""The cell verdict: were the lengths what was asked, and did few enough requests fail?"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tokenbench.client.records import RequestRecord


def diagnose_mismatch(recs: Sequence[RequestRecord]) -> str:
    """Name the likely cause of length mismatches from what the server reported."""
    bad = [r for r in recs if r.length_error]
    short = [r for r in bad if r.output_tokens < r.output_len]
    if short and all(r.finish_reason == "stop" for r in short):
        return ("the server stopped at end-of-sequence before max_tokens: it likely ignores "
                "ignore_eos/min_tokens (enable them on the server, or pass --allow-length-mismatch)")
    prompt_off = [r for r in bad if r.prompt_tokens is not None and r.prompt_tokens != r.input_len]
    if prompt_off:
        diff = Counter(r.prompt_tokens - r.input_len for r in prompt_off).most_common(1)[0][0]
        return (f"the server counted {diff:+d} prompt tokens versus what was sent: it likely adds special "
                "tokens (BOS) or re-tokenizes text; use --api completions with token ids")
    return "the server returned a different number of tokens than asked (see each request's error_detail)"


def verdict(recs: Sequence[RequestRecord], allow_mismatch: bool, max_error_rate: float) -> tuple[str, str]:
    """("ok", "") or ("failed", one-line reason). Length mismatches fail unless allowed."""
    if not recs:
        return "failed", "no request was sent"
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
