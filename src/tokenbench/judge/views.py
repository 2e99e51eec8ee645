"""A stored run as a plain report model: read once from the results database, then rendered.

Nothing here measures or re-runs anything. What the report can show depends on what the sweep/bench
stored (see docs/reports.md, "What a run must store").
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING

from tokenbench.client.records import RequestRecord
from tokenbench.errors import StoreError, UsageError
from tokenbench.judge.load_axes import LoadKey, concurrency_key, load_key
from tokenbench.judge.status import State, figure_state, judge
from tokenbench.metrics.cell_summary import Metric
from tokenbench.metrics.summary import mean_of_repeats
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.profile_args import render_args
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store.db import Store, db_path
from tokenbench.store.rows import CellRow, ConfigRow, RunRow, SampleRow, SearchRow

if TYPE_CHECKING:
    from tokenbench.logs.launch import LaunchFailure

MONITOR_NAMES = ("running", "waiting", "kv_usage")


def open_store(db: str | None) -> Store:
    """The results database for reading: it must exist (opening would otherwise create an empty one)."""
    path = db_path(db)
    if not path.is_file():
        raise StoreError(f"no results database at {path}",
                         "pass --db PATH, or set TOKENBENCH_RESULTS to the results directory (default ~/.local/share/tokenbench)")
    return Store(path)


@dataclass(frozen=True)
class ConfigInfo:
    id: int
    name: str
    overrides: dict
    profile: Profile | None
    facts: ServerFacts
    status: str
    message: str
    launch: LaunchFailure | None = None      # why it did not start (logs/launch.py)

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
class CellInfo(CellRow):
    """A stored cell as the report reads it: the row as the store gave it (its fields are the row's,
    store/rows.CellRow), the repeats a merged cell stands for, and the judgements' views of it."""

    repeats: tuple[CellInfo, ...] = ()    # set on a merged cell: every stored repeat, in order
    eager: bool = False                   # its decode batch is above the captured graph sizes (the `^` mark)
    users: int | None = None              # closed-loop sessions (a session workload's load), when the cell has it

    @property
    def pair(self) -> tuple[int, int]:
        return (self.input_len, self.output_len)

    @property
    def load(self) -> LoadKey:
        """The cell's load dimension and its value there (judge/load_axes.py): concurrency, users, or a
        request rate with the in-flight cap it ran under."""
        cap = self.summary.max_concurrency if self.concurrency is None else None
        users = self.users
        if users is None and self.summary.sessions is not None:
            users = self.concurrency                      # a sessions cell stores its users as its concurrency
        return load_key(self.concurrency, self.request_rate, users, cap)

    @property
    def x(self) -> float:
        """The cell's value on its own load axis (requests in flight, users, or requests/s); compare it only
        with cells of the same `load.dimension`."""
        return self.load.value

    @property
    def load_label(self) -> str:
        if self.summary.sessions is not None and self.concurrency is None and self.request_rate is not None:
            return f"{self.request_rate:g} sessions/s"      # session starts per second
        return self.load.label

    @property
    def label(self) -> str:
        """'512/512 c=8'; a single repeat other than the first says which ('512/512 c=8 #2'); lengths drawn
        per request say how ('512/512 r0.5 c=8')."""
        drawn = self.summary.facts.length_draws if self.summary.facts else None   # the distribution's tag
        base = f"{self.input_len}/{self.output_len}{' ' + drawn if drawn else ''} {self.load_label}"
        return f"{base} #{self.repeat + 1}" if self.repeat and not self.repeats else base

    @property
    def state(self) -> State:
        """Whether this cell's figures can be shown plain (judge/status.py)."""
        return judge(self.status, self.message, self.summary)

    def figure_state(self, key: str) -> State:
        """Whether one figure (its summary key, e.g. Metric.key) can be shown plain (judge/status.py)."""
        return figure_state(self.state, self.summary, key)

    def measured(self) -> list[CellInfo]:
        """The repeats whose numbers a merged cell averages: the ok ones only (possibly none)."""
        group = list(self.repeats) or [self]
        return [c for c in group if c.state.ok]

    def spread(self, metric: Metric) -> Spread | None:
        """How a figure varies over the measured repeats; None with fewer than two values."""
        vals = [v for c in self.measured() if (v := metric.of(c.summary)) is not None]
        return Spread.of(vals) if len(vals) > 1 else None

    def value(self, metric: Metric) -> float | None:
        """A headline figure (None: missing or NaN)."""
        return metric.of(self.summary)

    def decode_batch(self, slots: int | None = None) -> tuple[float | None, str]:
        """(requests decoding together, how it is known): the server's mean running requests (/metrics),
        else the closed loop's concurrency (capped by the server's slots), else the open loop's achieved
        concurrency (requests in flight at the client, time-averaged)."""
        running = self.summary.monitor.server_running_mean if self.summary.monitor else None
        if running is not None:
            return float(running), "running"
        if self.concurrency is not None:
            return float(min(self.concurrency, slots) if slots else self.concurrency), "concurrency"
        achieved = self.summary.achieved_concurrency
        return (None, "") if achieved is None else (float(achieved), "achieved")


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


