"""The cell verdict: were the lengths what was asked, and did few enough requests fail?"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

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
KEEP_BAD = 100            # requests with a wrong length kept to diagnose the cause


class Outcomes:
    """What the verdict needs of a cell's requests, fed one by one as they finish (in any order):
    counts, the first request and the first failure by index, up to KEEP_BAD requests with a wrong
    length, and the last UNREACHABLE_AFTER in send order."""

    def __init__(self) -> None:
        self.n = self.mismatched = self.failed = 0
        self.kinds, self.codes = Counter[str | None](), Counter[int | None]()
        self.first: RequestRecord | None = None
        self.first_failed: RequestRecord | None = None
        self.bad: list[RequestRecord] = []
        self.tail: list[tuple[int, int, RequestRecord]] = []

    @classmethod
    def of(cls, recs: Sequence[RequestRecord]) -> Outcomes:
        out = cls()
        for r in recs:
            out.add(r)
        return out

    def add(self, r: RequestRecord) -> None:
        self.n += 1
        if self.first is None or r.index < self.first.index:
            self.first = r
        if r.length_error:
            self.mismatched += 1
            if len(self.bad) < KEEP_BAD:
                self.bad.append(r)
        if not r.ok:
            self.failed += 1
            self.kinds[r.error_kind] += 1
            if self.first_failed is None or r.index < self.first_failed.index:
                self.first_failed = r
        if r.error_kind == "http_status":
            self.codes[r.status] += 1
        self.tail = sorted([*self.tail, (r.sent_ns, r.index, r)], key=lambda e: e[:2])[-UNREACHABLE_AFTER:]


def unreachable(recs: Sequence[RequestRecord] | Outcomes) -> str | None:
    """The last error when the cell's last UNREACHABLE_AFTER requests (in send order) all failed to connect:
    the server went away (or never answered); None otherwise."""
    tail = [e[2] for e in (recs if isinstance(recs, Outcomes) else Outcomes.of(recs)).tail]
    if len(tail) == UNREACHABLE_AFTER and all(r.error_kind == "connect" for r in tail):
        return tail[-1].error_detail[:200] or "connection refused"
    return None


def refused_requests(seen: Outcomes, api_key_sent: bool) -> str | None:
    """Every request answered HTTP 4xx: a problem of the requests (or the key), not of load."""
    codes = seen.codes
    if not seen.n or sum(codes.values()) != seen.n or not all(c and 400 <= c < 500 and c != 429 for c in codes):
        return None
    code, detail = codes.most_common(1)[0][0], seen.first.error_detail[:160] if seen.first else ""
    if code in (401, 403):
        return (f"the server rejected the API key: every request got HTTP {code} ({detail}); check the key's value"
                if api_key_sent else
                f"the server requires an API key: every request got HTTP {code} ({detail}); pass --api-key-env VAR")
    return (f"every request was refused with HTTP {code} ({detail}): a request problem, not load; check the model "
            "name (--model), the API (--api completions|chat) and what the server accepts")


def verdict(recs: Sequence[RequestRecord] | Outcomes, allow_mismatch: bool, max_error_rate: float,
            api_key_sent: bool = False) -> tuple[Literal["ok", "failed"], str]:
    """("ok", "") or ("failed", one-line reason). Length mismatches fail unless allowed; a cell whose
    requests all got 4xx, or whose server became unreachable, says so instead of blaming the error budget."""
    seen = recs if isinstance(recs, Outcomes) else Outcomes.of(recs)
    if not seen.n:
        return "failed", "no request was sent"
    refused = refused_requests(seen, api_key_sent)
    if refused:
        return "failed", refused
    if seen.mismatched and not allow_mismatch:
        return "failed", f"{seen.mismatched}/{seen.n} requests had the wrong length: {diagnose_mismatch(seen.bad)}"
    if seen.failed / seen.n > max_error_rate:
        detail = ", ".join(f"{k}={n}" for k, n in seen.kinds.most_common())
        first = seen.first_failed.error_detail[:200] if seen.first_failed else ""
        return "failed", (f"{seen.failed}/{seen.n} requests failed ({detail}); first: {first} "
                          f"(raise --max-error-rate to tolerate failures)")
    return "ok", ""
