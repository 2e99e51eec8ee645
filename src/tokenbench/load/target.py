"""The server as the client sees it before sending: URL, model, key, vocabulary, context (an `Endpoint`),
resolved from the study's target."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from tokenbench.client import api
from tokenbench.errors import TargetError, UsageError
from tokenbench.spec.bench import WorkloadSource
from tokenbench.spec.server_kinds import Capabilities
from tokenbench.spec.study import Target
from tokenbench.workload.vocab import Vocab, discover


@dataclass(slots=True, frozen=True)
class ModelList:
    """GET /v1/models as answered: its status, the entries listed (none when it is not a list) and its body's
    first line (for messages); `is_list`: the body was an OpenAI model list (`{"data": [...]}`)."""

    status: int
    entries: list[dict]
    head: str
    is_list: bool = True

    def ids(self) -> list[str]:
        return [str(m.get("id")) for m in self.entries]


@dataclass(slots=True, frozen=True, kw_only=True)
class Endpoint:
    base_url: str
    model: str
    api_key: str | None
    vocab: Vocab
    max_model_len: int | None
    caps: Capabilities = field(default_factory=Capabilities)     # what the server accepts (load/probe.py)
    models: ModelList | None = None
    server_writes: int | None = None     # token chunks the server writes at once, by its own account
    server_writes_from: str = ""         # ... where that was read
    via_proxy: bool = False              # the study declared a proxy on the way (--via-proxy)

    @property
    def token_ids(self) -> bool:
        """Completions prompts may travel as token ids (else as text built to length: workload/build.py)."""
        return self.caps.token_ids is not False


WRITES_KEYS = ("chunks_per_write",)      # server-info keys that tell the chunks a server writes at once


def server_writes(info: object, declared: int | None) -> tuple[int | None, str]:
    """The chunks the server writes at once: as the study declares (`server_chunks_per_write`), else as its
    server info tells (`/get_server_info`: WRITES_KEYS), else None (not told)."""
    if declared is not None:
        return declared, "--server-chunks-per-write"
    told = {k: v for k, v in (info if isinstance(info, dict) else {}).items() if k in WRITES_KEYS}
    for key, value in told.items():
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value, f"/get_server_info {key}"
    return None, ""


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


def read_models(base_url: str, key: str | None) -> ModelList:
    """GET /v1/models: its status, entries and body's first line (a missing or rejected key still stops)."""
    status, body = api.call(base_url, "/v1/models", api_key=key)
    if status in (401, 403):
        api.get_json(base_url, "/v1/models", key)            # raises the key's message
    try:
        data = json.loads(body) if status == 200 else None
    except ValueError:
        data = None
    entries = data.get("data") if isinstance(data, dict) else None
    if isinstance(entries, list):
        return ModelList(status, entries, api.first_line(body))
    return ModelList(status, [], api.first_line(body), is_list=False)


def _unlisted(base_url: str, models: ModelList, key_sent: bool) -> TargetError:
    """Without --model a model list is needed: the status, the body's first line and the fix (a server that
    failed the list while no key was sent may want one: a LiteLLM gateway answers HTTP 500 without its key)."""
    fix = "pass --model NAME (the model the server serves: tokenbench then runs without the list)"
    if models.status == 200 and models.is_list:
        return TargetError(f"{base_url}/v1/models lists no model (HTTP 200: {models.head})",
                           f"{fix}, or wait until the server has loaded it")
    if models.status >= 500 and not key_sent:
        fix = ("no API key was sent: if the server requires one (a LiteLLM gateway answers HTTP 500 without it), "
               f"pass it with --api-key-env VAR; else {fix}")
    return TargetError(f"{base_url}/v1/models answered HTTP {models.status} ({models.head}), not an OpenAI "
                       "model list", f"{fix}; or point --base-url at an OpenAI-compatible server root (without /v1)")


def _entry(base_url: str, target: Target, models: ModelList, key_sent: bool) -> dict:
    """The served model's entry: --model's (tolerated unlisted where the probe will check it), else the first."""
    if target.model is None:
        if not models.entries:
            raise _unlisted(base_url, models, key_sent)
        return models.entries[0]
    ids = models.ids()
    if target.model in ids:
        return models.entries[ids.index(target.model)]
    if models.entries and target.no_probe:
        raise not_served(base_url, target.model, models, "or drop --no-probe: the probe then tries the name given")
    return {"id": target.model}


def not_served(base_url: str, model: str, models: ModelList, more: str = "", answer: str = "") -> UsageError:
    """The model is not among those the server lists (`answer`: what it said when asked for it)."""
    said = f" (it answered {answer})" if answer else ""
    return UsageError(f"model '{model}' is not served at {base_url}{said}",
                      f"use one of: {', '.join(models.ids())}" + (f" ({more})" if more else ""))


def resolve(base_url: str, target: Target, workload: WorkloadSource, key_env: str | None = None) -> Endpoint:
    """The endpoint at `base_url` (the target's, or the server deployed for it): the model served, the key
    to send and the vocabulary prompts are drawn from (the workload's tokenizer or vocab size, else the
    server's). With --model, a model list that fails (HTTP 404, 500), is empty or lacks it is no obstacle."""
    key = read_api_key(target, key_env)
    models = read_models(base_url, key)
    entry = _entry(base_url, target, models, key is not None)
    vocab = discover(base_url, models.entries, workload.tokenizer_path, workload.vocab_size, key)
    writes, told = server_writes(_server_info(base_url, key), target.server_chunks_per_write)
    return Endpoint(base_url=base_url.rstrip("/"), model=entry["id"], api_key=key, vocab=vocab,
                    max_model_len=_max_len(entry), models=models, server_writes=writes, server_writes_from=told,
                    via_proxy=target.via_proxy)


def unlisted_note(e: Endpoint) -> str | None:
    """One line when the model list did not list the model used (it was sent as --model gives it)."""
    m = e.models
    if m is None or e.model in m.ids():
        return None
    told = f"HTTP {m.status} ({m.head})" if m.status != 200 or not m.entries else f"{len(m.entries)} other model(s)"
    return f"/v1/models: {told}; model '{e.model}' sent as --model gives it"


def _server_info(base_url: str, key: str | None) -> object:
    """SGLang-style /get_server_info where the server has it (None where it has not, or refuses it)."""
    try:
        return api.get_json(base_url, "/get_server_info", key)
    except TargetError:
        return None


def check_context(workload, max_model_len: int | None) -> None:
    """Refuse, before sending anything, a cell that cannot fit one sequence's context."""
    need = workload.input_len + workload.output_len
    if max_model_len is not None and need > max_model_len:
        raise UsageError(f"input {workload.input_len} + output {workload.output_len} = {need} tokens exceeds the "
                         f"server's context of {max_model_len} tokens per sequence",
                         "use shorter lengths or start the server with a larger context")
