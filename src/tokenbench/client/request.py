"""Build OpenAI-compatible request bodies ahead of time, so no work happens after a clock starts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import msgspec

_encode = msgspec.json.Encoder().encode      # compact JSON, UTF-8 (the same document json.dumps gives)


@dataclass(slots=True, frozen=True)
class SessionTurn:
    """A prompt that is one turn of a session: which session and turn, the header that names the session
    to the server ("" sends none), and whether to ask for the output's token ids (`return_token_ids`:
    vLLM, SGLang), which the next turn's history is made of."""

    session_id: str
    turn: int
    header: str = ""
    return_token_ids: bool = False


Message = tuple[str, str]        # (role, content) of a chat message


@dataclass(slots=True, frozen=True, kw_only=True)
class Prompt:
    """One workload item: exact token ids (completions) or text with its known token count (chat),
    and for vision workloads the images that travel with the text as `image_url` data URIs. A session's
    chat turn carries its whole history as `messages` (the text is then the last user message)."""

    token_ids: tuple[int, ...] | None
    text: str | None
    input_len: int                 # tokens the workload promises in the prompt content
    output_len: int
    expected_prompt_tokens: int    # what the server must report (input_len + chat template + image tokens)
    images: tuple[str, ...] = ()   # data: URIs, sent after the text in one user message
    image_bytes: int = 0           # decoded bytes of those images (the files' sizes)
    messages: tuple[Message, ...] = ()   # chat: the history before the last user message (sessions)
    session: SessionTurn | None = None


@dataclass(slots=True, frozen=True, kw_only=True)
class PreparedRequest:
    url: str
    body: bytes
    headers: dict[str, str]
    input_len: int
    output_len: int
    expected_prompt_tokens: int
    conn_key: tuple[str, int, bool] = ("", 0, False)   # (host, port, tls)
    wire: bytes = b""                                  # the whole HTTP/1.1 request, encoded ahead of time
    images: int = 0                                    # images sent (checked against usage's image_count)
    image_bytes: int = 0
    new_connection: bool = False                       # sent on a connection of its own, closed after it
    exact: bool = True                                 # the body forces output_len (ignore_eos or min_tokens)
    session_id: str | None = None                      # a session's turn: which session and turn
    turn: int | None = None
    trace_id: str | None = None                        # the W3C trace id its `traceparent` header carries


@dataclass(slots=True, frozen=True, kw_only=True)
class RequestOptions:
    """How every request is shaped beyond its prompt and lengths (the study target's options; docs/cli.md):
    `final_usage_only` leaves `continuous_usage_stats` out; `sampling` replaces the greedy default
    (temperature 0) with the study's sampling fields (temperature, top_p, ...); `min_tokens` False leaves
    `min_tokens` out (only max_tokens with ignore_eos, as vllm bench serve and sglang.bench_serving send);
    `extra_body` is merged over the body last (vLLM's --extra-body); `new_connection` sends each request
    on a fresh connection; `trace` sends a W3C `traceparent` header with a random trace id (sampled), which the
    server's span of the request carries back (docs/metrics.md "Where the time went"). `ignore_eos` False
    leaves ignore_eos out and `stream_options` False the whole stream_options object (a server that refuses
    them: load/probe.py); with neither ignore_eos nor min_tokens the output length is measured, not forced
    (`exact`)."""

    final_usage_only: bool = False
    sampling: Mapping[str, float] = field(default_factory=lambda: {"temperature": 0.0})
    min_tokens: bool = True
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    new_connection: bool = False
    trace: bool = False
    ignore_eos: bool = True
    stream_options: bool = True

    @property
    def exact(self) -> bool:
        return self.ignore_eos or self.min_tokens


