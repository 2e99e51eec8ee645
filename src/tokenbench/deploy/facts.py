"""Server facts read from a running server and stored with every result."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(slots=True)
class ServerFacts:
    engine: str                       # llamacpp | vllm | sglang | reference | unknown
    version: str | None = None
    model: str | None = None
    ctx_per_seq: int | None = None    # longest input+output one sequence may have
    kv_capacity_tokens: int | None = None   # tokens the KV cache holds across all sequences
    slots: int | None = None          # llama.cpp parallel slots / max running requests where known
    prefix_cache: str | None = None   # the server's prefix-cache setting: "enabled" | "disabled" (None: unknown)
    speculative: str | None = None    # speculative decoding the server reports ("ngram, 3 draft tokens"; None: off/unknown)
    metrics: dict[str, str] = field(default_factory=dict)  # running / waiting / kv_usage -> the /metrics name
    source: dict[str, str] = field(default_factory=dict)   # which endpoint each fact came from
    raw: dict = field(default_factory=dict)                # the engine's own answers, trimmed

    def to_dict(self) -> dict:
        return asdict(self)
