"""The load dimensions of a stored cell, each its own axis: closed-loop concurrency (requests in flight),
users (closed-loop sessions, when the workload has sessions: concurrent agents for trajectories), open-loop
request rate (requests/s, possibly with an in-flight cap), open-loop session rate (sessions started per
second: agents for trajectories), and trace replay (no load axis). A cell's `LoadKey` names its dimension, its value
on that axis and a rate cell's cap, so a 3 req/s cell is never the neighbour of a concurrency-3 cell in a
plot, a table column or a comparison (docs/reports.md, "Load axes")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Dimension = Literal["concurrency", "users", "rate", "session_rate", "replay"]
DIMENSIONS: tuple[Dimension, ...] = ("concurrency", "users", "rate", "session_rate", "replay")   # the order shown
SESSION_AXES: tuple[Dimension, ...] = ("users", "session_rate")     # sessions' loads: agents where they replay trajectories


@dataclass(frozen=True, order=True)
class LoadKey:
    """Where a cell sits: its dimension (by rank, so keys sort concurrency first), its value on that axis
    and, for a rate cell, the in-flight cap it ran under (0: none)."""

    rank: int
    value: float
    cap: int = 0

    @property
    def dimension(self) -> Dimension:
        return DIMENSIONS[self.rank]

    @property
    def label(self) -> str:
        """'c=8', 'users=4', '3/s', '3/s cap 8', '0.5 sessions/s', 'replay'."""
        if self.dimension == "concurrency":
            return f"c={self.value:g}"
        if self.dimension == "users":
            return f"users={self.value:g}"
        if self.dimension == "rate":
            return f"{self.value:g}/s" + (f" cap {self.cap}" if self.cap else "")
        if self.dimension == "session_rate":
            return f"{self.value:g} sessions/s" + (f" cap {self.cap}" if self.cap else "")
        return "replay" + (f" cap {self.cap}" if self.cap else "")


def load_key(concurrency: int | None, rate: float | None, users: int | None = None,
             cap: int | None = None, sessions: bool = False) -> LoadKey:
    """The key of a cell's load: users (sessions) before concurrency, since a session cell also holds a number
    of requests in flight; a rate with the cap of its in-flight requests, sessions started per second where
    the cell's `rate` starts sessions (`sessions`); neither: a trace replay."""
    if users is not None:
        return LoadKey(DIMENSIONS.index("users"), float(users))
    if concurrency is not None:
        return LoadKey(DIMENSIONS.index("concurrency"), float(concurrency))
    if rate is not None:
        return LoadKey(DIMENSIONS.index("session_rate" if sessions else "rate"), float(rate), cap or 0)
    return LoadKey(DIMENSIONS.index("replay"), 0.0, cap or 0)


def concurrency_key(value: float) -> LoadKey:
    """The key of a closed-loop cell at `value` requests in flight (what a bare number means in a lookup)."""
    return LoadKey(DIMENSIONS.index("concurrency"), float(value))
