"""What the client needs to know about a target before sending: URL, model, key, vocabulary."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tokenbench.client import api
from tokenbench.client.request import RequestOptions
from tokenbench.errors import TargetError, UsageError
from tokenbench.spec.bench import Target
from tokenbench.workload.vocab import Vocab, discover


@dataclass(slots=True, frozen=True)
class ResolvedTarget:
    base_url: str
    model: str
    api_key: str | None
    vocab: Vocab
    max_model_len: int | None
    request: RequestOptions = RequestOptions()     # how every request body is shaped (the target's options)


DEFAULT_KEY_ENV = "OPENAI_API_KEY"      # read when no key is named, as OpenAI clients and vLLM's do


def read_api_key(target: Target) -> str | None:
    """API keys come only from the environment or a file, never from a flag value."""
    if target.api_key_env:
        key = os.environ.get(target.api_key_env)
        if not key:
            raise UsageError(f"environment variable {target.api_key_env} is not set",
                             f"export {target.api_key_env}=<your key> before running")
        return key.strip()
    if target.api_key_file:
        p = Path(target.api_key_file)
        if not p.is_file():
            raise UsageError(f"API key file '{p}' not found", "check --api-key-file")
        return p.read_text().splitlines()[0].strip()
    return os.environ.get(DEFAULT_KEY_ENV, "").strip() or None


def _max_len(entry: dict) -> int | None:
    meta = entry.get("meta") or {}
    for v in (entry.get("max_model_len"), meta.get("n_ctx")):
        if isinstance(v, int):
            return v
    return None


def resolve(target: Target, tokenizer_path: str | None = None, vocab_size: int | None = None) -> ResolvedTarget:
    key = read_api_key(target)
    models = api.list_models(target.base_url, key)
    if not models:
        raise TargetError(f"{target.base_url}/v1/models lists no model", "wait until the server has loaded it")
    ids = [m.get("id") for m in models]
    if target.model is not None and target.model not in ids:
        raise UsageError(f"model '{target.model}' is not served at {target.base_url}",
                         f"use one of: {', '.join(map(str, ids))}")
    entry = models[ids.index(target.model)] if target.model else models[0]
    vocab = discover(target.base_url, models, tokenizer_path, vocab_size, key)
    return ResolvedTarget(target.base_url.rstrip("/"), entry["id"], key, vocab, _max_len(entry),
                          request_options(target))


def request_options(target: Target) -> RequestOptions:
    """The request shape the target's options ask for."""
    return RequestOptions(target.final_usage_only, not target.no_min_tokens, dict(target.extra_body),
                          target.new_connection_per_request)


def check_context(workload, max_model_len: int | None) -> None:
    """Refuse, before sending anything, a cell that cannot fit one sequence's context."""
    need = workload.input_len + workload.output_len
    if max_model_len is not None and need > max_model_len:
        raise UsageError(f"input {workload.input_len} + output {workload.output_len} = {need} tokens exceeds the "
                         f"server's context of {max_model_len} tokens per sequence",
                         "use shorter lengths or start the server with a larger context")