def encode_request(url: str, body: bytes, headers: dict[str, str]) -> tuple[tuple[str, int, bool], bytes]:
    """(host, port, tls) and the full request bytes: request line, headers, body."""
    u = urlsplit(url)
    tls = u.scheme == "https"
    port = u.port or (443 if tls else 80)
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    lines = [f"POST {path} HTTP/1.1", f"Host: {u.hostname}:{port}", f"Content-Length: {len(body)}",
             "Connection: keep-alive", *(f"{k}: {v}" for k, v in headers.items())]
    return (u.hostname or "", port, tls), ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _sampling(output_len: int, options: RequestOptions) -> dict:
    """Exact length (ignore_eos, min = max tokens), the sampling asked (greedy by default), streamed with
    usage. `continuous_usage_stats` asks vLLM and SGLang for the running token count on every chunk, the
    exact count per chunk (servers without it ignore the field); `final_usage_only` leaves it out, as
    vLLM's client does; `min_tokens` False sends max_tokens with ignore_eos alone; a field the server
    refuses is left out (`ignore_eos`, `stream_options` False)."""
    usage: dict[str, Any] = {"include_usage": True}
    if not options.final_usage_only:
        usage["continuous_usage_stats"] = True
    minimum = {"min_tokens": output_len} if options.min_tokens else {}
    eos = {"ignore_eos": True} if options.ignore_eos else {}
    stream = {"stream_options": usage} if options.stream_options else {}
    return {"max_tokens": output_len, **minimum, **eos, **options.sampling, "stream": True, **stream}


def completions_body(model: str, prompt: Prompt, options: RequestOptions = RequestOptions()) -> dict:
    content = list(prompt.token_ids) if prompt.token_ids is not None else prompt.text
    ids = {"return_token_ids": True} if prompt.session is not None and prompt.session.return_token_ids else {}
    return {"model": model, "prompt": content, **_sampling(prompt.output_len, options), **ids, **options.extra_body}


def user_content(text: str, images: tuple[str, ...] = ()) -> str | list[dict]:
    """A plain string, or OpenAI content parts (the text, then one image_url part per image)."""
    if not images:
        return text
    return [{"type": "text", "text": text}, *({"type": "image_url", "image_url": {"url": u}} for u in images)]


def chat_body(model: str, prompt: Prompt, options: RequestOptions = RequestOptions()) -> dict:
    history = [{"role": role, "content": content} for role, content in prompt.messages]
    messages = [*history, {"role": "user", "content": user_content(prompt.text or "", prompt.images)}]
    return {"model": model, "messages": messages, **_sampling(prompt.output_len, options), **options.extra_body}


def prepare(base_url: str, api: str, model: str, prompt: Prompt, api_key: str | None,
            options: RequestOptions = RequestOptions()) -> PreparedRequest:
    path, body = (("/v1/chat/completions", chat_body(model, prompt, options)) if api == "chat"
                  else ("/v1/completions", completions_body(model, prompt, options)))
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    turn = prompt.session
    if turn is not None and turn.header:
        headers[turn.header] = turn.session_id
    trace_id = traceparent(headers) if options.trace else None
    url = base_url.rstrip("/") + path
    data = _encode(body)
    key, wire = encode_request(url, data, headers)
    return PreparedRequest(
        url=url,
        body=data,
        headers=headers,
        conn_key=key,
        wire=wire,
        input_len=prompt.input_len,
        output_len=prompt.output_len,
        expected_prompt_tokens=prompt.expected_prompt_tokens,
        images=len(prompt.images),
        image_bytes=prompt.image_bytes,
        new_connection=options.new_connection,
        exact=options.exact,
        session_id=None if turn is None else turn.session_id,
        turn=None if turn is None else turn.turn,
        trace_id=trace_id,
    )


def traceparent(headers: dict[str, str]) -> str:
    """Add a W3C `traceparent` (version 00, a random trace id and parent id, sampled); returns the trace id."""
    ids = os.urandom(24).hex()
    trace_id, parent = ids[:32], ids[32:]
    headers["traceparent"] = f"00-{trace_id}-{parent}-01"
    return trace_id
