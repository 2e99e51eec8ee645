"""What a server is, as read from it (deploy/engines) or as an imported result states it (formats/), stored
with every server config and read back as this type (store/rows.ConfigRow). The eleven facts read from a
running server are always stored; the others only when given."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from tokenbench.spec.server_kinds import Capabilities

ALWAYS = ("engine", "version", "model", "ctx_per_seq", "kv_capacity_tokens", "slots", "prefix_cache", "speculative",
          "metrics", "source", "raw")      # the facts read from a running server, stored always


@dataclass(frozen=True)
class Sampling:
    """How an imported result's client sampled (tokenbench's own runs: temperature 0, ignore_eos)."""

    temperature: float | None = None
    ignore_eos: bool | None = None
    prefix_cache: str | None = None
    given: tuple[str, ...] = field(default=(), compare=False, repr=False)   # the keys stated, in their order

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.given}

    @classmethod
    def from_dict(cls, stated: dict[str, Any]) -> Sampling:
        known = {k: v for k, v in stated.items() if k in SAMPLING}
        return cls(**known, given=tuple(known))


@dataclass(frozen=True)
class GraphCapture:
    """The decode batch sizes an engine runs as captured graphs (CUDA graphs; Ascend ACL/NPU graphs): a
    batch is padded up to the next captured size, and one above the largest runs eager (slower per
    step). Read from the server where it tells, else derived from the profile's flags and the engine's
    default rule (deploy/engines; docs/deploy.md "Graph capture")."""

    sizes: tuple[int, ...] = ()          # every captured size, when known
    max_size: int | None = None          # the largest; 0: graphs off (every batch eager); None: unknown
    source: str = ""                     # where it was read, or the rule it was derived by
    note: str = ""                       # a caveat (e.g. a flag a newer engine refuses)

    @property
    def known(self) -> bool:
        return self.max_size is not None

    def eager(self, batch: float | None) -> bool:
        """A decode batch above the largest captured size (graphs on): it runs eager."""
        return bool(self.max_size) and batch is not None and batch > (self.max_size or 0)

    def padded(self, batch: float | None) -> int | None:
        """The captured size a batch is padded up to (None: sizes unknown, or it runs eager)."""
        if batch is None or self.eager(batch):
            return None
        return next((s for s in self.sizes if s >= batch), None)

    def to_dict(self) -> dict[str, Any]:
        return {"sizes": list(self.sizes), "max_size": self.max_size, "source": self.source, "note": self.note}

    @classmethod
    def from_dict(cls, stored: dict[str, Any]) -> GraphCapture:
        return cls(tuple(int(x) for x in stored.get("sizes") or ()), stored.get("max_size"),
                   str(stored.get("source") or ""), str(stored.get("note") or ""))


@dataclass(slots=True, kw_only=True)
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
    # stated by an imported result (tokenbench import) or a hand-written config, stored only when given
    image: str | None = None
    hardware: str | None = None
    devices: int | None = None
    params_b: float | None = None
    bytes_per_param: float | None = None
    active_params_b: float | None = None
    n_params: int | None = None
    moe: bool | None = None
    num_experts: int | None = None
    tokenizer: str | None = None
    workload: Sampling | None = None
    client: dict[str, Any] | None = None
    graphs: GraphCapture | None = None    # captured decode batch sizes (stored when known)
    capabilities: Capabilities | None = None   # what the server accepts (load/probe.py), stored when probed or assumed
    other: dict[str, Any] = field(default_factory=dict)   # any other fact given (e.g. speculative_*), as given
    given: tuple[str, ...] = field(default=ALWAYS, compare=False, repr=False)   # the keys stored, in their order

    def to_dict(self) -> dict:
        """The stored form: the keys given (read from a server: the first eleven), then any other fact."""
        out = {k: _plain(getattr(self, k)) for k in self.given}
        return {**out, **self.other}

    @classmethod
    def from_dict(cls, stored: dict[str, Any]) -> ServerFacts:
        known = {k: v for k, v in stored.items() if k in NAMES}
        if isinstance(known.get("workload"), dict):
            known["workload"] = Sampling.from_dict(known["workload"])
        if isinstance(known.get("graphs"), dict):
            known["graphs"] = GraphCapture.from_dict(known["graphs"])
        if isinstance(known.get("capabilities"), dict):
            known["capabilities"] = Capabilities.model_validate(known["capabilities"])
        other = {k: v for k, v in stored.items() if k not in NAMES}
        return cls(**{"engine": "unknown", **known, "other": other, "given": tuple(known)})


    def with_graphs(self, graphs: GraphCapture | None) -> None:
        """Record the captured batch sizes (stored with the facts from now on)."""
        if graphs is not None:
            self.graphs = graphs
            self.given = tuple(dict.fromkeys((*self.given, "graphs")))

    def with_capabilities(self, caps: Capabilities) -> None:
        """Record what the server accepts (stored with the facts from now on)."""
        self.capabilities = caps
        self.given = tuple(dict.fromkeys((*self.given, "capabilities")))


def _plain(value: Any) -> Any:
    if isinstance(value, Capabilities):
        return value.model_dump(mode="json")
    return value.to_dict() if isinstance(value, Sampling | GraphCapture) else value


NAMES = frozenset(f.name for f in fields(ServerFacts)) - {"other", "given"}
SAMPLING = frozenset(f.name for f in fields(Sampling)) - {"given"}
