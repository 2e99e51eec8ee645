"""The plainest stream, read in one pass: every event one `data: {json}` line, each choice plain text.

Most benchmark streams are exactly that: one choice per event with its text (`text` or
`delta.content`), a role-only first event perhaps, a finish event without text perhaps, a final
usage-only event, then `data: [DONE]`. For such a stream the per-event work of `client.parse` (a
`Piece` and a `Chunk` per event, then `token_counts.resolve` over them) can be done on whole lists: the
reads are joined, checked by counting, decoded by msgspec as ONE JSON array, each event's time found
by counting newlines per read, and the counts given by `token_counts.resolve_plain`. Anything
else (an event with token ids, reasoning, tool calls, an empty-text token, per-chunk usage, an error,
more than one choice, a line that is not `data: `, a `\\r`, bytes that are not UTF-8, an unterminated
event) raises NotPlain and the caller takes the per-event path (`client.bulk`, then `client.sse`), so
this path only ever gives the answer they give; tests/client/test_parse_plain.py checks them side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from operator import sub
from typing import Any

import msgspec

from tokenbench.client.bulk import UNSET, utf8

_SEP = b"\n\ndata: "
_SEP_DONE = b"\n\ndata: [DONE]\n\n"
_READ = b"\n\n\xff"               # an event's end at the end of a read, in the reads joined by 0xFF (a byte
                                  # neither ASCII nor UTF-8 holds: the reads are checked for both first)


# What the plain shape may hold, typed so that msgspec refuses the rest while it decodes (a ValidationError:
# the per-event path then reads the stream): an `error` of any value, token ids, reasoning or tool calls
# (anything but null), a null `text`. What types cannot say (one choice, usage beside choices, an empty
# text, a choice that carries nothing) `_events` checks.
class _Delta(msgspec.Struct):
    role: Any = UNSET
    content: str | None = None
    reasoning: None = None
    reasoning_content: None = None
    tool_calls: None = None


class _Choice(msgspec.Struct):
    text: str | msgspec.UnsetType = UNSET
    delta: _Delta | None = None
    finish_reason: str | None = None
    token_ids: None = None


class _Event(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: dict[str, Any] | None = None
    error: msgspec.UnsetType = UNSET


_decode_all = msgspec.json.Decoder(list[_Event]).decode


@dataclass(slots=True)
class PlainStream:
    times: list[int]              # arrival of each event with text (one token each, before reconciling)
    texts: list[str]              # their text, in order
    finish_reason: str | None
    usages: list[dict[str, Any]]  # every non-empty usage, in order (the last one counts; each is checked)
    empty_finish_last_ns: int | None   # a finish event without text that was the last event with choices
    done_ns: int | None           # when `data: [DONE]` came (None: the body ended without it)


class NotPlain(Exception):
    """The stream is not plain: take the per-event path."""


class PlainReader:
    """`feed(reads)` any number of times (reads in order, in slices), then `end() -> PlainStream`;
    either raises NotPlain."""

    def __init__(self) -> None:
        self._rest = b""
        self.stream = PlainStream([], [], None, [], None, None)

    def feed(self, reads: list[tuple[int, bytes]]) -> None:
        if self.stream.done_ns is not None or not reads:
            return                    # events after [DONE] are ignored, as on every path
        ts, datas = zip(*reads, strict=True)
        blob = self._rest + b"".join(datas)
        if b"\r" in blob or not blob.isascii() and not utf8(blob):
            raise NotPlain
        done = (b"\n\n" + blob).find(_SEP_DONE)
        last = blob.rfind(b"\n\n")
        cut = done if done >= 0 else last + 2 if last >= 0 else 0
        events = _decode(blob[:cut])
        times = self._times(ts, datas, len(events) + (done >= 0))
        self._rest = blob[cut:]
        self._events(events, times)
        if done >= 0:
            self.stream.done_ns = times[len(events)]

    def _times(self, ts: tuple[int, ...], datas: tuple[bytes, ...], n: int) -> list[int]:
        """The arrival of the first `n` events that end in these reads: the read that brought its `\n\n`
        (newlines come in pairs once the events are checked, so pair k ends where the 2k-th does)."""
        if not self._rest and len(datas) == n and b"\xff".join(datas).count(_READ) == n - 1 and \
                datas[-1].endswith(b"\n\n"):
            return list(ts)                       # the usual reads: one whole event each
        lines = list(map(bytes.count, datas, repeat(b"\n")))
        pairs = [k // 2 for k in accumulate(lines, initial=self._rest.count(b"\n"))]
        return list(chain.from_iterable(map(repeat, ts, map(sub, pairs[1:], pairs))))[:n]

    def end(self) -> PlainStream:
        if self.stream.done_ns is None and self._rest:
            raise NotPlain            # an unterminated last event: the per-event path judges
        return self.stream            # with or without [DONE] (client.parse decides whether it is complete)

    def _events(self, events: list[_Event], times: list[int]) -> None:
        out = self.stream
        for t, ev in zip(times, events, strict=False):
            choices = ev.choices
            if not choices:
                if ev.usage:
                    out.usages.append(ev.usage)
                continue
            if ev.usage or len(choices) != 1:
                raise NotPlain
            c = choices[0]
            text, finish = c.text, c.finish_reason
            if text is UNSET:
                text = _delta_text(c)
            elif not text or c.delta is not None:
                raise NotPlain       # an empty `text` is an empty-text token (or a finish one): not plain
            if finish:
                out.finish_reason = finish
            if text:
                out.times.append(t)
                out.texts.append(text)
                out.empty_finish_last_ns = None
            else:
                out.empty_finish_last_ns = t if finish is not None else None


def _decode(body: bytes) -> list[_Event]:
    """Whole `data: {json}\n\n` events (no other newline) decoded as one JSON array; NotPlain otherwise.
    Each separator `\n\ndata: ` becomes a comma, so a newline left over is a line that is not `data: `
    (a comment, a multi-line event, a blank line too many), and the array holds one value per event."""
    if not body:
        return []
    if not body.startswith(b"data: ") or not body.endswith(b"\n\n"):
        raise NotPlain
    inner = body[6:-2]
    joined = inner.replace(_SEP, b",")
    if b"\n" in joined:
        raise NotPlain
    try:
        decoded = _decode_all(b"[%b]" % joined)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise NotPlain from exc
    if len(decoded) != (len(inner) - len(joined)) // (len(_SEP) - 1) + 1:
        raise NotPlain                # one value spanned two events, or one event held two values
    return decoded


def _delta_text(c: _Choice) -> str:
    """A chat choice's text ('' for a role-only or a text-less finish choice)."""
    d = c.delta
    if d is None:
        raise NotPlain
    if d.content:
        return d.content
    if c.finish_reason is None and d.role is UNSET:
        raise NotPlain               # an empty-text token, or an event carrying nothing: the per-event path
    return ""
