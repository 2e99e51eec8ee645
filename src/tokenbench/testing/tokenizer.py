"""The reference server's tokenizer and chat template.

Whitespace words; `w<N>` is literally token N, so `detokenize` round-trips. Ids 0-2 are SPECIAL.
"""

from __future__ import annotations

import re
import zlib

SPECIAL = ("<unk>", "<s>", "</s>")
_SPECIAL_IDS = {w: i for i, w in enumerate(SPECIAL)}
_LITERAL = re.compile(r"w([1-9][0-9]{0,8})")


class InvalidRequest(Exception):
    """A request the server refuses with HTTP 400."""


def word_id(word: str, vocab_size: int) -> int:
    if word in _SPECIAL_IDS:
        return _SPECIAL_IDS[word]
    m = _LITERAL.fullmatch(word)
    if m and 3 <= int(m.group(1)) < vocab_size:
        return int(m.group(1))
    return 3 + zlib.crc32(word.encode()) % (vocab_size - 3)


def tokenize(text: str, vocab_size: int) -> list[int]:
    return [word_id(w, vocab_size) for w in text.split()]


def detokenize(ids: list[int]) -> str:
    return " ".join(SPECIAL[i] if i < 3 else f"w{i}" for i in ids)


def chat_text(messages: list, add_generation_prompt: bool = True) -> tuple[str, int]:
    """The chat template: `<|role|> content` per message (+ `<|image|>` per image), `<|assistant|>`."""
    parts, images = [], 0
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise InvalidRequest("each message needs a string role")
        parts.append(f"<|{m['role']}|>")
        images += _content_parts(m.get("content"), parts)
    if add_generation_prompt:
        parts.append("<|assistant|>")
    return " ".join(parts), images


def _image_url(part: dict) -> str:
    image = part.get("image_url")
    return str(image.get("url", "")) if isinstance(image, dict) else ""


def _content_parts(content: object, parts: list[str]) -> int:
    """Append one message's content to `parts`; returns how many images it holds."""
    if not isinstance(content, (str, list, type(None))):
        raise InvalidRequest("content is a string or a list of parts")
    images = 0
    for part in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
        if not isinstance(part, dict):
            raise InvalidRequest("each content part is an object")
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif part.get("type") == "image_url" and _image_url(part).startswith("data:"):
            parts.append("<|image|>")
            images += 1
        else:
            raise InvalidRequest("content parts are text or image_url with a data: URI")
    return images


def token_lists(prompt: object, vocab_size: int) -> list[list[int]]:
    """A completions prompt (a string, a list of token ids, or a list of either) -> token id lists."""
    if isinstance(prompt, str) and prompt.split():
        return [tokenize(prompt, vocab_size)]
    if isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
        if min(prompt) < 0 or max(prompt) >= vocab_size:
            raise InvalidRequest(f"token id out of vocabulary [0, {vocab_size})")
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
        return [q for p in prompt for q in token_lists(p, vocab_size)]
    raise InvalidRequest("prompt must be a string, a list of token ids, or a list of those")
