"""A stored run as a plain report model: read once from the results database, then rendered.

Nothing here measures or re-runs anything. What the report can show depends on what the sweep/bench
stored (see docs/reports.md, "What a run must store").
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from tokenbench.client.records import RequestRecord
from tokenbench.errors import StoreError, UsageError
from tokenbench.judge.cells import decode_batch, load_of, ok_repeats, pair_of, x_of
from tokenbench.judge.load_axes import LoadKey, concurrency_key
from tokenbench.metrics.cell_summary import Metric
from tokenbench.metrics.summary import mean_of_repeats
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.profile_args import render_args
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store.db import Store, db_path
from tokenbench.store.rows import CellRow, ConfigRow, RunRow, SampleRow, SearchRow

if TYPE_CHECKING:
    from tokenbench.logs.launch import Death, LaunchFailure

MONITOR_NAMES = ("running", "waiting", "kv_usage")


def open_store(db: str | None) -> Store:
    """The results database for reading: it must exist (opening would otherwise create an empty one)."""
    path = db_path(db)
    if not path.is_file():
        raise StoreError(f"no results database at {path}",
                         "pass --db PATH, or set TOKENBENCH_RESULTS to the results directory (default ~/.local/share/tokenbench)")
    return Store(path)


@dataclass(frozen=True, kw_only=True)
class ConfigInfo:
    id: int
    name: str
    overrides: dict
    profile: Profile | None
    facts: ServerFacts
    status: str
    message: str
    launch: LaunchFailure | None = None      # why it did not start (logs/launch.py)
    deaths: tuple[Death, ...] = ()           # each time its engine started and then died (logs/launch.py)

    @property
    def engine(self) -> str:
        known = self.facts.engine if self.facts.engine != "unknown" else None
        return known or (self.profile.engine if self.profile else None) or "unknown"

    @property
    def version(self) -> str | None:
        return self.facts.version

    @property
    def model(self) -> str | None:
        m = self.profile.model if self.profile else None
        return self.facts.model or (m and (m.served_name or m.path or m.bundled)) or None

    @property
    def image(self) -> str | None:
        container = self.profile.container if self.profile else None
        return (container.image if container else None) or self.facts.image

    @property
    def kv_capacity(self) -> int | None:
        return self.facts.kv_capacity_tokens

    @property
    def ctx_per_seq(self) -> int | None:
        return self.facts.ctx_per_seq

    def flags(self) -> str:
        """Profile name, parallelism, engine flags and environment, one line."""
        p = self.profile
        if p is None:
            return " ".join(f"{k}={v}" for k, v in sorted(self.overrides.items()))
        par = {k: v for k, v in p.parallelism.model_dump().items() if v not in (None, 1)}
        parts = [f"profile={p.name}", *[f"{k}={v}" for k, v in sorted({**par, **self.overrides}.items())]]
        parts += render_args(p.args, p.secret_args, p.extra_args)
        parts += [f"{k}={v}" for k, v in sorted(p.env.items())]
        parts += [f"{k}=${{{v}}}" for k, v in sorted(p.secret_env.items())]
        return " ".join(parts)


@dataclass(frozen=True)
class Spread:
    """Repeat-to-repeat variation of one metric: sample standard deviation (n - 1) and CV = sd / mean."""
    n: int
    mean: float
    sd: float
    lo: float
    hi: float

    @classmethod
    def of(cls, vals: list[float]) -> Spread:
        return cls(len(vals), statistics.fmean(vals), statistics.stdev(vals), min(vals), max(vals))

    @property
    def cv(self) -> float | None:
        return self.sd / abs(self.mean) if self.mean else None


def spread_of(c: CellRow, metric: Metric) -> Spread | None:
    """How a figure varies over the measured repeats; None with fewer than two values."""
    vals = [v for r in ok_repeats(c) if (v := metric.of(r.summary)) is not None]
    return Spread.of(vals) if len(vals) > 1 else None


def merge_repeats(group: list[CellRow]) -> CellRow:
    """Repeats of one cell as one: each summary value is the mean over the repeats that are ok (a repeat
    that is not ok never enters a mean; failure counts are summed over all); when none is ok the merged
    cell has counts only and the first repeat's verdict. The repeats themselves stay in `.repeats`."""
    if len(group) == 1:
        return group[0]
    merged = replace(group[0], repeats=tuple(group))
    used = ok_repeats(merged)
    summary = mean_of_repeats([c.summary for c in used], [c.summary for c in group])
    status = used[0].status if used else group[0].status
    message = group[0].message if not used else "; ".join(dict.fromkeys(c.message for c in group if c.message))
    return replace(merged, summary=summary, status=status, message=message)


@dataclass
class Timeline:
    cell: CellRow
    requests: list[RequestRecord]


