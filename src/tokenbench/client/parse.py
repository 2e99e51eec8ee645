"""Interpret a RawExchange after the request ended: SSE events -> token arrivals, usage, errors.

Rules (docs/metrics.md):
- a chunk is token-bearing when a choice carries `token_ids`, or non-empty text / content /
  reasoning content; role-only and empty chunks never count as the first token;
- a chunk carrying k tokens counts k: k = len(token_ids) when the server sends them, else the
  increase of a continuous `usage.completion_tokens`, else 1;
- output and prompt token counts come from the server's `usage`; only when it sends none are they
  counted from the chunks (`usage_source = "chunks"`), and the record says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tokenbench.client.records import Phase, RawExchange, RequestRecord, UsageSource
from tokenbench.client.request import PreparedRequest
from tokenbench.client.sse import SSEDecoder

MAX_TEXT = 2000  # characters of generated text kept per request (for smoke tests and reports)


@dataclass(slots=True)
class _State:
    times: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    chunk_usage: list[int | None] = field(default_factory=list)   # cumulative completion_tokens per chunk
    text: list[str] = field(default_factory=list)
    usage: dict | None = None
    finish_reason: str | None = None
    done: bool = False
    error_kind: str | None = None
    error_detail: str = ""


def _choice_text(choice: dict) -> str:
    if "text" in choice:
        return choice.get("text") or ""
    delta = choice.get("delta") or {}
    return (delta.get("content") or "") + (delta.get("reasoning_content") or "")


def _chunk_tokens(choice: dict, usage: dict | None, st: _State) -> int:
    """Tokens a chunk carries: its token_ids, else the growth of a continuous usage count (only when an
    earlier chunk carried usage too: a final usage-only chunk carries no token), else 1 if it has text."""
    ids = choice.get("token_ids")
    if ids:
        return len(ids)
    if usage and st.usage is not None and isinstance(usage.get("completion_tokens"), int):
        k = usage["completion_tokens"] - sum(st.counts)
        if k > 0:
            return k
    return 1 if _choice_text(choice) else 0


def _fail(st: _State, kind: str, detail: str) -> None:
    if st.error_kind is None:
        st.error_kind, st.error_detail = kind, detail


def _is_count(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def _choice_problem(choice: object) -> str | None:
    if not isinstance(choice, dict):
        return "a choice is not an object"
    delta = choice.get("delta")
    if delta is not None and not isinstance(delta, dict):
        return "choices[].delta is not an object"
    texts = (choice.get("text"), *((delta or {}).get(k) for k in ("content", "reasoning_content")))
    if any(t is not None and not isinstance(t, str) for t in texts):
        return "a choice's text/content is not a string"
    if choice.get("token_ids") is not None and not isinstance(choice["token_ids"], list):
        return "choices[].token_ids is not a list"
    if choice.get("finish_reason") is not None and not isinstance(choice["finish_reason"], str):
        return "choices[].finish_reason is not a string"
    return None


def _usage_problem(usage: object) -> str | None:
    if not isinstance(usage, dict):
        return "usage is not an object"
    details = usage.get("prompt_tokens_details")
    if details is not None and not (isinstance(details, dict) and _is_count(details.get("cached_tokens"))):
        return "usage.prompt_tokens_details.cached_tokens is not a token count"
    bad = [k for k in ("prompt_tokens", "completion_tokens") if not _is_count(usage.get(k))]
    return f"usage.{bad[0]} is not a token count" if bad else None


def _schema_problem(payload: dict) -> str | None:
    """Why a JSON chunk cannot be read as an OpenAI streaming chunk (wrong types), or None."""
    choices, usage = payload.get("choices"), payload.get("usage")
    if choices is not None and not isinstance(choices, list):
        return "choices is not a list"
    problems = [_choice_problem(c) for c in choices or []] + [_usage_problem(usage) if usage else None]
    return next((p for p in problems if p), None)


def _on_payload(st: _State, t_ns: int, payload: dict) -> None:
    if "error" in payload:
        _fail(st, "server_error", json.dumps(payload["error"])[:300])
        return
    problem = _schema_problem(payload)
    if problem:
        _fail(st, "invalid_json", f"chunk does not follow the OpenAI schema ({problem}): {json.dumps(payload)[:120]}")
        return
    usage = payload.get("usage") or None
    tokens = 0
    for choice in payload.get("choices") or []:
        tokens += _chunk_tokens(choice, usage, st)
        st.text.append(_choice_text(choice))
        st.finish_reason = choice.get("finish_reason") or st.finish_reason
    if tokens:
        st.times.append(t_ns)
        st.counts.append(tokens)
        st.chunk_usage.append((usage or {}).get("completion_tokens"))
    if usage:
        st.usage = usage


def _on_event(st: _State, t_ns: int, data: str | None, malformed: str | None) -> None:
    if st.done:
        return
    if malformed is not None or data is None:
        _fail(st, "malformed_sse", f"not an SSE data line: {malformed}")
        return
    if data.strip() == "[DONE]":
        st.done = True
        return
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError):        # RecursionError: nested deeper than json can parse
        _fail(st, "invalid_json", f"chunk is not JSON: {data[:120]}")
        return
    if isinstance(payload, dict):
        _on_payload(st, t_ns, payload)
    else:
        _fail(st, "invalid_json", f"chunk is not a JSON object: {data[:120]}")


def _decode(raw: RawExchange) -> _State:
    st = _State()
    dec = SSEDecoder()
    for t_ns, data in raw.chunks:
        for ev in dec.feed(data):
            _on_event(st, t_ns, ev.data, ev.malformed)
    for ev in dec.flush():
        _on_event(st, raw.end_ns, ev.data, ev.malformed)
    _continuous_counts(st)
    return st


def _continuous_counts(st: _State) -> None:
    """With continuous usage on every token-bearing chunk, tokens per chunk are the usage increments."""
    marks = [m for m in st.chunk_usage if isinstance(m, int)]
    if len(marks) < 2 or len(marks) != len(st.chunk_usage):
        return
    steps = [b - a for a, b in zip([0, *marks], marks, strict=False)]
    if all(k > 0 for k in steps):
        st.counts = steps


def _usage_fields(st: _State) -> tuple[int | None, int | None, int | None, UsageSource]:
    if st.usage is None:
        return None, (sum(st.counts) if st.counts else None), None, ("chunks" if st.counts else "none")
    details = st.usage.get("prompt_tokens_details") or {}
    return st.usage.get("prompt_tokens"), st.usage.get("completion_tokens"), details.get("cached_tokens"), "server"


def _image_count(st: _State) -> int | None:
    """usage.prompt_tokens_details.image_count (the reference server reports it), when it is an int."""
    details = st.usage.get("prompt_tokens_details") if isinstance(st.usage, dict) else None
    count = details.get("image_count") if isinstance(details, dict) else None
    return count if type(count) is int else None


def _check_lengths(rec: RequestRecord, req: PreparedRequest) -> None:
    if rec.error_kind is not None:
        return
    got_out = rec.output_tokens
    if got_out < req.output_len and rec.finish_reason is None:
        rec.error_kind = "early_done"
        rec.error_detail = f"stream ended after {got_out} of {req.output_len} tokens with no finish_reason"
        return
    problems = []
    if rec.prompt_tokens is not None and rec.prompt_tokens != req.expected_prompt_tokens:
        problems.append(f"prompt {rec.prompt_tokens} tokens, expected {req.expected_prompt_tokens}")
    if rec.image_count is not None and rec.image_count != req.images:
        problems.append(f"server counted {rec.image_count} images, {req.images} sent")
    if got_out != req.output_len:
        problems.append(f"output {got_out} tokens, expected {req.output_len} (finish_reason={rec.finish_reason!r})")
    rec.length_error = "; ".join(problems)


def parse_exchange(raw: RawExchange, req: PreparedRequest, index: int, phase: Phase) -> RequestRecord:
    st = _decode(raw) if raw.error_kind is None or raw.chunks else _State()
    prompt, completion, cached, source = _usage_fields(st)
    rec = RequestRecord(
        index=index, phase=phase, input_len=req.input_len, output_len=req.output_len,
        intended_ns=raw.intended_ns, sent_ns=raw.sent_ns, end_ns=raw.end_ns, status=raw.status,
        token_times_ns=st.times, token_counts=st.counts, prompt_tokens=prompt,
        completion_tokens=completion, cached_tokens=cached, usage_source=source,
        images=req.images, image_bytes=req.image_bytes, image_count=_image_count(st),
        finish_reason=st.finish_reason, text="".join(st.text)[:MAX_TEXT],
    )
    rec.error_kind = raw.error_kind or st.error_kind
    rec.error_detail = raw.error_detail or st.error_detail
    if rec.error_kind is None and not st.done and raw.status == 200:
        rec.error_kind, rec.error_detail = "reset", "stream ended without [DONE]"
    _check_lengths(rec, req)
    return rec
