"""Plan a sweep: server configs x cells, KV demand vs capacity, and the checks that must pass before
anything is deployed."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from tokenbench.errors import SpecError
from tokenbench.spec.bench import Load, Workload
from tokenbench.spec.keys import cell_key
from tokenbench.spec.study import StudySpec


@dataclass(frozen=True)
class ServerConfig:
    name: str
    overrides: tuple[str, ...]        # `key=value` strings, applied with --set semantics

    def as_dict(self) -> dict:
        return dict(o.split("=", 1) for o in self.overrides)


@dataclass(frozen=True)
class PlannedCell:
    config: ServerConfig
    workload: Workload
    load: Load
    repeat: int

    @property
    def key(self) -> str:
        return cell_key(self.workload, self.load)

    @property
    def width(self) -> int | None:
        return self.load.in_flight_cap


@dataclass
class Plan:
    spec: StudySpec
    configs: list[ServerConfig]
    cells: list[PlannedCell] = field(default_factory=list)

    def cells_for(self, config: ServerConfig) -> list[PlannedCell]:
        return [c for c in self.cells if c.config == config]


DEFAULT = ServerConfig("default", ())      # the profile as given


def varied(spec: StudySpec) -> list[ServerConfig]:
    """One config per combination of the `vary` axes (none: the profile as given)."""
    if not spec.vary:
        return [DEFAULT]
    keys = list(spec.vary)
    out = []
    for values in itertools.product(*(spec.vary[k] for k in keys)):
        name = ",".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in zip(keys, values, strict=False))
        out.append(ServerConfig(name, tuple(f"{k}={v}" for k, v in zip(keys, values, strict=False))))
    return out


def server_configs(spec: StudySpec) -> list[ServerConfig]:
    """The study's configs in the order they are deployed; a tune's baseline first (`default`, the profile as
    given, is added when no varied config is it; study/tune.py names it before the run is stored)."""
    out = varied(spec)
    base = spec.tune.baseline if spec.tune is not None else None
    if base is None:
        return out
    first = next((c for c in out if c.name == base), DEFAULT if base == DEFAULT.name else None)
    if first is None:
        raise SpecError(f"tune.baseline '{base}' is not one of the server configs",
                        f"use one of: {', '.join([DEFAULT.name, *(c.name for c in out)])}")
    return [first, *(c for c in out if c != first)]


def _count(spec: StudySpec, width: float) -> int | None:
    """Requests in a cell: num_prompts, else none counted when a duration bounds it, else
    max(min, per_concurrency x width)."""
    req = spec.requests
    if req.num_prompts or req.duration_s:
        return req.num_prompts
    return max(req.min, int(req.per_concurrency * width))


def _sessions(spec: StudySpec, users: int | None) -> int | None:
    """Sessions in a cell: num_sessions, else none counted when a duration bounds it, else one per user
    (closed loop) or `requests.min` (session rates); trajectories: one pass over the corpus (None)."""
    req = spec.requests
    if req.num_sessions or req.duration_s or spec.workload.kind == "trajectories":
        return req.num_sessions
    return users or req.min


def users_load(spec: StudySpec, users: int) -> Load:
    """A closed-loop sessions cell of `users` users (the capacity search's load in users, too)."""
    return Load(users=users, num_sessions=_sessions(spec, users), ramp_up_s=spec.ramp_up_s, window=spec.window,
                duration_s=spec.requests.duration_s, warmup_requests=spec.warmup_requests)


def session_rate_load(spec: StudySpec, rate: float) -> Load:
    """An open-loop sessions cell starting `rate` sessions per second (the capacity search's load in agents
    started per second, too)."""
    return Load(session_rate=rate, arrival=spec.arrival, burstiness=spec.burstiness, window=spec.window,
                num_sessions=_sessions(spec, None), duration_s=spec.requests.duration_s,
                warmup_requests=spec.warmup_requests)


def _session_loads(spec: StudySpec) -> list[Load]:
    return [users_load(spec, u) for u in spec.users] + [session_rate_load(spec, r) for r in spec.session_rates]


def _loads(spec: StudySpec) -> list[Load]:
    common = dict(duration_s=spec.requests.duration_s, warmup_requests=spec.warmup_requests,
                  warmup_first_prompt=spec.warmup_first_prompt)
    if spec.workload.sessions_like:
        return _session_loads(spec)
    if spec.workload.kind == "trace":
        return [Load(arrival="trace", max_concurrency=spec.max_concurrency, num_prompts=spec.requests.num_prompts,
                     **common)]
    closed = spec.concurrency or ([spec.max_concurrency] if not spec.rates and spec.max_concurrency else [])
    loads = [Load(concurrency=c, num_prompts=_count(spec, c), **common) for c in closed]
    loads += [Load(request_rate=r, arrival=spec.arrival, burstiness=spec.burstiness, max_concurrency=spec.max_concurrency,
                   rate_cap=spec.rate_cap, num_prompts=_count(spec, spec.max_concurrency or r * 10), **common)
              for r in spec.rates]
    return loads


def capacity_load(spec: StudySpec, x: float, duration_s: float | None = None, requests: int | None = None) -> Load:
    """A capacity search's cell at load x: x streams (closed loop; users: sessions), or x requests/s with the
    study's arrivals; sized like a sweep's cell (at least `requests` where the search asks for more: a cell
    near the boundary, sized to its limits' statistics), or `duration_s` long (the sustain cell)."""
    common = dict(warmup_requests=spec.warmup_requests, duration_s=duration_s or spec.requests.duration_s,
                  warmup_first_prompt=spec.warmup_first_prompt)
    if spec.find_capacity in ("users", "session_rate"):
        load = users_load(spec, int(x)) if spec.find_capacity == "users" else session_rate_load(spec, x)
        return load.model_copy(update={"duration_s": duration_s, "num_sessions": None}) if duration_s else load
    if spec.find_capacity == "rate":
        count = None if duration_s else _at_least(_count(spec, spec.max_concurrency or x * 10), requests)
        return Load(request_rate=x, arrival=spec.arrival, burstiness=spec.burstiness,
                    max_concurrency=spec.max_concurrency, num_prompts=count, **common)
    streams = int(x)
    return Load(concurrency=streams, num_prompts=None if duration_s else _at_least(_count(spec, streams), requests),
                **common)


def _at_least(count: int | None, requests: int | None) -> int | None:
    """A cell's request count raised to `requests` (a duration-bounded cell, count None, is left as it is)."""
    return count if count is None or requests is None else max(count, requests)


def plan(spec: StudySpec) -> Plan:
    p = Plan(spec, server_configs(spec))
    if spec.find_capacity:
        return p                     # the capacity search decides its cells as results come in
    for config in p.configs:
        for wl in spec.workloads():
            for load in _loads(spec):
                for rep in range(spec.repeats):
                    p.cells.append(PlannedCell(config, repeat_workload(wl, rep), load, rep))
    return p


def visits(p: Plan) -> list[tuple[ServerConfig, int | None]]:
    """The order in which server configs are deployed, as (config, repeat) with None meaning every repeat.
    One config, or one repeat: each config once with all its cells. Repeats of several configs are
    interleaved: round r deploys every config once for its cells of repeat r, in an order shuffled by
    seed + r (A B, B A, A B ...), so drift of the machine is spread over the configs instead of being
    mistaken for a difference between them."""
    if len(p.configs) < 2 or p.spec.repeats < 2 or p.spec.find_capacity:
        return [(c, None) for c in p.configs]
    out: list[tuple[ServerConfig, int | None]] = []
    for rep in range(p.spec.repeats):
        order = list(p.configs)
        random.Random(p.spec.seed + rep).shuffle(order)
        out += [(c, rep) for c in order]
    return out


def pending(plan: Plan, done: set[tuple[str, str, int]], config: ServerConfig, round_: int | None = None
            ) -> list[PlannedCell]:
    """The config's cells not in `done` ((config, key, repeat) triples), of one repeat or of all (None)."""
    return [c for c in plan.cells_for(config) if (config.name, c.key, c.repeat) not in done
            and round_ in (None, c.repeat)]


def repeat_workload(wl: Workload, repeat: int) -> Workload:
    """Repeat r > 0 draws its prompts from seed + r: the same shape with fresh prompts, so a prefix
    cache never serves a repeat from the one before it."""
    return wl if repeat == 0 else wl.model_copy(update={"seed": wl.seed + repeat})


def sequence_len(wl: Workload) -> int | None:
    """Tokens one request needs at most: input + output (sessions: the last turn's); None for datasets and
    traces, whose lengths vary."""
    if wl.input_len is None or wl.output_len is None:
        return None
    if wl.kind == "sessions":
        return (wl.last_turn_len or 0) + wl.output_len
    return wl.input_len + wl.output_len if wl.fixed_lengths else None


def kv_demand(cell: PlannedCell) -> int | None:
    """Tokens the cell's in-flight requests need at once: width x (input + output) (sessions: users x the last
    turn); unknown (None) for datasets and traces, whose lengths vary."""
    width, need = cell.width, sequence_len(cell.workload)
    return width * need if width and need else None


def over_capacity(cell: PlannedCell, kv_capacity: int | None) -> bool:
    demand = kv_demand(cell)
    return bool(kv_capacity and demand and demand > kv_capacity)


def max_fitting_concurrency(input_len: int, output_len: int, kv_capacity: int | None) -> int | None:
    return kv_capacity // (input_len + output_len) if kv_capacity else None


def check_context(p: Plan, ctx_per_seq: int | None, where: str) -> None:
    """Refuse a plan with a pair longer than one sequence's context, before anything runs."""
    if ctx_per_seq is None:
        return
    for wl in p.spec.workloads():
        need = sequence_len(wl)
        if need is not None and need > ctx_per_seq:
            what = f"the last turn of {wl.label}" if wl.kind == "sessions" else f"pair [{wl.input_len}, {wl.output_len}]"
            raise SpecError(f"{where}: {what} needs {need} tokens per sequence but the server allows {ctx_per_seq}",
                            "shorten the pair (or the turns) or give the server a larger context")
