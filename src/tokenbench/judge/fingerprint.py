"""What varies between two compared sides besides what was changed on purpose, and when a verdict between them
cannot be given (docs/metrics.md, "Run fingerprints and refused verdicts"): the one rule `compare` and `gate`
apply, said the same way by both (report/explain.refusal_text).

A side's `Fingerprint` is what its runs stored: the engine, its version, flags, model and image, tokenbench's
version, the host and its CPU, the server launches its cells ran on and their prefix-cache states. `differences`
lists the facts that differ, each with both values: another engine build is the point of a comparison, a
relaunch or another host is not, and a reader should see both. The engine build and the host (`build_and_host`)
are also what a noise floor is learned within (judge/floors.py).

`refusals` is the rule a verdict obeys, given the facts of each side's cells (a figure's cells: one per run or
repeat on each side): a verdict is refused where the two sides' prefix-cache states differ (`cache_state`: the
state recorded before the cell, else the share the server served from its cache), or where a busier host could
explain the worse side's figure (`HostRule`, from the CPU shares each cell recorded). The reasons are data,
report/ says them in words.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tokenbench.judge.views import ConfigInfo, RunData
from tokenbench.metrics.cell_summary import CellSummary, known
from tokenbench.metrics.summary_groups import CpuShares
from tokenbench.store.rows import CellRow

Side = Literal["a", "b"]
Fact = Literal["engine", "version", "model", "flags", "image", "tool", "host", "cpu_model", "cpus", "launch",
               "cache"]
ReasonCode = Literal["cache_differs", "cache_unknown", "other_work", "server_wait", "cpu_pressure", "host_unknown"]


@dataclass(frozen=True)
class HostRule:
    """When a busier host could explain the worse side's figure (all in % of one core, or points of PSI). Where
    both sides tell the other work's CPU (the server's processes seen), the worse side's host was short of CPU
    (less than `idle_below` idle, or its CPU pressure, PSI some, above the better side's by more than
    `psi_points`) and
    - its other work took more than `other_points` more than the better side's (`other_work`), or
    - its server's threads waited for a CPU more than `wait_points` more than the better side's, while other work
      took no less there (`server_wait`: the server's own account of the contention, where the host was full
      on both sides and other work could take no more of it);
    where the server's processes are not seen on a side, but both have PSI: the worse side's CPU pressure above
    the better side's by more than `psi_points` (`cpu_pressure`). Anything else cannot be checked, and is said
    (`host_unknown`), not refused."""

    other_points: float = 25.0     # a quarter of a core more taken by other work
    idle_below: float = 100.0      # less than one whole core idle over the window
    psi_points: float = 10.0       # some runnable task waited for a CPU 10 % more of the window
    wait_points: float = 10.0      # the server's threads waited for a CPU a tenth of a core more


WARM_SHARE = 0.05         # a cell whose server served this share of its prompt tokens from its prefix cache is warm


@dataclass(frozen=True, kw_only=True)
class Reason:
    """Why a verdict is refused (`refuses`), or what could not be checked (not refusing). `side` names the side
    the reason is about (the busier host, the side whose state is unknown), `a` and `b` are the two sides'
    values (means over their cells), `limit` the rule's threshold that was crossed; `shares`: for a cache
    reason, each side's mean share of prompt tokens the server served from its cache (None: not reported)."""

    code: ReasonCode
    refuses: bool
    side: Side | None = None
    a: float | str | None = None
    b: float | str | None = None
    limit: float | None = None
    shares: tuple[float | None, float | None] = (None, None)


def summaries(cells: Sequence[CellRow]) -> list[CellSummary]:
    """The summaries of cells as measured: a merged cell's repeats, each on its own."""
    return [r.summary for c in cells for r in (c.repeats or (c,))]


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known and len(known) == len(values) else None


def _cpu(side: Sequence[CellSummary]) -> list[CpuShares | None]:
    return [s.cpu for s in side]