def merge_repeats(group: list[CellInfo]) -> CellInfo:
    """Repeats of one cell as one: each summary value is the mean over the repeats that are ok (a repeat
    that is not ok never enters a mean; failure counts are summed over all); when none is ok the merged
    cell has counts only and the first repeat's verdict. The repeats themselves stay in `.repeats`."""
    if len(group) == 1:
        return group[0]
    merged = replace(group[0], repeats=tuple(group))
    used = merged.measured()
    summary = mean_of_repeats([c.summary for c in used], [c.summary for c in group])
    status = used[0].status if used else group[0].status
    message = group[0].message if not used else "; ".join(dict.fromkeys(c.message for c in group if c.message))
    return replace(merged, summary=summary, status=status, message=message)


@dataclass
class Timeline:
    cell: CellInfo
    requests: list[RequestRecord]


@dataclass
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
    cells: list[CellInfo]
    samples: dict[int, list[SampleRow]] = field(default_factory=dict)  # cell id -> monitor samples
    cache: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # cell id -> cached, prompt, n
    timeline: Timeline | None = None
    searches: list[SearchRow] = field(default_factory=list)             # capacity searches, as stored
    reader: Callable[[int], list[RequestRecord]] | None = field(default=None, repr=False)  # cell id -> records
    _merged: dict[str, list[CellInfo]] = field(default_factory=dict, repr=False)   # cells_of, per config

    def config(self, name: str) -> ConfigInfo:
        return next(c for c in self.configs if c.name == name)

    def cells_of(self, config: str) -> list[CellInfo]:
        """One cell per (pair, load); repeats are merged into their mean (`merge_repeats`), once."""
        if config not in self._merged:
            groups: dict[tuple, list[CellInfo]] = {}
            for c in self.all_cells_of(config):
                groups.setdefault((c.pair, c.load), []).append(c)
            self._merged[config] = [merge_repeats(g) for g in groups.values()]
        return self._merged[config]

    def all_cells_of(self, config: str) -> list[CellInfo]:
        """Every stored cell of a config, each repeat on its own."""
        return sorted((c for c in self.cells if c.config == config), key=_order)

    def pairs(self, config: str | None = None) -> list[tuple[int, int]]:
        return sorted({c.pair for c in self.cells if config is None or c.config == config})

    def cell_at(self, config: str, pair: tuple[int, int], load: LoadKey | float) -> CellInfo | None:
        """The (merged) cell of a config at a pair and load; a bare number is a closed-loop concurrency."""
        key = load if isinstance(load, LoadKey) else concurrency_key(load)
        return next((c for c in self.cells_of(config) if c.pair == pair and c.load == key), None)

    def has_repeats(self) -> bool:
        return any(c.repeat for c in self.cells)

    def config_names(self) -> list[str]:
        """Configs that have cells, in stored order."""
        have = {c.config for c in self.cells}
        return [c.name for c in self.configs if c.name in have]


def _order(c: CellInfo) -> tuple:
    return (c.input_len, c.output_len, c.load, c.repeat)


def _config(row: ConfigRow) -> ConfigInfo:
    return ConfigInfo(row.id, row.name, row.overrides or {}, row.profile, row.facts, row.status, row.message or "",
                      row.launch)


def _cell(row: CellRow) -> CellInfo:
    return CellInfo(**{f.name: getattr(row, f.name) for f in fields(CellRow)})


def _monitor(store: Store, cells: list[CellInfo]) -> dict[int, list[SampleRow]]:
    out = {}
    for c in cells:
        rows = [s for s in store.samples(c.id) if s.name in MONITOR_NAMES]
        if rows:
            out[c.id] = rows
    return out


def pick_timeline_cell(run: RunData, key: str | None) -> CellInfo | None:
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
    return max(ok, key=lambda c: (c.over_capacity, c.x or 0, c.input_len + c.output_len, -names.index(c.config)))


def _eager(cell: CellInfo, configs: dict[str, ConfigInfo]) -> CellInfo:
    """The cell, marked when its decode batch is above its config's captured graph sizes."""
    cfg = configs.get(cell.config)
    graphs = cfg.facts.graphs if cfg else None
    batch = cell.decode_batch(cfg.facts.slots if cfg else None)[0]
    return replace(cell, eager=True) if graphs is not None and graphs.eager(batch) else cell


def load_run(store: Store, run_id: str, timeline_cell: str | None = None, requests: bool = True) -> RunData:
    row: RunRow = store.run(run_id)
    configs = [_config(r) for r in store.configs(run_id)]
    by_name = {c.name: c for c in configs}
    cells = [_eager(_cell(r), by_name) for r in store.cells(run_id)]
    run = RunData(row.id, row.created_at, row.kind, row.status, row.target, row.tool_version, row.spec or {},
                  row.command or [], row.environment or {}, row.message or "", configs, cells)
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
