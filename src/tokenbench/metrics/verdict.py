"""The whole verdict of a cell, in one place: were the lengths what was asked and did few enough requests
fail, did the server stay reachable (or was it stopped, or did it die), which figures the client's own
delays could have moved beyond the accuracy tokenbench claims (metrics/health.marks: the cell's status does
not depend on them), and a cell the user stopped. `cell_verdict` returns it typed: the status and its
reason, the figures marked with their cause, and why the server is taken for gone. Nothing downstream
overrules it; the report reads it back from the stored status, message and summary (report/ judgements).
Formulas: docs/metrics.md ("Client health")."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import health
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import ClientHealth, FigureMark, Interruption
from tokenbench.metrics.tally import UNREACHABLE_AFTER, Outcomes

Status = Literal["ok", "failed", "invalid", "skipped", "interrupted"]


def _expected(r: RequestRecord) -> int:
    return r.expected_prompt_tokens if r.expected_prompt_tokens is not None else r.input_len


EOS_REASONS = ("stop", "eos_token", "eos")     # finish_reason of an answer ended at end-of-sequence (TGI: eos_token)


def diagnose_mismatch(recs: Sequence[RequestRecord]) -> str:
    """Name the likely cause of length mismatches from what the server reported."""
    bad = [r for r in recs if r.length_error]
    short = [r for r in bad if r.output_tokens < r.output_len]
    if short and all(r.finish_reason in EOS_REASONS for r in short):
        return ("the server stopped at end-of-sequence before max_tokens: it likely ignores ignore_eos/min_tokens "
                "(enable them on the server; or name its kind with --backend, e.g. tgi, or pass --no-ignore-eos "
                "--no-min-tokens: lengths are then measured as they come and early ends counted; or "
                "--allow-length-mismatch)")
    prompt_off = [r.prompt_tokens - _expected(r) for r in bad if r.prompt_tokens is not None
                  and r.prompt_tokens != _expected(r)]
    if prompt_off:
        diff = Counter(prompt_off).most_common(1)[0][0]
        return (f"the server counted {diff:+d} prompt tokens versus the workload's count "
                f"({len(prompt_off)} requests): it likely adds special tokens (BOS) or re-tokenizes text with "
                "another tokenizer; pass the served model's directory with --tokenizer DIR (or, where the server "
                "takes token-id prompts, send them: --api completions without --prompt-as-text)")
    output_off = [r.output_tokens - r.output_len for r in bad if r.output_tokens != r.output_len]
    if output_off:
        diff = Counter(output_off).most_common(1)[0][0]
        return (f"the server generated {diff:+d} output tokens versus max_tokens ({len(output_off)} requests; "
                "the prompts matched the expected counts): it does not honour max_tokens/min_tokens exactly "
                "(check its sampling settings, or pass --allow-length-mismatch)")
    return "the server returned a different number of tokens than asked (see each request's error_detail)"


def unreachable(recs: Sequence[RequestRecord] | Outcomes) -> str | None:
    """The last error when the cell's last UNREACHABLE_AFTER requests (in send order) all failed to connect:
    the server went away (or never answered); None otherwise."""
    tail = [e[2] for e in (recs if isinstance(recs, Outcomes) else Outcomes.of(recs)).tail]
    if len(tail) == UNREACHABLE_AFTER and all(r.error_kind == "connect" for r in tail):
        return tail[-1].error_detail[:200] or "connection refused"
    return None


def refused_requests(seen: Outcomes, api_key_sent: bool, no_probe: bool = False) -> str | None:
    """Every request answered HTTP 4xx: a problem of the requests (or the key), not of load (`no_probe`: the
    run skipped the probe that would have left out what the server refuses)."""
    codes = seen.codes
    if not seen.n or sum(codes.values()) != seen.n or not all(c and 400 <= c < 500 and c != 429 for c in codes):
        return None
    code, detail = codes.most_common(1)[0][0], seen.first.error_detail[:160] if seen.first else ""
    if code in (401, 403):
        return (f"the server rejected the API key: every request got HTTP {code} ({detail}); check the key's value"
                if api_key_sent else
                f"the server requires an API key: every request got HTTP {code} ({detail}); pass --api-key-env VAR")
    accepts = ("what the server accepts (drop --no-probe: the probe leaves out the fields it refuses; or name "
               "its kind with --backend)") if no_probe else "what the server accepts"
    return (f"every request was refused with HTTP {code} ({detail}): a request problem, not load; check the model "
            f"name (--model), the API (--api completions|chat) and {accepts}")


def verdict(recs: Sequence[RequestRecord] | Outcomes, allow_mismatch: bool, max_error_rate: float,
            api_key_sent: bool = False, no_probe: bool = False) -> tuple[Literal["ok", "failed"], str]:
    """("ok", "") or ("failed", one-line reason). Length mismatches fail unless allowed; a cell whose
    requests all got 4xx, or whose server became unreachable, says so instead of blaming the error budget."""
    seen = recs if isinstance(recs, Outcomes) else Outcomes.of(recs)
    if not seen.n:
        return "failed", "no request was sent"
    refused = refused_requests(seen, api_key_sent, no_probe)
    if refused:
        return "failed", refused
    if seen.mismatched and not allow_mismatch:
        return "failed", f"{seen.mismatched}/{seen.n} requests had the wrong length: {diagnose_mismatch(seen.bad)}"
    if seen.failed / seen.n > max_error_rate:
        detail = ", ".join(f"{k}={n}" for k, n in seen.kinds.most_common())
        first = seen.first_failed.error_detail[:200] if seen.first_failed else ""
        return "failed", f"{seen.failed}/{seen.n} requests failed ({detail}); first: {first} ({_advice(seen, api_key_sent)})"
    return "ok", ""


BUDGET = "raise --max-error-rate to tolerate failures"
ADVICE = re.compile(r" \((?:raise --max-error-rate|every )[^()]*\)$")      # what _advice adds to a message


def _advice(seen: Outcomes, api_key_sent: bool) -> str:
    """What can help a cell whose failures went over the budget: a budget to raise while some requests
    succeeded; where every request failed, what the failures point to (a budget cannot make a cell of none)."""
    timeouts = seen.kinds.get("timeout", 0)
    if timeouts == seen.failed:
        return ("every failure is a request that outlived --timeout: raise --timeout if the server needs longer"
                + ("" if seen.failed == seen.n else f", or {BUDGET}"))
    if seen.failed < seen.n:
        return BUDGET
    five = [c for c in seen.codes if c is not None and c >= 500]
    if five and not api_key_sent:
        return ("every request failed: the server's log says why; a gateway that requires an API key (LiteLLM "
                "answers HTTP 500 without one) needs --api-key-env VAR")
    return "every request failed: the server's log and each request's error_detail say why"


@dataclass(frozen=True)
class VerdictPolicy:
    """What a cell tolerates (the run's options) and what the verdict needs to say about the target."""

    allow_mismatch: bool = False         # --allow-length-mismatch
    max_error_rate: float = 0.0          # --max-error-rate
    api_key_sent: bool = False
    base_url: str = ""                   # named when the server became unreachable
    no_probe: bool = False               # --no-probe: refused requests name it


@dataclass(frozen=True)
class Verdict:
    status: Status
    message: str = ""                    # why, one line ("" when ok)
    unreachable: str | None = None       # the server stopped accepting connections (the cell stopped sending)
    marks: dict[str, FigureMark] = field(default_factory=dict)   # figures the client's delays may have moved
    died: str | None = None              # the server died or stopped answering during the cell: what was seen

    def failed(self, why: str, died: str) -> Verdict:
        """The same verdict turned "failed" with `why` ahead of its message (a server that died)."""
        message = f"{why}; {self.message}" if self.message else why
        return replace(self, status="failed", message=message, died=died)


def _gone(seen: Outcomes, policy: VerdictPolicy, planned: int | None) -> str | None:
    """Why the cell stopped sending before its end: the client ran out of descriptors (it stops as for a
    server gone: every later connection fails the same way), or the server stopped accepting connections."""
    lost = unreachable(seen)
    left = f"{planned - seen.n} of {planned} requests not sent" if planned else "the rest not sent"
    if seen.out_of_files is not None:
        return (f"the client ran out of file descriptors ({seen.out_of_files.error_detail[:160]}): lower "
                f"--concurrency / --max-concurrency, or raise `ulimit -n`; {left}")
    if not lost:
        return None
    return (f"server unreachable at {policy.base_url}: {UNREACHABLE_AFTER} consecutive connection failures "
            f"({lost}); {left}")


def cell_verdict(seen: Outcomes, summary: CellSummary, policy: VerdictPolicy, planned: int | None = None) -> Verdict:
    """The cell's verdict: lengths and errors decide its status, a server that went away overrides them
    (`--resume` runs such a cell again); the client's health marks the figures it could have moved."""
    status, message = verdict(seen, policy.allow_mismatch, policy.max_error_rate, policy.api_key_sent,
                              policy.no_probe)
    marks = health.marks(summary)
    lost = _gone(seen, policy, planned)
    return Verdict("failed", lost, lost, marks) if lost else Verdict(status, message, marks=marks)


def server_gone(v: Verdict, death: str | None, ours: bool) -> Verdict:
    """A cell that did not end ok, and what became of its server: an engine this run deployed that died
    fails the cell with the cause (it is relaunched); a server that stopped answering fails it too,
    unless its connection failures already said so."""
    v = replace(v, message=ADVICE.sub("", v.message)) if death else v    # the failures' advice: the server went away
    if death and ours:
        return v.failed(f"server died during the cell: {death}", death)
    if death and not v.unreachable:
        return v.failed(f"server unreachable: {death}", death)
    return v


def interrupted(summary: CellSummary, finished: int) -> Verdict:
    """The verdict of a cell the user stopped: never ok, whatever finished before (docs/reliability.md,
    "Interruptions"); `--resume` measures it again in full."""
    after = (summary.health or ClientHealth()).stopped_after_s or 0.0
    return Verdict("interrupted", f"interrupted by the user after {after:.1f} s: {how_far(summary, finished)}; "
                                  "--resume measures the cell again in full")


def how_far(summary: CellSummary, finished: int) -> str:
    """'1 of 10 requests finished, 1 cut off (stored as cancelled)' for an interrupted cell."""
    cut = summary.interruption or Interruption()
    planned = f" of {cut.planned}" if cut.planned is not None else ""
    return f"{finished}{planned} requests finished, {cut.cut or 0} cut off (stored as cancelled)"
