"""Interpret a RawExchange after the request ended: SSE events -> token arrivals, usage, errors.

Rules (docs/metrics.md):
- a chunk is token-bearing when it carries a generated token of any kind: token ids, text, content,
  reasoning (`reasoning` or `reasoning_content`), tool-call text, or an empty-text token; role-only
  chunks never count (client.tokens reads a choice);
- a chunk carrying k tokens counts k: by token ids, else by a continuous usage count, else by one per
  chunk reconciled with the final usage (client.token_counts);
- output and prompt token counts come from the server's `usage`; only when it sends none are they
  counted from the chunks (`usage_source = "chunks"`), and the record says so;
- a stream is complete at `data: [DONE]`, or at a clean end of the body (the transport saw no error)
  after a finish_reason: `[DONE]` is a convention, not every server or gateway sends it; a body that ends
  with neither was cut short (`reset`). The request's end is the `[DONE]` read, else the body's end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from tokenbench.client.bulk import BulkDecoder, Unusual
from tokenbench.client.bulk import pieces as bulk_pieces
from tokenbench.client.plain import NotPlain, PlainReader
from tokenbench.client.records import Phase, RawExchange, RequestRecord, UsageSource
from tokenbench.client.request import PreparedRequest
from tokenbench.client.token_counts import Chunk, Counted, resolve, resolve_plain
from tokenbench.client.tokens import Piece, choice_problem, read_choice

MAX_TEXT = 2000  # characters of generated text kept per request (for smoke tests and reports)
PLAIN_STEP = 16  # the plain path costs about a sixteenth per read: it pauses after 16 x per_step reads


@dataclass(slots=True, kw_only=True)
class _State:
    chunks: list[Chunk] = field(default_factory=list)
    counted: Counted = field(default_factory=Counted)
    text: list[str] = field(default_factory=list)
    text_len: int = 0                       # characters in `text` (kept up to MAX_TEXT)
    usage: dict | None = None
    finish_reason: str | None = None
    done: bool = False
    done_ns: int | None = None
    error_kind: str | None = None
    error_detail: str = ""


def _fail(st: _State, kind: str, detail: str) -> None:
    if st.error_kind is None:
        st.error_kind, st.error_detail = kind, detail


def _is_count(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


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
    problems = [choice_problem(c) for c in choices or []] + [_usage_problem(usage) if usage else None]
    return next((p for p in problems if p), None)


def _on_payload(st: _State, t_ns: int, payload: dict) -> None:
    if "error" in payload:
        _fail(st, "server_error", json.dumps(payload["error"])[:300])
        return
    problem = _schema_problem(payload)
    if problem:
        _fail(st, "invalid_json", f"chunk does not follow the OpenAI schema ({problem}): {json.dumps(payload)[:120]}")
        return
    choices = payload.get("choices") or []
    _add(st, t_ns, [(read_choice(c), c.get("finish_reason")) for c in choices], payload.get("usage") or None)


def _add(st: _State, t_ns: int, pairs: list[tuple[Piece, str | None]], usage: dict | None) -> None:
    """One valid chunk: its choices read (each with its finish_reason) and its usage."""
    for piece, finish in pairs:
        if st.text_len < MAX_TEXT:
            st.text.append(piece.text)
            st.text_len += len(st.text[-1])
        st.finish_reason = finish or st.finish_reason
    if pairs:
        st.chunks.append(_chunk(t_ns, pairs, (usage or {}).get("completion_tokens")))
    if usage:
        st.usage = usage


def _chunk(t_ns: int, pairs: list[tuple[Piece, str | None]], mark: int | None) -> Chunk:
    if len(pairs) == 1:
        [(p, reason)] = pairs
        return Chunk(t_ns=t_ns, guess=p.guess, all_ids=p.ids is not None or not p.guess, mark=mark,
                     content=bool(p.content), reasoning_only=bool(p.reasoning) and not p.content,
                     empty_finish=bool(reason) and not (p.text or p.ids),
                     empty_only=not p.guess or (p.empty_token and not p.ids))
    pieces = [p for p, _ in pairs]
    finish = any(f for _, f in pairs)
    return Chunk(t_ns=t_ns, guess=sum(p.guess for p in pieces),
                 all_ids=all(p.ids is not None for p in pieces if p.guess), mark=mark,
                 content=any(p.content for p in pieces),
                 reasoning_only=any(p.reasoning for p in pieces) and not any(p.content for p in pieces),
                 empty_finish=finish and not any(p.text or p.ids for p in pieces),
                 empty_only=all(p.empty_token and not p.ids for p in pieces if p.guess))


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


def _decode_steps(raw: RawExchange, st: _State, per_step: int) -> Iterator[None]:
    """Decode into `st`, pausing (yield) after every `per_step` body reads."""
    from tokenbench.client.sse import SSEDecoder  # the strict path: only a stream the other two refused
    dec = SSEDecoder()
    for n, (t_ns, data) in enumerate(raw.chunks, 1):
        for ev in dec.feed(data):
            _on_event(st, t_ns, ev.data, ev.malformed)
            if st.done and st.done_ns is None:
                st.done_ns = t_ns
        if n % per_step == 0:
            yield
    for ev in dec.flush():
        _on_event(st, raw.end_ns, ev.data, ev.malformed)
    st.counted = resolve(st.chunks, st.usage)


def _bulk_steps(raw: RawExchange, st: _State, per_step: int) -> Iterator[None]:
    """The common shape (client.bulk) into `st`, same pauses; raises Unusual to leave it to the strict path."""
    dec = BulkDecoder()
    for n, (t_ns, data) in enumerate(raw.chunks, 1):
        for t, ev in dec.feed(t_ns, data):
            usage = ev.usage or None
            if usage and _usage_problem(usage):
                raise Unusual
            _add(st, t, bulk_pieces(ev), usage)
        if n % per_step == 0:
            yield
    dec.end()
    st.done, st.done_ns = dec.done_ns is not None, dec.done_ns
    st.counted = resolve(st.chunks, st.usage)


def _plain_steps(raw: RawExchange, st: _State, per_step: int) -> Iterator[None]:
    """The plain shape (client.plain) into `st`, pausing after every `per_step` reads; raises NotPlain."""
    reader = PlainReader()
    for i in range(0, len(raw.chunks), per_step):
        reader.feed(raw.chunks[i:i + per_step])
        if i + per_step <= len(raw.chunks):
            yield
    plain = reader.end()
    if any(_usage_problem(u) for u in plain.usages):
        raise NotPlain
    st.usage = plain.usages[-1] if plain.usages else None
    st.finish_reason = plain.finish_reason
    st.text = ["".join(plain.texts)[:MAX_TEXT]]
    st.done, st.done_ns = plain.done_ns is not None, plain.done_ns
    st.counted = resolve_plain(plain.times, st.usage, plain.empty_finish_last_ns)


def _steps(raw: RawExchange, per_step: int) -> Iterator[_State | None]:
    """The plain path; else the bulk path; on anything unusual, the whole request again on the strict
    path. Ends with the state."""
    st = _State()
    if raw.error_kind is not None and not raw.chunks:
        yield st
        return
    try:
        yield from _plain_steps(raw, st, per_step * PLAIN_STEP)
    except NotPlain:
        st = _State()
        try:
            yield from _bulk_steps(raw, st, per_step)
        except Unusual:
            st = _State()
            yield from _decode_steps(raw, st, per_step)
    yield st


def _usage_fields(st: _State) -> tuple[int | None, int | None, int | None, UsageSource]:
    if st.usage is None:
        counts = st.counted.counts
        return None, (sum(counts) if counts else None), None, ("chunks" if counts else "none")
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
    if got_out and not rec.token_times_ns:
        problems.append(f"server reported {got_out} output tokens but no chunk carried one (TTFT unknown)")
    if got_out != req.output_len and not _ended_early(rec, req):
        problems.append(f"output {got_out} tokens, expected {req.output_len} (finish_reason={rec.finish_reason!r})")
    rec.length_error = "; ".join(problems)


def _ended_early(rec: RequestRecord, req: PreparedRequest) -> bool:
    """A shorter answer the request could not forbid (the server refused ignore_eos and min_tokens): the
    server ended it (a finish_reason); it is counted as ended early, not as a wrong length."""
    return not req.exact and rec.finish_reason is not None and rec.output_tokens < req.output_len


def parse_exchange(raw: RawExchange, req: PreparedRequest, index: int, phase: Phase) -> RequestRecord:
    for rec in parse_steps(raw, req, index, phase, per_step=1 << 30):
        if rec is not None:
            return rec
    raise AssertionError("parse_steps ends with the record")


def parse_steps(raw: RawExchange, req: PreparedRequest, index: int, phase: Phase,
                per_step: int) -> Iterator[RequestRecord | None]:
    """parse_exchange in slices: None after every `per_step` body reads, then the record (so a caller
    on the event loop can parse a finished request between socket reads)."""
    for st in _steps(raw, per_step):
        if st is not None:
            yield _record(raw, req, index, phase, st)
        else:
            yield None


def _record(raw: RawExchange, req: PreparedRequest, index: int, phase: Phase, st: _State) -> RequestRecord:
    prompt, completion, cached, source = _usage_fields(st)
    rec = RequestRecord(
        index=index, phase=phase, input_len=req.input_len, output_len=req.output_len,
        intended_ns=raw.intended_ns, sent_ns=raw.sent_ns, end_ns=st.done_ns or raw.end_ns, status=raw.status,
        token_times_ns=st.counted.times, token_counts=st.counted.counts, prompt_tokens=prompt,
        completion_tokens=completion, cached_tokens=cached, usage_source=source,
        images=req.images, image_bytes=req.image_bytes, image_count=_image_count(st),
        finish_reason=st.finish_reason, text="".join(st.text)[:MAX_TEXT],
        first_content_ns=st.counted.first_content_ns, reasoning_tokens=st.counted.reasoning_tokens,
        count_source=st.counted.source, expected_prompt_tokens=req.expected_prompt_tokens,
        connect_ns=raw.connect_ns, connect_in_ttft=raw.connect_in_ttft, session_id=req.session_id, turn=req.turn,
        trace_id=req.trace_id,
    )
    rec.error_kind = raw.error_kind or st.error_kind
    rec.error_detail = raw.error_detail or st.error_detail
    if rec.error_kind is None and not st.done and raw.status == 200 and st.finish_reason is None:
        rec.error_kind, rec.error_detail = "reset", "stream ended without [DONE] or a finish_reason"
    _check_lengths(rec, req)
    return rec