@dataclass(kw_only=True)
class RunData:
    id: str
    created_at: str
    kind: str
    status: str
    target: str
    tool_version: str
    spec: dict
    command: list
    environment: dict
    message: str
    configs: list[ConfigInfo]
    cells: list[CellRow]
    samples: dict[int, list[SampleRow]] = field(default_factory=dict)  # cell id -> monitor samples
    cache: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # cell id -> cached, prompt, n
    timeline: Timeline | None = None
    searches: list[SearchRow] = field(default_factory=list)             # capacity searches, as stored
    reader: Callable[[int], list[RequestRecord]] | None = field(default=None, repr=False)  # cell id -> records
    _merged: dict[str, list[CellRow]] = field(default_factory=dict, repr=False)   # cells_of, per config

    def config(self, name: str) -> ConfigInfo:
        return next(c for c in self.configs if c.name == name)

    def cells_of(self, config: str) -> list[CellRow]:
        """One cell per (pair, load); repeats are merged into their mean (`merge_repeats`), once."""
        if config not in self._merged:
            groups: dict[tuple, list[CellRow]] = {}
            for c in self.all_cells_of(config):
                groups.setdefault((pair_of(c), load_of(c)), []).append(c)
            self._merged[config] = [merge_repeats(g) for g in groups.values()]
        return self._merged[config]

    def all_cells_of(self, config: str) -> list[CellRow]:
        """Every stored cell of a config, each repeat on its own."""
        return sorted((c for c in self.cells if c.config == config), key=_order)

    def pairs(self, config: str | None = None) -> list[tuple[int, int]]:
        return sorted({pair_of(c) for c in self.cells if config is None or c.config == config})

    def cell_at(self, config: str, pair: tuple[int, int], load: LoadKey | float) -> CellRow | None:
        """The (merged) cell of a config at a pair and load; a bare number is a closed-loop concurrency."""
        key = load if isinstance(load, LoadKey) else concurrency_key(load)
        return next((c for c in self.cells_of(config) if pair_of(c) == pair and load_of(c) == key), None)

    def has_repeats(self) -> bool:
        return any(c.repeat for c in self.cells)

    def config_names(self) -> list[str]:
        """Configs that have cells, in stored order."""
        have = {c.config for c in self.cells}
        return [c.name for c in self.configs if c.name in have]


def _order(c: CellRow) -> tuple:
    return (c.input_len, c.output_len, load_of(c), c.repeat)


def config_info(row: ConfigRow) -> ConfigInfo:
    return ConfigInfo(id=row.id, name=row.name, overrides=row.overrides or {}, profile=row.profile, facts=row.facts,
                      status=row.status, message=row.message or "", launch=row.launch, deaths=row.deaths)


def _monitor(store: Store, cells: list[CellRow]) -> dict[int, list[SampleRow]]:
    out = {}
    for c in cells:
        rows = [s for s in store.samples(c.id) if s.name in MONITOR_NAMES]
        if rows:
            out[c.id] = rows
    return out


def pick_timeline_cell(run: RunData, key: str | None) -> CellRow | None:
    """`key` is a cell key ('512:512/c=8'), optionally prefixed by its config ('tp2:512:512/c=8').
    Without a key: the busiest measured cell, preferring over-capacity cells (they show queueing)."""
    if key:
        for c in run.cells:
            if c.repeat == 0 and key in (c.key, f"{c.config}:{c.key}"):
                return c
        keys = ", ".join(sorted({f"{c.config}:{c.key}" for c in run.cells})[:12])
        raise UsageError(f"no cell '{key}' in run {run.id}", f"use one of: {keys}")
    ok = [c for c in run.cells if c.status == "ok" and c.repeat == 0]
    if not ok:
        return None
    names = run.config_names()
    return max(ok, key=lambda c: (c.over_capacity, x_of(c) or 0, c.input_len + c.output_len, -names.index(c.config)))


def _eager(cell: CellRow, configs: dict[str, ConfigInfo]) -> CellRow:
    """The cell, marked when its decode batch is above its config's captured graph sizes."""
    cfg = configs.get(cell.config)
    graphs = cfg.facts.graphs if cfg else None
    batch = decode_batch(cell, cfg.facts.slots if cfg else None)[0]
    return replace(cell, eager=True) if graphs is not None and graphs.eager(batch) else cell


def load_run(store: Store, run_id: str, timeline_cell: str | None = None, requests: bool = True) -> RunData:
    row: RunRow = store.run(run_id)
    configs = [config_info(r) for r in store.configs(run_id)]
    by_name = {c.name: c for c in configs}
    cells = [_eager(r, by_name) for r in store.cells(run_id)]
    run = RunData(id=row.id, created_at=row.created_at, kind=row.kind, status=row.status, target=row.target,
                  tool_version=row.tool_version, spec=row.spec or {}, command=row.command or [],
                  environment=row.environment or {}, message=row.message or "", configs=configs, cells=cells)
    run.searches = store.searches(run_id)
    run.cache = store.cache_totals(run_id)
    run.reader = store.sampled_requests          # a bounded reservoir per cell (store.schema.RESERVOIR)
    run.samples = _monitor(store, cells)
    if requests:
        chosen = pick_timeline_cell(run, timeline_cell)
        if chosen is not None:
            recs = store.sampled_requests(chosen.id)
            run.timeline = Timeline(chosen, recs) if recs else None
    return run
