"""A stored run as a plain report model: read once from the results database, then rendered.

Nothing here measures or re-runs anything. What the report can show depends on what the sweep/bench
stored (see docs/reports.md, "What a run must store").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tokenbench.client.records import RequestRecord
from tokenbench.deploy.engines import render_args
from tokenbench.errors import StoreError, UsageError
from tokenbench.report.status import State, judge
from tokenbench.store.db import Store, db_path

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
    profile: dict
    facts: dict
    status: str
    message: str

    @property
    def engine(self) -> str:
        return self.facts.get("engine") or self.profile.get("engine") or "unknown"

    @property
    def version(self) -> str | None:
        return self.facts.get("version")

    @property
    def model(self) -> str | None:
        m = self.profile.get("model") or {}
        return self.facts.get("model") or m.get("served_name") or m.get("path") or m.get("bundled")

    @property
    def image(self) -> str | None:
        return (self.profile.get("container") or {}).get("image") or self.facts.get("image")

    @property
    def kv_capacity(self) -> int | None:
        return self.facts.get("kv_capacity_tokens")

    @property
    def ctx_per_seq(self) -> int | None:
        return self.facts.get("ctx_per_seq")

    def flags(self) -> str:
        """Profile name, parallelism, engine flags and environment, one line."""
        p = self.profile
        parts = [f"profile={p['name']}"] if p.get("name") else []
        par = {k: v for k, v in (p.get("parallelism") or {}).items() if v not in (None, 1)}
        parts += [f"{k}={v}" for k, v in sorted({**par, **self.overrides}.items())]
        parts += render_args(p.get("args") or {}, p.get("secret_args") or {}, p.get("extra_args") or [])
        parts += [f"{k}={v}" for k, v in sorted((p.get("env") or {}).items())]
        parts += [f"{k}=${{{v}}}" for k, v in sorted((p.get("secret_env") or {}).items())]
        return " ".join(parts)


@dataclass(frozen=True)
class CellInfo:
    id: int
    config: str
    key: str
    repeat: int
    input_len: int
    output_len: int
    concurrency: int | None
    request_rate: float | None
    status: str
    message: str
    kv_demand: int | None
    kv_capacity: int | None
    over_capacity: bool
    summary: dict
    repeats: tuple[CellInfo, ...] = ()    # set on a merged cell: every stored repeat, in order

    @property
    def pair(self) -> tuple[int, int]:
        return (self.input_len, self.output_len)

    @property
    def x(self) -> float:
        """The load axis: concurrency, or the request rate of open-loop cells."""
        if self.concurrency is not None:
            return self.concurrency
        return self.request_rate if self.request_rate is not None else 0.0

    @property
    def load_label(self) -> str:
        if self.concurrency is not None:
            return f"c={self.concurrency}"
        return f"{self.request_rate:g}/s" if self.request_rate is not None else "replay"

    @property
    def label(self) -> str:
        """'512/512 c=8'; a single repeat other than the first says which ('512/512 c=8 #2'); lengths drawn
        per request say how ('512/512 r0.5 c=8')."""
        drawn = self.summary.get("length_draws")          # lengths drawn per request: the distribution's tag
        base = f"{self.input_len}/{self.output_len}{' ' + drawn if drawn else ''} {self.load_label}"
        return f"{base} #{self.repeat + 1}" if self.repeat and not self.repeats else base

    @property
    def state(self) -> State:
        """Whether this cell's figures can be shown plain (report/status.py)."""
        return judge(self.status, self.message, self.summary)

    def measured(self) -> list[CellInfo]:
        """The repeats whose numbers a merged cell averages: the ok ones only (possibly none)."""
        group = list(self.repeats) or [self]
        return [c for c in group if c.state.ok]

    def spread(self, key: str) -> Spread | None:
        """How `key` varies over the measured repeats; None with fewer than two values."""
        vals = [v for c in self.measured() if (v := c.get(key)) is not None]
        return Spread.of(vals) if len(vals) > 1 else None

    def get(self, key: str) -> float | None:
        v = self.summary.get(key)
        if v is None or isinstance(v, (dict, list, str)) or (isinstance(v, float) and math.isnan(v)):
            return None
        return v


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


