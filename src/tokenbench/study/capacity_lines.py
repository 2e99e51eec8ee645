"""A capacity search's record said as the console's lines (study/capacity.py runs the search): per SLO tier the
answer with its 95 % interval, the binding limit and what the answer must be read with, per device and per $ an
hour where known, and the sustain cell's line."""

from __future__ import annotations

from tokenbench.judge.cost import Price, capacity_units
from tokenbench.metrics.capacity import Answer, SearchRecord, Sustain
from tokenbench.spec.slo import JOB_METRICS

STOPPED = ("outranked", "time", "budget", "died")    # a search stopped before any load met the tier: only below its fail
UNRELIABLE = "◊"       # an end of the interval that is not a 95 % bound (metrics/capacity.Check.unreliable)
UNITS = {"concurrency": "streams", "rate": "requests/s", "users": "users", "session_rate": "sessions/s"}
REASONS = {"converged": "converged", "budget": "cell budget spent", "above_max": "every load up to the limit met it",
           "below_min": "the lowest load tried missed it", "undecided": "the loads next to the boundary stayed "
           "undecided", "client": "could not decide: the client's own delays moved every cell measured "
           "where the boundary lies", "outranked": "stopped early: its boundary cannot reach the best config's",
           "time": "time budget spent", "died": "stopped: the engine died under load"}


def load_text(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def _answer_line(r: SearchRecord, a: Answer) -> str:
    head = f"capacity {r.workload} (tier {a.tier}: {', '.join(lim.text for lim in a.limits)}): "
    unit = UNITS[r.dimension]
    if a.capacity is None and a.reason in STOPPED and a.fail_load is not None:
        return head + f"below {load_text(a.fail_load)} {unit} ({REASONS[a.reason]})"
    if a.capacity is None:
        return head + f"none ({REASONS[a.reason]}: {load_text(a.fail_load)} {unit})"
    interval = (f"boundary in [{load_text(a.lo)}{UNRELIABLE * a.lo_unreliable}, "
                f"{load_text(a.hi)}{UNRELIABLE * a.hi_unreliable}] (95 %)")
    text = head + f"{load_text(a.capacity)} {unit}, {interval}, {REASONS[a.reason]}"
    b = a.binding
    if b is not None and b.value is not None:
        text += f"; binding {b.limit.text} at {load_text(a.fail_load)}: {b.value:.4g} ({b.margin:+.1%})"
    return text + _doubts(r, a)


def _doubts(r: SearchRecord, a: Answer) -> str:
    """What the answer must be read with: cells measured again for the client's delays, loads no clean cell
    could be measured at, loads that met the tier above one that failed."""
    unit, out = UNITS[r.dimension], ""
    if a.remeasured:
        out += f"; {a.remeasured} cells measured again: the client's own delays may have moved them"
    if a.client_loads:
        out += f"; no clean cell at {', '.join(load_text(x) for x in a.client_loads)} {unit} (the client's delays)"
    if a.nonmonotone:
        out += (f"; {', '.join(load_text(x) for x in a.nonmonotone)} {unit} met it above {load_text(a.fail_load)}, "
                "which failed (non-monotone: the answer stays below the first failure)")
    return out


def _sustain_line(r: SearchRecord, x: Sustain) -> str:
    moved = [f"{d.figure} {d.change:+.1%}" for d in x.drift if d.drifted]
    drifted = f"drifted ({', '.join(moved)})" if moved else "no drift"
    verdict = "holds" if x.holds else "does not hold"
    told = [x.status, drifted]
    if x.apart:
        told.append(f"{', '.join(x.apart)} apart from the search's cells at that load: they do not confirm it")
    if x.doubt is not None:
        told.append("the client's own delays may have moved it")
    return (f"sustain {r.workload} at {load_text(x.load)} {UNITS[r.dimension]} for {x.duration_s:.0f} s: "
            f"{verdict} ({'; '.join(told)})")


def _per_unit(r: SearchRecord, a: Answer, devices: int | None, price: Price | None) -> str:
    """'; 1.25 users per device (4 devices), 0.42 per $/h': the answer per device and at a price."""
    if a.capacity is None or devices is None:
        return ""
    units = capacity_units((a.capacity, a.lo, a.hi), devices, price)
    text = f"; {units.per_device[0]:.3g} {UNITS[r.dimension]} per device ({units.devices} device{'s' * (units.devices > 1)})"
    return text + (f", {units.per_usd_hour[0]:.3g} per $/h" if units.per_usd_hour else "")


def describe(r: SearchRecord, devices: int | None = None, price: Price | None = None) -> list[str]:
    """The console's lines: one per tier (per device and per $ an hour where `devices` is known), then the
    sustain cell's, and what ◊ means when it is shown."""
    out = [_answer_line(r, a) + _per_unit(r, a, devices, price) for a in r.answers]
    if any(a.lo_unreliable or a.hi_unreliable for a in r.answers):
        jobs = any(limit.metric in JOB_METRICS for t in r.tiers for limit in t.limits)
        out.append(f"{UNRELIABLE} that end rests on a percentile from too few requests to be a 95 % bound (a p99 "
                   "needs 299 at that load: --num-prompts, --duration)" if not jobs else
                   f"{UNRELIABLE} that end rests on a percentile from too few jobs to be a 95 % bound (a p95 needs 59 "
                   "complete jobs at that load, a p99 299: --num-sessions, or a larger corpus)")
    return out + ([_sustain_line(r, r.sustain)] if r.sustain is not None else [])