def _field(side: Sequence[CellSummary], name: str) -> float | None:
    """The side's mean of a CPU share (None unless every cell tells it)."""
    shares = _cpu(side)
    return _mean([getattr(c, name) if c is not None else None for c in shares]) if shares else None


def _idle(side: Sequence[CellSummary]) -> float | None:
    return _mean([c.idle_pct() if c is not None else None for c in _cpu(side)]) if side else None


def busier(worse: Sequence[CellSummary], better: Sequence[CellSummary], worse_side: Side,
           rule: HostRule = HostRule()) -> Reason | None:
    """The reason a busier host could explain the worse side's figure (HostRule), a `host_unknown` reason where
    it cannot be checked, or None where the hosts were alike enough."""
    def said(code: ReasonCode, limit: float, x: float, y: float) -> Reason:
        """The reason, A's value first (x is the worse side's)."""
        a, b = (y, x) if worse_side == "b" else (x, y)
        return Reason(code=code, refuses=True, side=worse_side, a=a, b=b, limit=limit)

    other_w, other_b = _field(worse, "other_pct"), _field(better, "other_pct")
    psi_w, psi_b = _field(worse, "psi_some_pct"), _field(better, "psi_some_pct")
    pressed = psi_w is not None and psi_b is not None and psi_w - psi_b > rule.psi_points
    if other_w is not None and other_b is not None:
        idle = _idle(worse)
        if not ((idle is not None and idle < rule.idle_below) or pressed):
            return None
        if other_w - other_b > rule.other_points:
            return said("other_work", rule.other_points, other_w, other_b)
        wait_w, wait_b = _field(worse, "server_wait_pct"), _field(better, "server_wait_pct")
        if wait_w is not None and wait_b is not None and wait_w - wait_b > rule.wait_points and other_w >= other_b:
            return said("server_wait", rule.wait_points, wait_w, wait_b)
        return None
    if psi_w is not None and psi_b is not None:
        return said("cpu_pressure", rule.psi_points, psi_w, psi_b) if pressed else None
    return Reason(code="host_unknown", refuses=False)


def cache_state(s: CellSummary) -> str | None:
    """A cell's prefix-cache state: as recorded before it ran (study/prompt_cache.py) where that is cold or warm;
    else what the server measured over it, the share of prompt tokens it served from its cache
    (`cache_hit_rate`: the responses' usage, else its counters): warm from WARM_SHARE, cold below; else the
    recorded 'unknown', or None where the cell recorded no state and the server no share (an older or imported
    run). A recorded state is not overridden by the share: a cold cell of a prefix workload hits its own
    shared prefixes, and a warm one's may have been evicted since."""
    recorded = s.cache.state if s.cache is not None else None
    if recorded in ("cold", "warm"):
        return recorded
    share = known(s.cache_hit_rate)
    if share is not None:
        return "warm" if share >= WARM_SHARE else "cold"
    return recorded


def _states(side: Sequence[CellSummary]) -> str | None:
    """The side's prefix-cache states ('cold', 'cold+warm'); None where a cell does not say."""
    found = [cache_state(s) for s in side]
    if not found or None in found:
        return None
    return "+".join(sorted({str(x) for x in found}))


def _share(side: Sequence[CellSummary]) -> float | None:
    """The side's mean share of prompt tokens served from the cache (None unless every cell tells it)."""
    return _mean([known(s.cache_hit_rate) for s in side]) if side else None


def cache_reason(a: Sequence[CellSummary], b: Sequence[CellSummary]) -> Reason | None:
    """The two sides' prefix-cache states differ (refused, whichever side is worse: it does not depend on the
    verdict), or one side's is not known (said)."""
    sa, sb = _states(a), _states(b)
    if sa is None and sb is None:
        return None
    shares = (_share(a), _share(b))
    if sa is None or sb is None:
        return Reason(code="cache_unknown", refuses=False, side="a" if sa is None else "b", a=sa, b=sb, shares=shares)
    return Reason(code="cache_differs", refuses=True, a=sa, b=sb, shares=shares) if sa != sb else None


