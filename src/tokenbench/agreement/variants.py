"""The tokenbench runs of `tokenbench agree`: its default request and the variants that each change ONE
thing toward the peer's request (found from the captured bodies, agreement/capture.py), and the study
spec and command line of each. Every change is a declared study option (docs/cli.md), so a user can send
the same request with `tokenbench bench`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenbench.agreement.peers import Cell
from tokenbench.spec.study import StudySpec


@dataclass(frozen=True)
class Variant:
    """How one tokenbench arm differs from tokenbench's default request."""

    name: str                                      # short id, e.g. "text", "no-min-tokens"
    label: str                                     # what tables call it
    changes: Mapping[str, Any] = field(default_factory=dict)   # dotted study key -> value
    input_len: int | None = None                   # prompt tokens by the server's count, where the peer's differ
    warmup_extra: int | None = None                # warmup = concurrency + this, the first measured prompt repeated

    @property
    def is_default(self) -> bool:
        return not self.changes and self.input_len is None and self.warmup_extra is None


DEFAULT = Variant("default", "tokenbench default")
PEER_WORKLOAD = "peer-workload"


def combined(variants: Iterable[Variant]) -> Variant:
    """Every change at once: the peer's workload, as far as tokenbench's options can send it."""
    parts = list(variants)
    changes: dict[str, Any] = {}
    for v in parts:
        changes.update(v.changes)
    return Variant(PEER_WORKLOAD, "all peer-like changes", changes,
                   next((v.input_len for v in parts if v.input_len is not None), None),
                   next((v.warmup_extra for v in parts if v.warmup_extra is not None), None))


def warmup_count(cell: Cell, variant: Variant) -> int:
    return cell.concurrency + (variant.warmup_extra or 0)


def set_key(data: dict, dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        data = data.setdefault(part, {})
    data[leaf] = value


def study_data(cell: Cell, variant: Variant = DEFAULT) -> dict:
    """The study spec's mapping for one arm of one cell: the cell's workload, closed loop at its concurrency,
    `concurrency` warmup requests (as both peers are asked for), then the variant's changes. Tracing is off in
    every arm: no peer sends a `traceparent`, and a server deployed with `deploy up --otlp-listen` would otherwise
    get one with each of tokenbench's requests (a header the peer's lack, and spans the server exports for them
    alone)."""
    data: dict[str, Any] = {
        "name": f"agree-{variant.name}",
        "target": {"base_url": cell.base_url, "model": cell.model, "server_traces": "off"},
        "workload": {"tokenizer_path": cell.tokenizer}, "pairs": [(variant.input_len or cell.input_len, cell.output_len)],
        "concurrency": [cell.concurrency], "requests": {"num_prompts": cell.num_prompts},
        "warmup_requests": warmup_count(cell, variant), "seed": cell.seed}
    for key, value in variant.changes.items():
        set_key(data, key, value)
    return data


def study_spec(cell: Cell, variant: Variant = DEFAULT) -> StudySpec:
    return StudySpec.model_validate(study_data(cell, variant))


def _flag(key: str, value: Any) -> list[str]:
    """The bench flag of a study key (cli/flags.py derives every flag as `--` + the key's last part)."""
    flag = "--" + key.rsplit(".", 1)[-1].replace("_", "-")
    if value is True:
        return [flag]
    return [flag, json.dumps(value) if isinstance(value, dict) else str(value)]


def tokenbench_args(cell: Cell, json_path: str, variant: Variant = DEFAULT) -> list[str]:
    """`tokenbench bench` sending what the arm sends (the same study as `study_spec`)."""
    args = ["--name", f"agree-{variant.name}", "--base-url", cell.base_url, "--model", cell.model,
            "--tokenizer", cell.tokenizer, "--server-traces", "off",
            "--input-len", str(variant.input_len or cell.input_len), "--output-len", str(cell.output_len),
            "--concurrency", str(cell.concurrency), "--num-prompts", str(cell.num_prompts),
            "--warmup-requests", str(warmup_count(cell, variant)), "--seed", str(cell.seed)]
    for key, value in variant.changes.items():
        args += _flag(key, value)
    return [*args, "--output", json_path, "--no-store"]
