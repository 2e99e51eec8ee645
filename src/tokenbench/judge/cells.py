"""A stored cell as the judgements and the report read it (store/rows.CellRow; a merged cell holds its repeats):
its lengths, its load (judge/load_axes.py) and label, whether its figures can be shown plain (judge/status.py),
its headline figures and how many requests decoded together."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenbench.judge.status import State, figure_state, judge

if TYPE_CHECKING:
    from tokenbench.judge.load_axes import LoadKey
    from tokenbench.metrics.cell_summary import Metric
    from tokenbench.store.rows import CellRow


def pair_of(c: CellRow) -> tuple[int, int]:
    return (c.input_len, c.output_len)


def load_of(c: CellRow) -> LoadKey:
    """The cell's load dimension and its value there (judge/load_axes.py): concurrency, users, or a request
    rate with the in-flight cap it ran under. A sessions cell stores its users as its concurrency."""
    from tokenbench.judge.load_axes import load_key  # a report's axes: the console's marks need no load key
    cap = c.summary.max_concurrency if c.concurrency is None else None
    users = c.concurrency if c.summary.sessions is not None else None
    return load_key(c.concurrency, c.request_rate, users, cap)


def x_of(c: CellRow) -> float:
    """The cell's value on its own load axis (requests in flight, users, or requests/s); compare it only
    with cells of the same `load_of(c).dimension`."""
    return load_of(c).value


def load_label_of(c: CellRow) -> str:
    if c.summary.sessions is not None and c.concurrency is None and c.request_rate is not None:
        return f"{c.request_rate:g} sessions/s"      # session starts per second
    return load_of(c).label


def label_of(c: CellRow) -> str:
    """'512/512 c=8'; a single repeat other than the first says which ('512/512 c=8 #2'); lengths drawn
    per request say how ('512/512 r0.5 c=8')."""
    drawn = c.summary.facts.length_draws if c.summary.facts else None   # the distribution's tag
    base = f"{c.input_len}/{c.output_len}{' ' + drawn if drawn else ''} {load_label_of(c)}"
    return f"{base} #{c.repeat + 1}" if c.repeat and not c.repeats else base


def state_of(c: CellRow) -> State:
    """Whether this cell's figures can be shown plain (judge/status.py)."""
    return judge(c.status, c.message, c.summary)


def figure_state_of(c: CellRow, key: str) -> State:
    """Whether one figure (its summary key, e.g. Metric.key) can be shown plain (judge/status.py)."""
    return figure_state(state_of(c), c.summary, key)


def ok_repeats(c: CellRow) -> list[CellRow]:
    """The repeats whose numbers a merged cell averages: the ok ones only (possibly none)."""
    group = list(c.repeats) or [c]
    return [r for r in group if state_of(r).ok]


def launch_of(c: CellRow) -> str | None:
    """The server launch a cell ran on (`launch_id`, study/server_process.py); a merged cell's where every
    repeat ran on one; None where that is not recorded (a remote server, an older or imported run) or its
    repeats ran on several."""
    ids = {r.summary.launch.id if r.summary.launch is not None else None for r in (c.repeats or (c,))}
    return ids.pop() if len(ids) == 1 else None


def value_of(c: CellRow, metric: Metric) -> float | None:
    """A headline figure (None: missing or NaN)."""
    return metric.of(c.summary)


def decode_batch(c: CellRow, slots: int | None = None) -> tuple[float | None, str]:
    """(requests decoding together, how it is known): the server's mean running requests (/metrics),
    else the closed loop's concurrency (capped by the server's slots), else the open loop's achieved
    concurrency (requests in flight at the client, time-averaged)."""
    running = c.summary.monitor.server_running_mean if c.summary.monitor else None
    if running is not None:
        return float(running), "running"
    if c.concurrency is not None:
        return float(min(c.concurrency, slots) if slots else c.concurrency), "concurrency"
    achieved = c.summary.achieved_concurrency
    return (None, "") if achieved is None else (float(achieved), "achieved")
