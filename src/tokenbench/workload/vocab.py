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
from tokenbench.errors import TargetError


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


def discover(base_url: str, models: list[dict], tokenizer_path: str | None = None,
             vocab_size: int | None = None, api_key: str | None = None) -> Vocab:
    """Explicit size, then a local tokenizer/config dir, then the server's model list or server info."""
    if vocab_size:
        return Vocab.with_margins(vocab_size, "--vocab-size")
    if tokenizer_path and (size := _from_tokenizer_dir(tokenizer_path)):
        return Vocab.with_margins(size, f"{tokenizer_path}/config.json")
    if size := _from_models(models):
        return Vocab.with_margins(size, "/v1/models")
    root = (models[0] if models else {}).get("root")
    if isinstance(root, str) and (size := _from_tokenizer_dir(root)):     # vLLM: the served local folder
        return Vocab.with_margins(size, f"{root}/config.json (/v1/models root)")
    info = api.get_json(base_url, "/get_server_info", api_key) or {}
    if isinstance(info, dict) and isinstance(info.get("vocab_size"), int):
        return Vocab.with_margins(info["vocab_size"], "/get_server_info")
    raise TargetError("cannot learn the server's vocabulary size (needed for exact-length token-id prompts)",
                      "pass --vocab-size N or --tokenizer PATH (a directory with config.json)")
