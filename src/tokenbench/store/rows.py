"""What the results database holds, typed: a run, a server config, a cell, a monitor sample. The store
takes and gives these (store/db.py); the JSON result writes a cell as `CellRow.to_json()`, the same
for a cell just measured and one read back by a resumed run. A cell row is made in one of two ways:
`CellRow.from_result` (a measured cell: its verdict and summary) or `CellRow.skipped` (why it was not measured)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import ValidationError

from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.verdict import Verdict
from tokenbench.spec.bench import Load
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import ServerFacts

if TYPE_CHECKING:
    from tokenbench.logs.launch import Death, LaunchFailure
    from tokenbench.metrics.capacity import SearchRecord

T = TypeVar("T")


class Planned(Protocol):
    """A cell of the plan (sweep.plan.PlannedCell): what is run, and which repeat."""

    @property
    def key(self) -> str: ...
    @property
    def repeat(self) -> int: ...
    @property
    def load(self) -> Load: ...


class Measured(Protocol):
    """A cell's outcome (load.cell.CellResult): its figures, verdict and first send."""

    @property
    def summary(self) -> CellSummary: ...
    @property
    def verdict(self) -> Verdict: ...
    @property
    def started_ns(self) -> int | None: ...


@dataclass(frozen=True)
class KvUse:
    """The cell's KV demand (concurrency x (input + output)) against the server's capacity."""

    demand: int | None = None
    capacity: int | None = None
    over: bool = False                  # the `*` mark: requests must queue for KV


def _axis(load: Load) -> tuple[int | None, float | None]:
    """The cell's (concurrency, request_rate) columns: a sessions cell's users (each has at most one request
    in flight) or its session starts per second."""
    return load.concurrency or load.users, load.request_rate or load.session_rate


@dataclass(frozen=True, kw_only=True)
class CellRow:
    key: str
    input_len: int
    output_len: int
    status: str                         # ok | failed | invalid | skipped | interrupted
    summary: CellSummary = field(default_factory=CellSummary)
    repeat: int = 0
    concurrency: int | None = None
    request_rate: float | None = None
    message: str = ""
    kv_demand: int | None = None
    kv_capacity: int | None = None
    over_capacity: bool = False
    started_ns: int | None = None       # the first measured send
    id: int = 0                         # read back: the stored cell's id (0: not stored), its config's name and when
    config: str = ""                    # it was stored
    finished_at: str | None = None
    # read for a report (judge/views.py), never stored:
    repeats: tuple[CellRow, ...] = ()   # a merged cell's stored repeats, in order (each is one cell)
    eager: bool = False                 # its decode batch is above its server's captured graph sizes (the `^` mark)

    @classmethod
    def from_result(cls, cell: Planned, result: Measured, kv: KvUse) -> CellRow:
        s = result.summary
        concurrency, rate = _axis(cell.load)
        return cls(key=cell.key, input_len=int(s.input_len or 0), output_len=int(s.output_len or 0),
                   status=result.verdict.status, summary=s, repeat=cell.repeat, concurrency=concurrency,
                   request_rate=rate, message=result.verdict.message, kv_demand=kv.demand, kv_capacity=kv.capacity,
                   over_capacity=kv.over, started_ns=result.started_ns)

    @classmethod
    def skipped(cls, cell: Planned, lengths: tuple[int, int], reason: str, kv: KvUse) -> CellRow:
        concurrency, rate = _axis(cell.load)
        return cls(key=cell.key, input_len=lengths[0], output_len=lengths[1], status="skipped", summary=CellSummary(),
                   repeat=cell.repeat, concurrency=concurrency, request_rate=rate, message=reason,
                   kv_demand=kv.demand, kv_capacity=kv.capacity, over_capacity=kv.over)

    JSON_COLUMNS = ("key", "repeat", "input_len", "output_len", "concurrency", "request_rate", "status", "message",
                    "kv_demand", "kv_capacity", "over_capacity")

    def columns(self) -> dict[str, Any]:
        """The cell's own columns (its summary apart), by name: what `export` and the JSON result show."""
        return {name: getattr(self, name) for name in self.JSON_COLUMNS}

    def to_json(self) -> dict[str, Any]:
        """The cell in the JSON result (its requests apart)."""
        return {**self.columns(), "summary": self.summary.to_dict(), "started_ns": self.started_ns}

    @classmethod
    def from_json(cls, cell: Mapping[str, Any]) -> CellRow:
        """A cell of the JSON result (`to_json()`'s form, its requests and config apart) read back."""
        out = _from_db(cls, {k: v for k, v in cell.items() if k in (*cls.JSON_COLUMNS, "started_ns")})
        return replace(out, summary=CellSummary.from_dict(cell.get("summary") or {}))

    @classmethod
    def from_db(cls, row: Mapping[str, Any]) -> CellRow:
        """A row of `cells` joined with its config's name, its JSON decoded (store/db.py)."""
        out = _from_db(cls, {**row, "config": row.get("config_name") or "", "summary": None})
        return replace(out, summary=CellSummary.from_dict(row.get("summary") or {}),
                       over_capacity=bool(out.over_capacity), message=out.message or "")


