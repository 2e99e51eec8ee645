"""Sessions cells: the figures by turn index and the session shape, as the summary group `SessionFigures`
(keys `session_*`). Pure: fed the measured records one by one (`TurnTally.add`), like the cell's tally.
Formulas: docs/metrics.md, "Sessions".

Per turn k (0 = a session's first turn), over the measured requests that were turn k and completed:
requests, the mean prompt tokens (the server's count, else the asked length), the mean cached tokens and
the hit rate sum(cached) / sum(prompt tokens) over those that reported cached tokens, the mean TTFT with
its 95 % t interval, the median TTFT, and the mean TPOT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import request as rm
from tokenbench.metrics.summary_groups import Group, Number
from tokenbench.metrics.uncertainty import within
from tokenbench.spec.bench import Load, Workload


class SessionFigures(Group):
    """A sessions cell: its shape (what was asked), how its sessions went, and its figures by turn index
    (lists: item k is turn k; None where no request of that turn told)."""

    PREFIX: ClassVar[str] = "session_"
    # the shape (fairness compares it: judge/fairness.py)
    users: Number | None = None
    rate: float | None = None                 # open loop: sessions started per second
    ramp_up_s: float | None = None
    turns: Number | None = None
    user_len: Number | None = None            # new user tokens per turn
    output_len: Number | None = None
    system_len: Number | None = None
    system_shared: bool | None = None
    think_time_s: float | None = None
    think_time_dist: str | None = None
    assistant_turns: str | None = None        # returned | fixed
    api: str | None = None
    # how they went
    started: Number | None = None
    completed: Number | None = None
    cut_short: Number | None = None
    replies_returned_ids: Number | None = None
    replies_retokenized: Number | None = None
    replies_fixed: Number | None = None
    # by turn index
    turn_requests: list[Number] | None = None
    turn_prompt_tokens_mean: list[float | None] | None = None
    turn_cached_tokens_mean: list[float | None] | None = None
    turn_hit_rate: list[float | None] | None = None
    turn_ttft_mean_ms: list[float | None] | None = None
    turn_ttft_lo_ms: list[float | None] | None = None
    turn_ttft_hi_ms: list[float | None] | None = None
    turn_ttft_p50_ms: list[float | None] | None = None
    turn_tpot_mean_ms: list[float | None] | None = None

    def shape_text(self) -> str:
        """What two sessions cells must share to be compared, the load's size apart (the cells' x): turns,
        lengths, system prompt, think time, what the assistant turns are, the API, the ramp."""
        system = f", system {self.system_len}{' shared' if self.system_shared else ''}" if self.system_len else ""
        think = f", think {self.think_time_s:g} s {self.think_time_dist}" if self.think_time_s else ""
        ramp = f", ramp {self.ramp_up_s:g} s" if self.ramp_up_s else ""
        return (f"{self.turns} turns of {self.user_len}+{self.output_len} tokens{system}{think}, "
                f"{self.assistant_turns} replies, {self.api}{ramp}")

    def load_text(self) -> str:
        return f"{self.users} users" if self.users is not None else f"{self.rate:g} sessions/s"


def shape_of(wl: Workload, load: Load) -> SessionFigures:
    """The shape keys of a sessions cell, from what it asked."""
    return SessionFigures(users=load.users, rate=load.session_rate, ramp_up_s=load.ramp_up_s, turns=wl.turns,
                          user_len=wl.input_len, output_len=wl.output_len, system_len=wl.system_prompt_len or 0,
                          system_shared=wl.shared_system_prompt, think_time_s=wl.think_time_s,
                          think_time_dist=wl.think_time_dist, assistant_turns=wl.assistant_turns, api=wl.api)


@dataclass
class _Turn:
    prompt: list[int] = field(default_factory=list)
    cached: list[int] = field(default_factory=list)       # of requests that reported cached tokens
    cached_prompt: list[int] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)


def _mean(values: list) -> float | None:
    return float(np.mean(values)) if values else None


class TurnTally:
    """Completed measured requests by turn index (a few numbers each)."""

    def __init__(self) -> None:
        self.turns: dict[int, _Turn] = {}

    def add(self, r: RequestRecord) -> None:
        if r.turn is None or not r.ok or r.phase != "measure":
            return
        t = self.turns.setdefault(r.turn, _Turn())
        prompt = r.prompt_tokens if r.prompt_tokens is not None else r.input_len
        t.prompt.append(prompt)
        if r.cached_tokens is not None:
            t.cached.append(r.cached_tokens)
            t.cached_prompt.append(prompt)
        if (ttft := rm.ttft_ms(r)) is not None:
            t.ttft.append(ttft)
        if (tpot := rm.tpot_ms(r)) is not None:
            t.tpot.append(tpot)

    def figures(self) -> dict[str, list]:
        """The `turn_*` keys of SessionFigures, turn 0 to the last turn seen."""
        rows = [self.turns.get(k, _Turn()) for k in range(max(self.turns, default=-1) + 1)]
        ttft = [within(np.asarray(t.ttft), "mean") if t.ttft else None for t in rows]
        return {"turn_requests": [len(t.prompt) for t in rows],
                "turn_prompt_tokens_mean": [_mean(t.prompt) for t in rows],
                "turn_cached_tokens_mean": [_mean(t.cached) for t in rows],
                "turn_hit_rate": [sum(t.cached) / sum(t.cached_prompt) if sum(t.cached_prompt) else None for t in rows],
                "turn_ttft_mean_ms": [i.value if i else None for i in ttft],
                "turn_ttft_lo_ms": [i.lo if i else None for i in ttft],
                "turn_ttft_hi_ms": [i.hi if i else None for i in ttft],
                "turn_ttft_p50_ms": [float(np.median(t.ttft)) if t.ttft else None for t in rows],
                "turn_tpot_mean_ms": [_mean(t.tpot) for t in rows]}
