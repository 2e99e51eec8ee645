"""What an open-loop cell offered: the send rate asked, the rate its schedule held, the rate its requests
were really sent at, and, when the sent rate is off the asked one by more than RATE_TOLERANCE, why
(`send_rate_off`, a reason code: report/explain.py says it in words). A mark on the cell, not a failure:
its figures are true for the load it did offer. Formulas: docs/metrics.md ("Send rates").

Evidence for the reason, each a mean over the cell's sends (failed ones too: a send is a send):
the wait for a free `--max-concurrency` slot (the runner counts it: `SlotWaits`), the set-up of a new
connection before the request was written, and the rest of the lateness (the client's own: its event
loop, its CPU, the host)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from tokenbench.metrics.summary_groups import Group, Number
from tokenbench.spec.bench import Load

RATE_TOLERANCE = 0.05          # the sent rate may be off the asked one by this much (relative) unmarked
MS = 1e6
OffReason = Literal["few_requests", "cap", "connect", "client"]
OFF_REASONS: tuple[OffReason, ...] = ("few_requests", "cap", "connect", "client")


@dataclass
class SlotWaits:
    """Sends that found every `--max-concurrency` slot taken, and how long they waited for one (ns)."""

    sends: int = 0
    total_ns: int = 0

    def add(self, waited_ns: int) -> None:
        self.sends += 1
        self.total_ns += max(0, waited_ns)

    def merged(self, others: list[SlotWaits]) -> SlotWaits:
        parts = [self, *others]
        return SlotWaits(sum(p.sends for p in parts), sum(p.total_ns for p in parts))


@dataclass(frozen=True)
class SendTimes:
    """Per measured send (metrics/tally.py): when it was due, when its bytes were written, and the
    connection set-up before that (0 on a kept-alive connection), all ns."""

    intended: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    wrote: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    connect: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


class SendRates(Group):
    """An open-loop cell's send rates (requests/s) and what delayed its sends (ms, means over the sends).
    Counts are numbers (repeats merged into a mean need not be whole)."""

    arrival_seed: Number | None = None         # seed of the cell's arrival draws (load/arrivals.arrival_seed)
    send_rate_asked: float | None = None       # --request-rate
    send_rate_scheduled: float | None = None   # (n - 1) / (last intended - first intended)
    send_rate_achieved: float | None = None    # (n - 1) / (last written - first written)
    send_late_mean_ms: float | None = None     # the client's own lateness: written - intended - connect - slot wait
    send_slot_wait_mean_ms: float | None = None  # waiting for a free --max-concurrency slot (over all sends)
    send_slot_waits: Number | None = None         # sends that waited for one
    send_connect_mean_ms: float | None = None  # new connections' set-up before the write (over all sends)
    send_rate_off: OffReason | None = None     # achieved off asked by > RATE_TOLERANCE: why
    send_cap: Literal["queue", "gate"] | None = None  # how --max-concurrency held arrivals (--rate-cap)

    @property
    def off(self) -> float | None:
        """achieved / asked - 1 (None without both)."""
        a, b = self.send_rate_achieved, self.send_rate_asked
        return a / b - 1 if a is not None and b else None


def rate_over(times: np.ndarray) -> float | None:
    """Events per second from the first to the last: (n - 1) / (max - min); None under 2 or no span."""
    if len(times) < 2:
        return None
    span = int(times.max()) - int(times.min())
    return (len(times) - 1) / (span / 1e9) if span > 0 else None


def _means(t: SendTimes, waits: SlotWaits) -> tuple[float, float, float]:
    """(client lateness, slot wait, connect) in ms, means over the sends."""
    n = len(t.intended)
    slot = waits.total_ns / n / MS
    connect = float(t.connect.mean()) / MS
    late = float((t.wrote - t.intended - t.connect).mean()) / MS - slot
    return max(0.0, late), slot, connect


def off_reason(rates: SendRates, load: Load) -> OffReason | None:
    """Why the sent rate is off the asked one by more than RATE_TOLERANCE (None when it is not):
    the schedule itself (the draws over these few sends, or the part of the schedule a stopped cell
    sent; under `rate_cap` gate the schedule waited for the cap's slots: "cap") before the sends; else the largest delay of the three: the cap's slots (the server did not
    finish requests as fast as the rate needs), new connections (the server accepted them late), the
    client's own lateness."""
    asked = rates.send_rate_asked
    if not asked or load.arrival == "trace":
        return None
    if rates.send_rate_achieved is None:
        return "few_requests"
    if abs(rates.send_rate_achieved / asked - 1) <= RATE_TOLERANCE:
        return None
    sched = rates.send_rate_scheduled
    if sched is None or abs(sched / asked - 1) > RATE_TOLERANCE:
        gated = load.rate_cap == "gate" and (rates.send_slot_waits or 0) > 0
        return "cap" if gated else "few_requests"     # a gate's schedule itself waited for the slots
    causes = {"cap": rates.send_slot_wait_mean_ms or 0.0, "connect": rates.send_connect_mean_ms or 0.0,
              "client": rates.send_late_mean_ms or 0.0}
    worst = max(causes, key=lambda k: causes[k])
    return worst if causes[worst] > 0 else "few_requests"     # type: ignore[return-value]


def send_rates(t: SendTimes, load: Load, waits: SlotWaits, seed: int | None = None) -> SendRates | None:
    """The group of an open-loop cell (None for a closed loop, a sessions cell, or a cell that sent nothing)."""
    if load.concurrency is not None or load.sessions or not len(t.intended):
        return None
    late, slot, connect = _means(t, waits)
    capped = load.max_concurrency is not None
    given = {"arrival_seed": seed if load.arrival == "poisson" else None, "send_rate_asked": load.request_rate,
             "send_rate_scheduled": rate_over(t.intended), "send_rate_achieved": rate_over(t.wrote),
             "send_late_mean_ms": late, "send_slot_wait_mean_ms": slot if capped else None,
             "send_slot_waits": waits.sends if capped else None, "send_connect_mean_ms": connect,
             "send_cap": load.rate_cap if capped else None}
    rates = SendRates(**{k: v for k, v in given.items() if v is not None})
    reason = off_reason(rates, load)
    return rates.model_copy(update={"send_rate_off": reason}) if reason else rates