@dataclass(frozen=True, kw_only=True)
class RunRow:
    id: str
    created_at: str
    kind: str                           # bench | sweep | import
    status: str                         # running | done | failed | interrupted
    target: str
    tool_version: str
    spec: dict[str, Any]
    command: list[str]
    environment: dict[str, Any]
    clock: dict[str, int]               # perf_counter_ns and time_ns taken together
    message: str = ""
    owner_pid: int | None = None
    owner_started: float | None = None
    cells_done: int | None = None       # listed runs only

    @property
    def name(self) -> str:
        """The study's name (`name` of its spec, vLLM's --label); "" when it has none (an imported run)."""
        name = self.spec.get("name")
        return name if isinstance(name, str) else ""

    def planned_cells(self, configs: int) -> int | None:
        """Cells the run meant to measure, when its spec says: `planned_cells`, or the product of its axes."""
        planned, imported, cells = (self.spec.get(k) for k in ("planned_cells", "import", "cells"))
        if isinstance(planned, int):
            return planned
        if isinstance(imported, dict):
            return imported.get("cells")
        if isinstance(cells, list):
            return len(cells) * max(configs, 1)
        return None


@dataclass(frozen=True, kw_only=True)
class ConfigRow:
    id: int
    run_id: str
    name: str
    overrides: dict[str, Any]
    profile: Profile | None             # the deployment profile it was launched with (None: not ours, or unreadable)
    facts: ServerFacts                  # read from the server, or stated by an imported result
    status: str
    message: str = ""
    launch: LaunchFailure | None = None     # why it did not start (None: it started, or was not tried yet)
    deaths: tuple[Death, ...] = ()          # each time its engine started and then died, in order


@dataclass(frozen=True)
class SampleRow:
    """One stored monitor sample (monitor/samples.py names it)."""

    t_ns: int
    source: str
    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Send:
    """One stored attempt of a cell, as the prefix-cache state reads it: the run that sent its prompts, that
    run's spec (how its prompts were made) and when the cell was stored (UTC, ISO 8601)."""

    run_id: str
    spec: dict[str, Any]
    finished_at: str


@dataclass(frozen=True)
class SearchRow:
    """One stored capacity search: its server config's name, the workload and the search's record."""

    config: str
    workload: str
    record: SearchRecord


def search_from_db(row: Mapping[str, Any]) -> SearchRow | None:
    """A stored search; None for one this version cannot read (stored by another)."""
    from tokenbench.metrics.capacity import SearchRecord  # a capacity search's record: only where one is read
    data = row.get("record") or {}
    try:
        record = SearchRecord.model_validate(data)
    except ValidationError as exc:
        try:
            record = SearchRecord.model_validate(_nan_back(data, exc))
        except ValidationError:
            return None
    return SearchRow(str(row.get("config_name") or ""), str(row.get("workload") or ""), record)


def _nan_back(data: Any, exc: ValidationError) -> Any:
    """The record with NaN again where it was stored: a number the search held as NaN is written as null
    (JSON has no NaN), which its float field refuses on reading; nothing else is repaired."""
    for err in exc.errors():
        if err["type"] == "float_type" and err["input"] is None:
            *path, last = err["loc"]
            node = data
            for key in path:
                node = node[key]
            node[last] = math.nan
    return data


def _from_db(cls: type[T], row: Mapping[str, Any]) -> T:
    """The dataclass from the columns of its fields' names (a column it does not have keeps the default)."""
    return cls(**{f.name: row[f.name] for f in fields(cls) if f.name in row})   # type: ignore[arg-type]


def run_from_db(row: Mapping[str, Any]) -> RunRow:
    return _from_db(RunRow, row)


def config_from_db(row: Mapping[str, Any]) -> ConfigRow:
    """The config with its profile and facts as the types they were written as."""
    return replace(_from_db(ConfigRow, row), profile=_profile(row.get("profile") or {}),
                   facts=ServerFacts.from_dict(row.get("facts") or {}), launch=_launch(row.get("launch") or {}),
                   deaths=_deaths(row.get("deaths") or []))


def _launch(stored: dict[str, Any]) -> LaunchFailure | None:
    """A stored launch failure; None when there is none, or one this version cannot read."""
    if not stored:
        return None
    from tokenbench.logs.launch import LaunchFailure  # only where a config did not start
    try:
        return LaunchFailure.model_validate(stored)
    except ValidationError:
        return None


def _deaths(stored: list[Any]) -> tuple[Death, ...]:
    """The stored deaths of a config's engine (one this version cannot read is kept as a death of unknown
    cause: that it died is the fact)."""
    if not stored:
        return ()
    from tokenbench.logs.launch import Death, LaunchFailure  # only where an engine died
    out = []
    for d in stored:
        try:
            out.append(Death.model_validate(d))
        except ValidationError:
            out.append(Death(failure=LaunchFailure(cause="exited")))
    return tuple(out)


def _profile(stored: dict[str, Any]) -> Profile | None:
    """A stored profile; None when there is none, or one this version cannot read (stored by another)."""
    try:
        return Profile.model_validate(stored) if stored else None
    except ValidationError:
        return None


def sample_from_db(row: Mapping[str, Any]) -> SampleRow:
    return _from_db(SampleRow, row)
