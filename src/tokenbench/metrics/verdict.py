"""The whole verdict of a cell, in one place: were the lengths what was asked and did few enough requests
fail (metrics/verify.py), which figures the client's own delays could have moved beyond the accuracy
tokenbench claims (its health, judged per figure: the cell's status does not depend on it), and did the
server stay reachable. `cell_verdict` returns it typed: the status and its reason, the figures marked with
their cause, and why the server is taken for gone. Nothing downstream overrules it; the report reads it
back from the stored status, message and summary (report/ judgements). Formulas: docs/metrics.md
("Client health")."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from tokenbench.metrics.cell_summary import CellSummary, known
from tokenbench.metrics.figure_marks import FigureHealth, FigureMark
from tokenbench.metrics.stalls import PROBE_RESOLUTION_NS
from tokenbench.metrics.verify import UNREACHABLE_AFTER, Outcomes, unreachable, verdict

Status = Literal["ok", "failed", "invalid", "skipped", "interrupted"]

# Client health: the accuracy tokenbench claims for a published latency figure is CLAIM_REL of the
# figure or CLAIM_ABS_MS, whichever is larger (the absolute part is calibrate's delivery limit); for a
# throughput CLAIM_REL of it. A figure the client's measured delays (or a buffered stream) could move by
# more than that is marked, with the cause; the others stay clean, and so does the cell's status.
CLAIM_REL = 0.05
CLAIM_ABS_MS = 1.0
PROBE_RESOLUTION_MS = PROBE_RESOLUTION_NS / 1e6


@dataclass(frozen=True)
class VerdictPolicy:
    """What a cell tolerates (the run's options) and what the verdict needs to say about the target."""

    allow_mismatch: bool = False         # --allow-length-mismatch
    max_error_rate: float = 0.0          # --max-error-rate
    api_key_sent: bool = False
    base_url: str = ""                   # named when the server became unreachable


@dataclass(frozen=True)
class Verdict:
    status: Status
    message: str = ""                    # why, one line ("" when ok)
    unreachable: str | None = None       # the server stopped accepting connections (the cell stopped sending)
    marks: dict[str, FigureMark] = field(default_factory=dict)   # figures the client's delays may have moved

    def failed(self, why: str) -> Verdict:
        """The same verdict turned "failed" with `why` ahead of its message (a server that died)."""
        return replace(self, status="failed", message=f"{why}; {self.message}" if self.message else why)

    def marked(self, summary: CellSummary) -> CellSummary:
        """The summary with the verdict's marks (kept in the stored summary, read by the report)."""
        extra: dict = {}
        if self.unreachable:
            extra["server_unreachable"] = True
        if self.marks:
            figures = summary.figures or FigureHealth()
            extra["figures"] = figures.model_copy(update={"client_marks": dict(self.marks)})
        return summary.with_(**extra)


def claim_ms(scale_ms: float) -> float:
    """The largest error tokenbench claims for a latency figure of this scale."""
    return max(CLAIM_REL * scale_ms, CLAIM_ABS_MS)


def tolerance(key: str, value: float) -> float:
    """The stated tolerance of a figure (its summary key and value), in its unit."""
    return claim_ms(value) if key.endswith("_ms") else CLAIM_REL * abs(value)


def client_health_verdict(summary: CellSummary) -> dict[str, FigureMark]:
    """The figures the client's measured delays (or a buffered stream) could move by more than their
    tolerance (metrics/figure_bounds.py computed the bounds), each with its cause; {} when none."""
    bounds = summary.figures.client_bounds if summary.figures else None
    out = {}
    for key, b in (bounds or {}).items():
        value = known(getattr(summary, key, None))
        if value is None or b.cause is None:
            continue
        tol = tolerance(key, float(value))
        if b.bound > tol:
            out[key] = FigureMark(cause=b.cause, bound=b.bound, tolerance=tol)
    return out


def _gone(seen: Outcomes, policy: VerdictPolicy, planned: int | None) -> str | None:
    lost = unreachable(seen)
    if not lost:
        return None
    left = f"{planned - seen.n} of {planned} requests not sent" if planned else "the rest not sent"
    return (f"server unreachable at {policy.base_url}: {UNREACHABLE_AFTER} consecutive connection failures "
            f"({lost}); {left}")


def cell_verdict(seen: Outcomes, summary: CellSummary, policy: VerdictPolicy, planned: int | None = None) -> Verdict:
    """The cell's verdict: lengths and errors decide its status, a server that went away overrides them
    (`--resume` runs such a cell again); the client's health marks the figures it could have moved."""
    status, message = verdict(seen, policy.allow_mismatch, policy.max_error_rate, policy.api_key_sent)
    marks = client_health_verdict(summary)
    lost = _gone(seen, policy, planned)
    return Verdict("failed", lost, lost, marks) if lost else Verdict(status, message, marks=marks)
