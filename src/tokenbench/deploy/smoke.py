"""One chat and one completions request to a server: does it answer, how many tokens, how fast."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tokenbench.client import api

CHAT = [{"role": "user", "content": "Name three colours, in one short sentence."}]
PROMPT = "The three primary colours are"
MAX_TOKENS = 24


@dataclass(slots=True, kw_only=True)
class SmokeResult:
    api: str                       # chat | completions
    ok: bool
    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    elapsed_ms: float = 0.0        # whole request, measured here
    server_timings: dict = field(default_factory=dict)   # llama.cpp's own `timings`, when sent
    error: str = ""


def _answer(api_name: str, body: dict) -> str:
    choice = (body.get("choices") or [{}])[0]
    if api_name == "chat":
        return ((choice.get("message") or {}).get("content") or "").strip()
    return (choice.get("text") or "").strip()


def one(base_url: str, api_name: str, model: str, api_key: str | None = None,
        max_tokens: int = MAX_TOKENS, timeout: float = 120.0) -> SmokeResult:
    path, what = (("/v1/chat/completions", "messages") if api_name == "chat" else ("/v1/completions", "prompt"))
    body: dict[str, object] = {what: CHAT if api_name == "chat" else PROMPT}
    body.update(model=model, max_tokens=max_tokens, temperature=0, stream=False)
    t0 = time.perf_counter_ns()
    status, answer = api.post_json(base_url, path, body, api_key=api_key, timeout=timeout)
    elapsed = (time.perf_counter_ns() - t0) / 1e6
    if status != 200 or not isinstance(answer, dict):
        detail = (answer or {}).get("error") if isinstance(answer, dict) else None
        return SmokeResult(api=api_name, ok=False, elapsed_ms=elapsed,
                           error=f"HTTP {status}: {detail or 'no JSON body'}")
    usage = answer.get("usage") or {}
    told = answer.get("timings")
    timings = told if isinstance(told, dict) else {}
    return SmokeResult(api=api_name, ok=True, text=_answer(api_name, answer), prompt_tokens=usage.get("prompt_tokens"),
                       completion_tokens=usage.get("completion_tokens"), elapsed_ms=elapsed, server_timings=timings)


def smoke(base_url: str, model: str | None = None, api_key: str | None = None,
          apis: tuple[str, ...] = ("chat", "completions")) -> list[SmokeResult]:
    """One request per API, in order; failures are results, not exceptions."""
    model = model or api.list_models(base_url, api_key)[0]["id"]
    return [one(base_url, name, model, api_key) for name in apis]
