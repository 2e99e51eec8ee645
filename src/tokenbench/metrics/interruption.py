"""How far a cell the user stopped (Ctrl-C) got: a group of its summary (metrics/cell_summary.py), set
only on an interrupted cell. Its figures cover the requests that finished; the report shows its request
count as finished / planned next to the interrupted mark (docs/reliability.md, "Interruptions")."""

from __future__ import annotations

from typing import ClassVar

from tokenbench.metrics.summary_groups import Group, Number


class Interruption(Group):
    """Stored flat as `interrupted_planned` and `interrupted_cut`."""

    PREFIX: ClassVar[str] = "interrupted_"
    planned: Number | None = None       # measured requests the cell was to send (None: a --duration cell)
    cut: Number | None = None           # requests cut off by the stop (stored as `cancelled`, in no figure)
