"""The client-health judgement per figure, as a summary group: for every published figure, how far the
delays the client measured could have moved it (`client_bounds`, metrics/figure_bounds.py), and the
figures the verdict marks because that exceeds the stated tolerance (`client_marks`, metrics/verdict.py).
A cell stays `ok` when some figures are marked; the report marks those figures only, and `compare` gives
verdicts for the others. Formulas: docs/metrics.md ("Client health")."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from tokenbench.metrics.stalls import Cause
from tokenbench.metrics.summary_groups import Group, Number


class FigureBound(BaseModel):
    """The most the measured delays could have moved one figure (in its unit), and what could move it most."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    bound: float
    cause: Cause | None = None


class FigureMark(BaseModel):
    """A figure the verdict marks: its bound exceeds the tolerance (both in the figure's unit)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    cause: Cause
    bound: float
    tolerance: float


class FigureHealth(Group):
    """Per-figure client health (keys: the summary's figure names, e.g. `p99_itl_ms`, `output_throughput`)."""

    client_bounds: dict[str, FigureBound] | None = None
    token_chunks: Number | None = None          # token-bearing chunks of the ok requests
    chunks_after_stall: Number | None = None    # ... stamped just after a stall (in a stall's window)
    chunks_coalesced: Number | None = None      # ... read together with another chunk while the loop was quiet
    client_marks: dict[str, FigureMark] | None = None

    def mark(self, key: str) -> FigureMark | None:
        return (self.client_marks or {}).get(key)