def refusals(a: Sequence[CellSummary], b: Sequence[CellSummary], worse: Side | None,
             rule: HostRule = HostRule()) -> tuple[Reason, ...]:
    """Why a verdict between sides `a` and `b` (the summaries of a figure's cells on each side: one per run or
    repeat) cannot be given, and what could not be checked. `worse`: the side the verdict finds worse; None (no
    difference found): the host is checked both ways, since a busier host could also hide a difference.
    A verdict stands when no reason `refuses`."""
    out = [r for r in (cache_reason(a, b),) if r is not None]
    ways: list[tuple[Sequence[CellSummary], Sequence[CellSummary], Side]] = (
        [(b, a, "b")] if worse == "b" else [(a, b, "a")] if worse == "a" else [(a, b, "a"), (b, a, "b")])
    hosts = [r for w, o, side in ways if (r := busier(w, o, side, rule)) is not None]
    refusing = [r for r in hosts if r.refuses]
    out += refusing or hosts[:1]
    return tuple(out)


def refused(reasons: Sequence[Reason]) -> bool:
    return any(r.refuses for r in reasons)


# ---- fingerprints ----

@dataclass(frozen=True, kw_only=True)
class Fingerprint:
    """What a side's runs stored of how they ran (one server config of a run)."""

    engine: str
    version: str
    model: str
    flags: str
    image: str
    tool: str
    host: str
    cpu_model: str
    cpus: str
    launch: str             # the server launches its cells ran on (ids, or how many when several)
    cache: str              # its cells' prefix-cache states

    @classmethod
    def of(cls, run: RunData, config: ConfigInfo) -> Fingerprint:
        cells = run.all_cells_of(config.name)
        return cls(**build_and_host(config, run.environment), tool=run.tool_version, launch=_launches(cells),
                   cache=_states(summaries(cells)) or "-")


BUILD: tuple[Fact, ...] = ("engine", "version", "model", "flags", "image")     # the engine build
HOST: tuple[Fact, ...] = ("host", "cpu_model", "cpus")                          # the machine it ran on


def build_and_host(config: ConfigInfo, environment: dict) -> dict[str, str]:
    """The facts of a config's engine build (BUILD) and of the host it ran on (HOST), as a Fingerprint holds
    them ('-': not recorded): what a noise floor is learned within (judge/floors.py)."""
    env = environment or {}
    return {"engine": config.engine, "version": config.version or "-", "model": config.model or "-",
            "flags": config.flags() or "-", "image": config.image or "-", "host": str(env.get("hostname") or "-"),
            "cpu_model": str(env.get("cpu") or "-"), "cpus": str(env.get("cpu_count") or "-")}


def _launches(cells: Sequence[CellRow]) -> str:
    ids = list(dict.fromkeys(c.summary.launch.id for c in cells if c.summary.launch is not None and c.summary.launch.id))
    return "-" if not ids else ids[0] if len(ids) == 1 else f"{len(ids)} launches: {', '.join(ids)}"


FACTS: tuple[Fact, ...] = ("engine", "version", "model", "flags", "image", "tool", "host", "cpu_model", "cpus",
                           "launch", "cache")


@dataclass(frozen=True)
class FactDiff:
    """One fact the two sides ran with differently (report/ names it)."""

    fact: Fact
    a: str
    b: str


def differences(a: Fingerprint, b: Fingerprint, facts: Sequence[Fact] = FACTS) -> list[FactDiff]:
    """The facts that differ, in FACTS order ('-': not recorded, which differs from a recorded value too)."""
    return [FactDiff(f, getattr(a, f), getattr(b, f)) for f in facts if getattr(a, f) != getattr(b, f)]


def side_print(prints: Sequence[Fingerprint]) -> Fingerprint:
    """One fingerprint for a side of several runs: each fact's distinct values, in order, joined by ', '."""
    def joined(fact: str) -> str:
        return ", ".join(dict.fromkeys(getattr(p, fact) for p in prints)) or "-"
    return Fingerprint(**{f: joined(f) for f in FACTS})
