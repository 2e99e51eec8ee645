"""What one streamed choice carries: answer text, reasoning text, tool-call text, token ids, and
whether it stands for a generated token at all (docs/metrics.md, "Tokens").

Servers name reasoning differently: current vLLM streams `delta.reasoning`, older vLLM, SGLang and
DeepSeek `delta.reasoning_content`, Ollama and OpenRouter `reasoning`; a server in transition may send
both with the same text, so the first non-empty one is read. Tool calls stream their name and argument
text in `delta.tool_calls[].function`. A token whose text is empty (an EOS kept going by ignore_eos, a
special token, half a UTF-8 character) still arrives as a chunk with an empty text field.
"""

from __future__ import annotations

from dataclasses import dataclass

REASONING_FIELDS = ("reasoning", "reasoning_content")
TEXT_FIELDS = ("content", *REASONING_FIELDS)


@dataclass(slots=True, frozen=True)
class Piece:
    """One choice of one chunk, read."""

    content: str            # answer text: `text`, `delta.content`, tool-call name + arguments
    reasoning: str          # reasoning text
    ids: int | None         # len(token_ids) when the server sent them
    empty_token: bool       # an explicit empty text field outside the role and finish chunks

    @property
    def text(self) -> str:
        return self.reasoning + self.content

    @property
    def guess(self) -> int:
        """Tokens this choice carries when neither token ids nor continuous usage say: 1 per chunk
        with text or with an empty-text token, 0 otherwise."""
        if self.ids is not None:
            return self.ids
        return 1 if self.text or self.empty_token else 0


def _tool_fields(delta: dict) -> list[str]:
    """The name and argument strings of a delta's tool calls."""
    calls = delta.get("tool_calls")
    out: list[str] = []
    for call in calls if isinstance(calls, list) else []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            out += [v for v in (fn.get("name"), fn.get("arguments")) if isinstance(v, str)]
    return out


def _reasoning(delta: dict) -> str:
    return next((v for k in REASONING_FIELDS if isinstance(v := delta.get(k), str) and v), "")


def _has_empty_field(choice: dict, delta: dict) -> bool:
    """An explicit empty text field in a chunk that is not the role chunk nor the finish chunk."""
    if choice.get("finish_reason") is not None or "role" in delta:
        return False
    if "text" in choice:
        return choice.get("text") == ""
    return any(delta.get(k) == "" for k in TEXT_FIELDS) or "" in _tool_fields(delta)


def read_choice(choice: dict) -> Piece:
    raw = choice.get("delta")
    delta: dict = raw if isinstance(raw, dict) else {}
    if "text" in choice:
        content = choice.get("text") or ""
    else:
        content = (delta.get("content") or "") + "".join(_tool_fields(delta))
    ids = choice.get("token_ids")
    return Piece(content, _reasoning(delta), len(ids) if isinstance(ids, list) and ids else None,
                 _has_empty_field(choice, delta))


def choice_problem(choice: object) -> str | None:
    """Why a choice cannot be read as an OpenAI streaming choice (wrong types), or None."""
    if not isinstance(choice, dict):
        return "a choice is not an object"
    delta = choice.get("delta")
    if delta is not None and not isinstance(delta, dict):
        return "choices[].delta is not an object"
    texts = (choice.get("text"), *((delta or {}).get(k) for k in TEXT_FIELDS))
    if any(t is not None and not isinstance(t, str) for t in texts):
        return "a choice's text/content/reasoning is not a string"
    calls = (delta or {}).get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and all(isinstance(c, dict) for c in calls)):
        return "choices[].delta.tool_calls is not a list of objects"
    if choice.get("token_ids") is not None and not isinstance(choice["token_ids"], list):
        return "choices[].token_ids is not a list"
    if choice.get("finish_reason") is not None and not isinstance(choice["finish_reason"], str):
        return "choices[].finish_reason is not a string"
    return None
