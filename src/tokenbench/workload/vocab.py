"""Learn the server's vocabulary size and the id range that is safe to sample prompts from.

Special tokens sit at the bottom of most vocabularies (SmolLM2: 0-16, Gemma: 0-105) and added tokens
at the top (Llama 3: 128000+, Qwen: 151643+), so ids are drawn from [low, high) with margins at both
ends. Override with an explicit range when a tokenizer differs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tokenbench.client import api
from tokenbench.errors import TargetError, UsageError


@dataclass(slots=True, frozen=True)
class Vocab:
    size: int
    low: int
    high: int          # exclusive
    source: str        # where the size came from

    @classmethod
    def with_margins(cls, size: int, source: str) -> "Vocab":
        low = min(1000, size // 10)
        high = size - max(min(1000, size // 10), size // 32)
        return cls(size=size, low=low, high=high, source=source)


def _from_models(models: list[dict]) -> int | None:
    first = models[0] if models else {}
    meta = first.get("meta") or {}
    for value in (meta.get("n_vocab"), first.get("vocab_size"), meta.get("vocab_size")):
        if isinstance(value, int) and value > 0:
            return value
    return None


def _from_tokenizer_dir(path: str) -> int | None:
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        return None
    data = json.loads(cfg.read_text())
    size = data.get("vocab_size") or (data.get("text_config") or {}).get("vocab_size")
    return size if isinstance(size, int) else None


def _from_tokenizer_file(path: str) -> int | None:
    """The vocabulary of the directory's tokenizer.json (with its added tokens), where it has no config.json."""
    from tokenbench.workload.local_tokenizer import LocalTokenizer, tokenizer_file  # only with --tokenizer DIR
    return LocalTokenizer(path).vocab_size if tokenizer_file(path) else None


def discover(base_url: str, models: list[dict], tokenizer_path: str | None = None,
             vocab_size: int | None = None, api_key: str | None = None) -> Vocab:
    """Explicit size, then a local tokenizer/config dir, then the server's model list or server info."""
    if vocab_size:
        told = _from_tokenizer_dir(tokenizer_path) if tokenizer_path else None
        if told is not None and told != vocab_size:
            raise UsageError(f"--vocab-size {vocab_size} and --tokenizer {tokenizer_path} (its config.json: vocab_size "
                             f"{told}) give two vocabularies", "give one of them (the served model's)")
        return Vocab.with_margins(vocab_size, "--vocab-size")
    if tokenizer_path and (size := _from_tokenizer_dir(tokenizer_path)):
        return Vocab.with_margins(size, f"{tokenizer_path}/config.json")
    if tokenizer_path and (size := _from_tokenizer_file(tokenizer_path)):
        return Vocab.with_margins(size, f"{tokenizer_path}/tokenizer.json")
    if size := _from_models(models):
        return Vocab.with_margins(size, "/v1/models")
    root = (models[0] if models else {}).get("root")
    if isinstance(root, str) and (size := _from_tokenizer_dir(root)):     # vLLM: the served local folder
        return Vocab.with_margins(size, f"{root}/config.json (/v1/models root)")
    info = api.get_json(base_url, "/get_server_info", api_key) or {}
    if isinstance(info, dict) and isinstance(info.get("vocab_size"), int):
        return Vocab.with_margins(info["vocab_size"], "/get_server_info")
    raise TargetError("cannot learn the server's vocabulary size (needed for exact-length token-id prompts)",
                      _vocab_fix(base_url, tokenizer_path, api_key))


def _serves_tokenizer(base_url: str, api_key: str | None) -> bool:
    """Whether the server tokenizes and detokenizes (POST /tokenize, /detokenize): what text prompts are built
    with when there is no local tokenizer."""
    for path, body in (("/tokenize", {"prompt": "a", "content": "a"}), ("/detokenize", {"tokens": [1]})):
        try:
            status, _ = api.post_json(base_url, path, body, api_key, timeout=10.0)
        except TargetError:
            return False
        if status != 200:
            return False
    return True


def _vocab_fix(base_url: str, tokenizer_path: str | None, api_key: str | None) -> str:
    """Everything a server that names no vocabulary will need, said at once: the size, and where it has no
    tokenizer of its own, a local one for the text prompts it needs if it refuses token ids."""
    if tokenizer_path:
        return f"{tokenizer_path} has neither a config.json with vocab_size nor a tokenizer.json: add --vocab-size N"
    if _serves_tokenizer(base_url, api_key):
        return "pass --vocab-size N (the served model's vocabulary) or --tokenizer DIR (its Hugging Face directory)"
    return ("pass --tokenizer DIR, the served model's Hugging Face directory: its config.json gives the vocabulary, "
            "its tokenizer.json the text prompts a server that refuses token ids needs (this one has no /tokenize); "
            "--vocab-size N alone serves only where token-id prompts are taken")
