"""The common stream shape, decoded cheaply: one `data: {json}` line per event, `\\n\\n` between events.

Most servers stream exactly that shape, so a finished request is first read this way: events are
split at the byte level and each payload is decoded by msgspec into typed structs (C code checks every
type that `client.tokens.choice_problem` checks). Anything outside the shape (a comment or `event:`
line, a `\\r`, a multi-line event, bytes that are not UTF-8, a type msgspec refuses, an error object,
tool calls, an unterminated last event) raises `Unusual`, and the caller parses the whole request again
on the strict path (`client.sse` + `json`), which owns every error message. So this path only ever
gives the answer the strict path gives, sooner; tests/client/test_parse_bulk.py checks them side by side.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tokenbench.client.tokens import Piece

UNSET = msgspec.UNSET


class Unusual(Exception):
    """The stream leaves the common shape: parse it on the strict path."""


class _Delta(msgspec.Struct):
    role: Any = UNSET
    content: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class _Choice(msgspec.Struct):
    text: str | None | msgspec.UnsetType = UNSET
    delta: _Delta | None = None
    finish_reason: str | None = None
    token_ids: list[Any] | None = None


class Event(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: dict[str, Any] | None = None
    error: Any = UNSET


_decode = msgspec.json.Decoder(Event).decode
_DATA = b"data: "
_DONE = b"[DONE]"


class BulkDecoder:
    """`feed(t_ns, bytes) -> [(t_ns, Event)]`; `done_ns` once `data: [DONE]` came; `end()` at EOF."""

    def __init__(self) -> None:
        self._rest = b""
        self.done_ns: int | None = None

    def feed(self, t_ns: int, data: bytes) -> list[tuple[int, Event]]:
        if self.done_ns is not None:
            return []                       # the strict path ignores everything after [DONE] too
        if b"\r" in data or not data.isascii() and not utf8(data):
            raise Unusual
        parts = (self._rest + data).split(b"\n\n")
        self._rest = parts.pop()
        out: list[tuple[int, Event]] = []
        for part in parts:
            if not part.startswith(_DATA) or b"\n" in part:
                raise Unusual
            payload = part[6:]
            if payload == _DONE:
                self.done_ns = t_ns
                return out
            try:
                out.append((t_ns, _decode(payload)))
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
                raise Unusual from exc
        return out

    def end(self) -> None:
        """EOF: an unterminated last event is the strict path's to judge."""
        if self.done_ns is None and self._rest:
            raise Unusual


def utf8(data: bytes) -> bool:
    """Valid UTF-8 in this read (a character split across reads is left to the strict path)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def pieces(ev: Event) -> list[tuple[Piece, str | None]]:
    """Each choice read as `client.tokens.read_choice` reads it, with its finish_reason."""
    if ev.error is not UNSET:
        raise Unusual
    return [(_piece(c), c.finish_reason) for c in ev.choices or ()]


def _piece(c: _Choice) -> Piece:
    d = c.delta
    if d is not None and d.tool_calls:
        raise Unusual
    reasoning = (d.reasoning or d.reasoning_content or "") if d is not None else ""
    text = c.text
    if text is not UNSET:
        content = text or ""
    else:
        content = (d.content or "") if d is not None else ""
    if c.finish_reason is not None or (d is not None and d.role is not UNSET):
        empty = False                   # the role and finish chunks' empty fields are no token
    elif text is not UNSET:
        empty = text == ""
    else:
        empty = d is not None and "" in (d.content, d.reasoning, d.reasoning_content)
    ids = c.token_ids
    return Piece(content, reasoning, len(ids) if ids else None, empty)
