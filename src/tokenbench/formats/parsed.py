"""What an importer reads from a file, before it is stored as a run of kind "import"
(formats/importers.py stores it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenbench.client.records import RequestRecord
from tokenbench.store.rows import CellRow


@dataclass(frozen=True)
class SourceRun:
    """The tokenbench run a file of tokenbench's own came from (formats/own.py): its spec (SLOs,
    sampling, name: what the judgements read) and environment go with the imported run."""

    id: str
    kind: str
    spec: dict[str, Any]
    environment: dict[str, Any]


@dataclass
class Parsed:
    configs: dict[str, dict] = field(default_factory=dict)                 # name -> facts
    cells: list[tuple[str, CellRow, list[RequestRecord]]] = field(default_factory=list)
    source: SourceRun | None = None     # a file tokenbench wrote: its cells keep their repeats and status
