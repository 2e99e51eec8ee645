"""Chat prompts of exactly N content tokens, by the server's tokenizer, and the template overhead.

The text is built of words whose token counts by the server's tokenizer were measured once, so it has
exactly N tokens by construction (workload/word_pool.py); one tokenization verifies it. The chat-template
overhead is what the server adds around the content: measured once per cell with a 1-token request and
stated in the summary. Image tokens are measured the same way (a 1-token request with the text and one
image).
"""

from __future__ import annotations

import json
import random
from typing import Protocol

from tokenbench.client import api
from tokenbench.client.request import user_content
from tokenbench.errors import TargetError
from tokenbench.workload.vocab import Vocab


class Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...


class ServerTokenizer:
    """Tokenize/detokenize through the server (llama.cpp, vLLM, SGLang and the reference server)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 hint: str = "pass --tokenizer DIR (the model's Hugging Face directory, with tokenizer.json)") -> None:
        self.base_url, self.model, self.api_key, self.hint = base_url, model, api_key, hint
        self.source = f"{base_url}/tokenize"

    def encode(self, text: str) -> list[int]:
        status, data = api.post_json(self.base_url, "/tokenize",
                                     {"content": text, "prompt": text, "model": self.model,
                                      "add_special": False, "add_special_tokens": False}, self.api_key)
        if status != 200 or not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
            raise TargetError(f"{self.base_url}/tokenize is not available (HTTP {status})", self.hint)
        return [t if isinstance(t, int) else t["id"] for t in data["tokens"]]

    def decode(self, ids: list[int]) -> str:
        status, data = api.post_json(self.base_url, "/detokenize",
                                     {"tokens": ids, "model": self.model}, self.api_key)
        if status != 200 or not isinstance(data, dict) or "prompt" not in data and "content" not in data:
            raise TargetError(f"{self.base_url}/detokenize is not available (HTTP {status})", self.hint)
        return data.get("content", data.get("prompt", ""))


def exact_text(tok: Tokenizer, rng: random.Random, n: int, vocab: Vocab, head: str = "", head_len: int = 0) -> str:
    """Text of exactly n tokens by the tokenizer, built from words of measured token counts
    (workload/word_pool.py); with `head` (head_len tokens), the text to append to it, starting with its
    separator, so that `head + text` is exactly head_len + n tokens (shared-prefix prompts). One encode
    verifies it."""
    from tokenbench.workload.word_pool import FIX, text_of_length  # text prompts only: token ids need no words
    text = text_of_length(tok, rng, n, vocab, after=bool(head))
    got = len(tok.encode(head + text)) - head_len
    if got != n:
        raise TargetError(f"a chat prompt built of words for exactly {n} tokens has {got} by the tokenizer "
                          f"({getattr(tok, 'source', type(tok).__name__)})", FIX)
    return text


def _probe(base_url: str, model: str, content, api_key: str | None) -> dict:
    """usage of a 1-token chat request with this user content (a string or content parts)."""
    return probe_messages(base_url, model, [{"role": "user", "content": content}], api_key)


def probe_messages(base_url: str, model: str, messages: list[dict], api_key: str | None) -> dict:
    """usage of a 1-token chat request with these messages."""
    body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0}
    status, data = api.post_json(base_url, "/v1/chat/completions", body, api_key)
    usage = (data or {}).get("usage") or {}
    if status != 200 or not isinstance(usage.get("prompt_tokens"), int):
        detail = json.dumps(data)[:200] if data else ""
        raise TargetError(f"chat probe failed (HTTP {status}) or reported no usage {detail}".rstrip(),
                          "check that the server supports /v1/chat/completions with a chat template "
                          "(and images, for an image workload)")
    return usage


def completion_special_tokens(base_url: str, model: str, text: str, n: int, api_key: str | None,
                              fix: str = "drop --prompt-as-text (token-id prompts need no probe)") -> int:
    """Prompt tokens the server reports for a 1-token completion of `text` (n tokens), minus n: the special
    tokens it adds to a text prompt (Gemma, Llama: BOS). `fix`: what helps when the server reports no count."""
    body = {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0}
    status, data = api.post_json(base_url, "/v1/completions", body, api_key)
    usage = (data or {}).get("usage") or {}
    if status != 200 or not isinstance(usage.get("prompt_tokens"), int):
        raise TargetError(f"a 1-token completion probe of a text prompt failed (HTTP {status}) or reported no usage:"
                          " the server's count of a text prompt cannot be learned", fix)
    return usage["prompt_tokens"] - n


def chat_template_overhead(base_url: str, model: str, text: str, n: int, api_key: str | None) -> int:
    """Prompt tokens the server reports for a 1-token chat request, minus the content's n tokens."""
    return _probe(base_url, model, text, api_key)["prompt_tokens"] - n


def image_tokens(base_url: str, model: str, text: str, images: tuple[str, ...], api_key: str | None,
                 without: int) -> int:
    """Prompt tokens these images add to a chat request whose text alone takes `without` prompt tokens
    (its own tokens and the template's)."""
    usage = _probe(base_url, model, user_content(text, images), api_key)
    return usage["prompt_tokens"] - without
