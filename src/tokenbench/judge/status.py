"""Is a stored cell's figure trustworthy? One verdict per cell, derived from what the sweep stored, and
one per figure within an ok cell.

A cell is *ok* only when its stored status is "ok" and nothing was tolerated that changes its numbers.
Every other cell is shown with a mark and a footnote that says why (docs/reports.md, "Marks"); plots draw
it hollow; comparisons refuse a ratio built on it unless asked; a repeat that is not ok never enters a
mean. Within an ok cell, a figure the client's delays (or a buffered stream) could have moved beyond its
tolerance is *moved* (`figure_state`): marked `~` with its cause where it is shown, left out of verdicts
unless `--allow-client-lag`; the cell's other figures stay clean. This module is pure: it reads the stored
status, message and summary, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import POWER_KEYS

# kind -> mark shown next to the figure. "*" (over capacity) is a different thing: a cell can be both.
MARKS = {
    "failed": "✗",         # the cell's verdict was "failed" (server died, no request, other)
    "errors": "✗",         # more requests failed than --max-error-rate allows
    "length": "✗",         # lengths differed from what was asked (and were not tolerated)
    "invalid": "‡",        # the client could not keep up: the numbers measure the client
    "mismatch": "≠",       # lengths differed and --allow-length-mismatch tolerated it
    "moved": "~",          # one figure: the client's delays (or buffering) could move it beyond its tolerance
    "lagged": "~",         # (earlier versions) a whole cell's client lag tolerated by --allow-client-lag
    "spec_random": "§",    # random prompts to a speculative server: acceptance (so TPOT) is not what text gets
    "sparse": "◌",         # power and energy: the monitor's samples do not cover the cell's measured window
    "skipped": "–",        # never measured
    "interrupted": "‖",    # stopped by the user (Ctrl-C): its figures cover only the requests that finished
    "unknown": "?",        # a status this version does not know
}
OK = "ok"
REASON_CHARS = 200


@dataclass(frozen=True)
class State:
    kind: str               # "ok" or a key of MARKS
    reason: str = ""        # the stored message (one line, cut), a count for "mismatch", a cause for "moved"

    @property
    def ok(self) -> bool:
        return self.kind == OK

    @property
    def mark(self) -> str:
        return "" if self.ok else MARKS[self.kind]


def _failed_kind(message: str) -> str:
    if "had the wrong length" in message:
        return "length"
    if "requests failed" in message:
        return "errors"
    return "failed"


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= REASON_CHARS else flat[: REASON_CHARS - 1] + "…"


def judge(status: str, message: str, summary: CellSummary) -> State:
    """The verdict of one stored cell (one repeat, or a merged cell with its merged status)."""
    if status == "failed":
        return State(_failed_kind(message), _one_line(message))
    if status in ("invalid", "skipped", "interrupted"):
        return State(status, _one_line(message))
    if status != OK:
        return State("unknown", _one_line(f"status '{status}': {message}"))
    bad = summary.length_mismatches or 0
    if bad:
        sent = summary.num_prompts or summary.completed or "?"
        return State("mismatch", f"{bad}/{sent}")
    lag = summary.client_lag_tolerated
    if lag:
        return State("lagged", _one_line(lag))
    spec = summary.counters.spec_random_prompts if summary.counters else None
    if spec:
        return State("spec_random", _one_line(spec))
    return State(OK)


def figure_state(cell: State, summary: CellSummary, key: str) -> State:
    """The state of one figure (its summary key) of a cell whose state is `cell`: the cell's when it is
    not ok; `sparse` for a power or energy figure whose samples do not cover the measured window
    (MonitorFigures.power_sparse); `moved` (reason: the cause) when the client-health verdict marked the
    figure; else ok."""
    if not cell.ok:
        return cell
    if key in POWER_KEYS and summary.monitor is not None and summary.monitor.power_sparse:
        return State("sparse")
    mark = summary.figures.mark(key) if summary.figures else None
    return State("moved", mark.cause) if mark else cell


def usable(state: State, allow_client_lag: bool = False) -> bool:
    """Whether a figure in this state gets an interval and a verdict: ok, or moved and allowed."""
    return state.ok or (allow_client_lag and state.kind == "moved")
