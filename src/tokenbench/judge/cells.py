"""A stored cell as the judgements and the report read it (store/rows.CellRow; a merged cell holds its repeats):
its lengths, its load (judge/load_axes.py) and label, whether its figures can be shown plain (judge/status.py),
its headline figures and how many requests decoded together."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tokenbench.judge.status import State, figure_state, judge

if TYPE_CHECKING:
    from tokenbench.judge.load_axes import LoadKey
    from tokenbench.metrics.cell_summary import Metric
    from tokenbench.store.rows import CellRow


def pair_of(c: CellRow) -> tuple[int, int]:
    return (c.input_len, c.output_len)


def load_of(c: CellRow) -> LoadKey:
    """The cell's load dimension and its value there (judge/load_axes.py): concurrency, users, a request rate
    with the in-flight cap it ran under, or sessions started per second. A sessions cell stores its users as
    its concurrency, its session rate as its request rate."""
    from tokenbench.judge.load_axes import load_key  # a report's axes: the console's marks need no load key
    cap = c.summary.max_concurrency if c.concurrency is None else None
    sessions = c.summary.sessions is not None
    return load_key(c.concurrency, c.request_rate, c.concurrency if sessions else None, cap, sessions)


def x_of(c: CellRow) -> float:
    """The cell's value on its own load axis (requests in flight, users, or requests/s); compare it only
    with cells of the same `load_of(c).dimension`."""
    return load_of(c).value


def load_label_of(c: CellRow) -> str:
    return load_of(c).label


def agents(c: CellRow) -> bool:
    """A trajectories cell: its sessions are agents replaying a corpus (its users: concurrent agents)."""
    return c.summary.facts is not None and c.summary.facts.corpus_sha256 is not None


def session_shape_of(c: CellRow) -> str | None:
    """What two sessions cells must share to be compared, the load apart (None: not a sessions cell): a
    trajectories cell's corpus (its format and hash: its trajectories, turns and lengths), what its assistant
    turns are, the API and the measured window; a sessions cell's turns, lengths, system prompt, think time."""
    s, f = c.summary.sessions, c.summary.facts
    if s is None:
        return None
    if f is None or f.corpus_sha256 is None:
        return s.shape_text()
    ramp = f", ramp {s.ramp_up_s:g} s" if s.ramp_up_s else ""
    return (f"corpus {f.corpus_format} sha256 {f.corpus_sha256[:16]}, {s.assistant_turns} replies, {s.api}, "
            f"window {s.window}{ramp}")


def label_of(c: CellRow) -> str:
    """'512/512 c=8'; a single repeat other than the first says which ('512/512 c=8 #2'); lengths drawn
    per request say how ('512/512 r0.5 c=8')."""
    drawn = c.summary.facts.length_draws if c.summary.facts else None   # the distribution's tag
    base = f"{c.input_len}/{c.output_len}{' ' + drawn if drawn else ''} {load_label_of(c)}"
    return f"{base} #{c.repeat + 1}" if c.repeat and not c.repeats else base


MEASURED = ("output_throughput", "request_throughput", "mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")


def measured(cells: Iterable[CellRow]) -> bool:
    """Whether any of the cells completed a request or states a figure (an imported cell may state figures and
    no request count): else every figure of theirs is missing, and a table of them would hold only dashes."""
    return any(c.summary.completed or any(getattr(c.summary, k, None) for k in MEASURED) for c in cells)


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
