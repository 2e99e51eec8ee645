"""The server as the client sees it before sending: URL, model, key, vocabulary, context (an `Endpoint`),
resolved from the study's target."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tokenbench.client import api
from tokenbench.errors import TargetError, UsageError
from tokenbench.spec.bench import WorkloadSource
from tokenbench.spec.study import Target
from tokenbench.workload.vocab import Vocab, discover


@dataclass(slots=True, frozen=True)
class Endpoint:
    base_url: str
    model: str
    api_key: str | None
    vocab: Vocab
    max_model_len: int | None


DEFAULT_KEY_ENV = "OPENAI_API_KEY"      # read when no key is named, as OpenAI clients and vLLM's do


def read_api_key(target: Target, key_env: str | None = None) -> str | None:
    """API keys come only from the environment or a file, never from a flag value. `key_env`: the variable
    to read when the target names none (a deployed profile's own secret `--api-key`)."""
    key_env = target.api_key_env or key_env
    if key_env:
        key = os.environ.get(key_env)
        if not key:
            raise UsageError(f"environment variable {key_env} is not set",
                             f"export {key_env}=<your key> before running")
        return _usable_key(key.strip(), f"the API key in ${key_env}", f"export {key_env}=<your key>")
    if target.api_key_file:
        return _key_file(Path(target.api_key_file))
    key = os.environ.get(DEFAULT_KEY_ENV, "").strip()
    return _usable_key(key, f"the API key in ${DEFAULT_KEY_ENV}", f"export {DEFAULT_KEY_ENV}=<your key>") if key else None


def _key_file(p: Path) -> str:
    """The first line of an API key file, which must be text."""
    fix = "write the key alone on the file's first line (--api-key-file)"
    if not p.is_file():
        raise UsageError(f"API key file '{p}' not found", "check --api-key-file")
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise UsageError(f"API key file '{p}' is not text (UTF-8)", fix) from None
    except OSError as exc:
        raise UsageError(f"API key file '{p}' cannot be read: {exc.strerror or exc}",
                         "check --api-key-file and its permissions") from None
    return _usable_key(lines[0].strip() if lines else "", f"API key file '{p}'", fix)


def _usable_key(key: str, where: str, fix: str) -> str:
    """A key an HTTP header can carry: printable ASCII (a control character such as NUL would make every
    request fail in a way that blames the server)."""
    if not key:
        raise UsageError(f"{where} is empty", fix)
    bad = next((i for i, ch in enumerate(key) if not (ch.isascii() and ch.isprintable())), None)
    if bad is not None:
        raise UsageError(f"{where} holds {key[bad]!r} at position {bad + 1}: a key is printable ASCII", fix)
    return key


def _max_len(entry: dict) -> int | None:
    meta = entry.get("meta") or {}
    for v in (entry.get("max_model_len"), meta.get("n_ctx")):
        if isinstance(v, int):
            return v
    return None


def resolve(base_url: str, target: Target, workload: WorkloadSource, key_env: str | None = None) -> Endpoint:
    """The endpoint at `base_url` (the target's, or the server deployed for it): the model served, the key
    to send and the vocabulary prompts are drawn from (the workload's tokenizer or vocab size, else the
    server's)."""
    key = read_api_key(target, key_env)
    models = api.list_models(base_url, key)
    if not models:
        raise TargetError(f"{base_url}/v1/models lists no model", "wait until the server has loaded it")
    ids = [m.get("id") for m in models]
    if target.model is not None and target.model not in ids:
        raise UsageError(f"model '{target.model}' is not served at {base_url}",
                         f"use one of: {', '.join(map(str, ids))}")
    entry = models[ids.index(target.model)] if target.model else models[0]
    vocab = discover(base_url, models, workload.tokenizer_path, workload.vocab_size, key)
    return Endpoint(base_url.rstrip("/"), entry["id"], key, vocab, _max_len(entry))


def check_context(workload, max_model_len: int | None) -> None:
    """Refuse, before sending anything, a cell that cannot fit one sequence's context."""
    need = workload.input_len + workload.output_len
    if max_model_len is not None and need > max_model_len:
        raise UsageError(f"input {workload.input_len} + output {workload.output_len} = {need} tokens exceeds the "
                         f"server's context of {max_model_len} tokens per sequence",
                         "use shorter lengths or start the server with a larger context")
