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

from tokenbench.client.records import Phase, RawExchange, RequestRecord
from tokenbench.client.request import PreparedRequest
from tokenbench.client.sse import SSEDecoder

MAX_TEXT = 2000  # characters of generated text kept per request (for smoke tests and reports)


@dataclass(slots=True)
class _State:
    times: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    usage: dict | None = None
    last_completion: int = 0
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
    ids = choice.get("token_ids")
    if ids:
        return len(ids)
    if usage and isinstance(usage.get("completion_tokens"), int):
        k = usage["completion_tokens"] - st.last_completion
        if k > 0:
            return k
    return 1 if _choice_text(choice) else 0


def _fail(st: _State, kind: str, detail: str) -> None:
    if st.error_kind is None:
        st.error_kind, st.error_detail = kind, detail


def _on_payload(st: _State, t_ns: int, payload: dict) -> None:
    if "error" in payload:
        _fail(st, "server_error", json.dumps(payload["error"])[:300])
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
    if usage:
        st.usage = usage
        st.last_completion = usage.get("completion_tokens") or st.last_completion


def _on_event(st: _State, t_ns: int, data: str | None, malformed: str | None) -> None:
    if st.done:
        return
    if malformed is not None:
        _fail(st, "malformed_sse", f"not an SSE data line: {malformed}")
        return
    if data.strip() == "[DONE]":
        st.done = True
        return
    try:
        payload = json.loads(data)
    except ValueError:
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
    return st


def _usage_fields(st: _State) -> tuple[int | None, int | None, int | None, str]:
    if st.usage is None:
        return None, (sum(st.counts) if st.counts else None), None, ("chunks" if st.counts else "none")
    details = st.usage.get("prompt_tokens_details") or {}
    return st.usage.get("prompt_tokens"), st.usage.get("completion_tokens"), details.get("cached_tokens"), "server"


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
        finish_reason=st.finish_reason, text="".join(st.text)[:MAX_TEXT],
    )
    rec.error_kind = raw.error_kind or st.error_kind
    rec.error_detail = raw.error_detail or st.error_detail
    if rec.error_kind is None and not st.done and raw.status == 200:
        rec.error_kind, rec.error_detail = "reset", "stream ended without [DONE]"
    _check_lengths(rec, req)
    return rec