def _mean_value(vals: list):
    """Mean of numbers (an int when every repeat gave an int and the mean is whole); dicts of counts
    are summed key by key; anything else is the first repeat's."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        m = statistics.fmean(vals)
        return int(m) if all(isinstance(v, int) for v in vals) and m.is_integer() else m
    if all(isinstance(v, dict) and all(isinstance(x, int) for x in v.values()) for v in vals):
        out: dict = {}
        for v in vals:
            for k, x in v.items():
                out[k] = out.get(k, 0) + x
        return out
    return vals[0]


COUNT_KEYS = ("num_prompts", "completed", "failed", "length_mismatches")   # summed when no repeat was ok


def _counts_only(group: list[CellInfo]) -> dict:
    """The summary of a cell none of whose repeats was ok: counts, and no figure (nothing to average)."""
    return {k: sum(c.summary.get(k) or 0 for c in group) for k in COUNT_KEYS
            if any(k in c.summary for c in group)}


def merge_repeats(group: list[CellInfo]) -> CellInfo:
    """Repeats of one cell as one: each summary value is the mean over the repeats that are ok (a repeat
    that is not ok never enters a mean; failure counts are summed over all); when none is ok the merged
    cell has counts only and the first repeat's verdict. The repeats themselves stay in `.repeats`."""
    if len(group) == 1:
        return group[0]
    merged = replace(group[0], repeats=tuple(group))
    used = merged.measured()
    if used:
        keys = [k for k in used[0].summary if all(k in c.summary for c in used)]
        summary = {k: _mean_value([c.summary[k] for c in used]) for k in keys}
        status = used[0].status
    else:
        summary, status = _counts_only(group), group[0].status
    failed = [c.summary.get("failed_by_kind") or {} for c in group]
    summary["failed_by_kind"] = _mean_value(failed) if any(failed) else {}
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
    samples: dict[int, list[dict]] = field(default_factory=dict)       # cell id -> monitor samples
    cache: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # cell id -> cached, prompt, n
    timeline: Timeline | None = None
    reader: Callable[[int], list[RequestRecord]] | None = field(default=None, repr=False)  # cell id -> records
    _merged: dict[str, list[CellInfo]] = field(default_factory=dict, repr=False)   # cells_of, per config

    def config(self, name: str) -> ConfigInfo:
        return next(c for c in self.configs if c.name == name)

    def cells_of(self, config: str) -> list[CellInfo]:
        """One cell per (pair, load); repeats are merged into their mean (`merge_repeats`), once."""
        if config not in self._merged:
            groups: dict[tuple, list[CellInfo]] = {}
            for c in self.all_cells_of(config):
                groups.setdefault((c.pair, c.concurrency is None, c.x), []).append(c)
            self._merged[config] = [merge_repeats(g) for g in groups.values()]
        return self._merged[config]

    def all_cells_of(self, config: str) -> list[CellInfo]:
        """Every stored cell of a config, each repeat on its own."""
        return sorted((c for c in self.cells if c.config == config), key=_order)

    def pairs(self, config: str | None = None) -> list[tuple[int, int]]:
        return sorted({c.pair for c in self.cells if config is None or c.config == config})

    def cell_at(self, config: str, pair: tuple[int, int], x) -> CellInfo | None:
        return next((c for c in self.cells_of(config) if c.pair == pair and c.x == x), None)

    def has_repeats(self) -> bool:
        return any(c.repeat for c in self.cells)

    def config_names(self) -> list[str]:
        """Configs that have cells, in stored order."""
        have = {c.config for c in self.cells}
        return [c.name for c in self.configs if c.name in have]


def _order(c: CellInfo) -> tuple:
    return (c.input_len, c.output_len, c.concurrency is None, c.x, c.repeat)


def _config(row: dict) -> ConfigInfo:
    return ConfigInfo(row["id"], row["name"], row.get("overrides") or {}, row.get("profile") or {},
                      row.get("facts") or {}, row["status"], row.get("message") or "")


def _cell(row: dict) -> CellInfo:
    return CellInfo(row["id"], row["config_name"], row["key"], row["repeat"], row["input_len"], row["output_len"],
                    row["concurrency"], row["request_rate"], row["status"], row.get("message") or "",
                    row["kv_demand"], row["kv_capacity"], bool(row["over_capacity"]), row.get("summary") or {})


def _monitor(store: Store, cells: list[CellInfo]) -> dict[int, list[dict]]:
    out = {}
    for c in cells:
        rows = [s for s in store.samples(c.id) if s["name"] in MONITOR_NAMES]
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


def load_run(store: Store, run_id: str, timeline_cell: str | None = None, requests: bool = True) -> RunData:
    row = store.run(run_id)
    configs = [_config(r) for r in store.configs(run_id)]
    cells = [_cell(r) for r in store.cells(run_id)]
    run = RunData(row["id"], row["created_at"], row["kind"], row["status"], row["target"], row["tool_version"],
                  row.get("spec") or {}, row.get("command") or [], row.get("environment") or {},
                  row.get("message") or "", configs, cells)
    run.cache = store.cache_totals(run_id)
    run.reader = store.sampled_requests          # a bounded reservoir per cell (store.schema.RESERVOIR)
    run.samples = _monitor(store, cells)
    if requests:
        chosen = pick_timeline_cell(run, timeline_cell)
        if chosen is not None:
            recs = store.sampled_requests(chosen.id)
            run.timeline = Timeline(chosen, recs) if recs else None
    return run
