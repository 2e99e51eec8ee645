"""What a finished answer returned, as the next turn of a session needs it: the output's token ids (when
every token-bearing choice carried `token_ids`: vLLM and SGLang with `return_token_ids`, the reference
server) and its whole text (answer and reasoning, in order). Separate from the measurement parse
(client/parse.py), which counts tokens and keeps at most a head of the text: this reads the bytes of one
answer once more, for the prompt of the session's next turn, never for a figure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tokenbench.client.records import RawExchange
from tokenbench.client.sse import SSEDecoder
from tokenbench.client.tokens import read_choice


@dataclass(frozen=True, slots=True)
class Returned:
    ids: tuple[int, ...] | None      # the output's token ids; None when a token-bearing chunk had none
    text: str                        # the output's text (reasoning, then answer, as streamed)
    ok: bool                         # a complete answer (HTTP 200, no error, a [DONE])


def _choice(payload: object) -> dict | None:
    choices = payload.get("choices") if isinstance(payload, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    return first if isinstance(first, dict) else None


def returned(raw: RawExchange) -> Returned:
    """The output of one streamed answer (choice 0)."""
    dec, ids, text, missing, done = SSEDecoder(), [], [], False, False
    events = [e for _, data in raw.chunks for e in dec.feed(data)] + dec.flush()
    for ev in events:
        if ev.data is None or ev.data.strip() == "[DONE]":
            done = done or ev.data is not None
            continue
        try:
            choice = _choice(json.loads(ev.data))
        except ValueError:
            return Returned(None, "", False)
        if choice is None:
            continue
        piece, got = read_choice(choice), choice.get("token_ids")
        text.append(piece.text)
        if isinstance(got, list) and all(type(t) is int for t in got):
            ids += got
        elif piece.guess:
            missing = True
    ok = raw.error_kind is None and raw.status == 200 and done
    return Returned(None if missing or not ids else tuple(ids), "".join(text), ok)
