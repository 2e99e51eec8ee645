"""A stored run in one word, as `tokenbench runs` lists it (docs/cli.md, "runs"). From the first that applies:

- `running`: a live process measures it now;
- `interrupted`: it stopped before it finished (Ctrl-C, a process that died, a full disk): `--resume` completes it;
- `failed`: the run failed (a server that could not start or stopped answering), or a cell failed;
- `empty`: it holds no cell;
- `marked`: some cell, or some figure of one, carries a mark (judge/status.py: invalid, a tolerated length
  mismatch or client lag, not measured; a figure the client's delays may have moved): read its report before
  quoting it;
- `ok`: every cell measured ok, no figure marked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tokenbench.judge.status import judge
from tokenbench.store.db import RunFilter, Store
from tokenbench.store.rows import CellRow

VERDICTS = ("running", "interrupted", "failed", "empty", "marked", "ok")
FAILED = ("failed", "errors", "length")          # judge/status.py kinds of a cell that failed


def run_verdict(status: str, cells: Iterable[CellRow]) -> str:
    """One of VERDICTS, from the run's (shown) status and its current cells."""
    if status in ("running", "interrupted"):
        return status
    cells = list(cells)
    states = [judge(c.status, c.message, c.summary) for c in cells]
    if status == "failed" or any(s.kind in FAILED for s in states):
        return "failed"
    if not states:
        return "empty"
    figures_marked = any(c.summary.figures and c.summary.figures.client_marks for c in cells)
    return "ok" if all(s.ok for s in states) and not figures_marked else "marked"


@dataclass(frozen=True, kw_only=True)
class RunListing:
    """A run as `tokenbench runs` lists it (`--json`: these keys)."""

    id: str
    date: str
    name: str
    kind: str
    target: str
    cells_done: int | None
    cells_total: int | None
    status: str
    verdict: str                        # one word (judge/run_verdict.py)
    message: str


def run_rows(store: Store, which: RunFilter = RunFilter()) -> list[RunListing]:
    """The runs `which` selects, oldest first, each with its study name and its verdict."""
    return [RunListing(id=r.id, date=r.created_at, name=r.name, kind=r.kind, target=r.target, cells_done=r.cells_done,
                       cells_total=r.planned_cells(len(store.configs(r.id))), status=r.status,
                       verdict=run_verdict(r.status, store.cells(r.id)), message=r.message or "")
            for r in store.runs(which)]
