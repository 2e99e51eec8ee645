"""What a study's runner is made with, fixed when it is made: how it runs (`RunSettings`), whom it tells
(`StudyEvents`), how a capacity study runs its searches (`Searching`; `Plain` by default, a tune's is
study/tune.TuneSearches), and what the runner's parts share while it runs (`RunContext`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tokenbench.host.isolation import Isolation
from tokenbench.load.cell import CellProgress, CellResult
from tokenbench.load.target import Endpoint
from tokenbench.store.db import Store
from tokenbench.store.journal import Journal
from tokenbench.store.rows import CellRow
from tokenbench.study.plan import Plan, PlannedCell, ServerConfig
from tokenbench.study.servers import Server
from tokenbench.study.traces import Traces

if TYPE_CHECKING:
    from tokenbench.logs.launch import Death, LaunchFailure
    from tokenbench.metrics.capacity import CellSamples, Reason
    from tokenbench.study import capacity

    Seen = Sequence[tuple[capacity.Probe, CellSamples]]


@dataclass
class StudyEvents:
    """Callbacks for progress display and result files; all optional."""

    log: Callable[[str], None] = print
    cell_started: Callable[[PlannedCell], None] = lambda c: None
    cell_progress: Callable[[PlannedCell, CellProgress], None] = lambda c, p: None
    cell_done: Callable[[PlannedCell, CellRow], None] = lambda c, row: None
    target_ready: Callable[[Endpoint, dict], None] = lambda endpoint, facts: None   # per server launch
    cell_stored: Callable[[PlannedCell, CellRow, CellResult], None] = lambda c, row, result: None   # with records


class Searching(Protocol):
    """How a capacity study runs its searches: the server configs to visit, in order (consulted after each
    visit, so a later choice can follow what was found; a config may come back for more cells), each
    search's settings, and when to stop one from outside (before its next probe; `fresh`: that probe is not
    stored yet). `tokenbench tune` is one (study/tune.py); `Plain` the default."""

    def visits(self, configs: Sequence[ServerConfig]) -> Iterator[ServerConfig]: ...
    def settings(self, config: ServerConfig, base: capacity.Settings) -> capacity.Settings: ...
    def halt(self, config: ServerConfig, s: capacity.Settings, seen: Seen, fresh: bool) -> Reason | None: ...
    def launch_is_result(self, failure: LaunchFailure) -> bool: ...
    def relaunch_after_death(self, config: ServerConfig, death: Death) -> bool: ...
    def doc(self) -> dict[str, Any]: ...


class Plain:
    """Every config once, in order, each search as the spec asks, never stopped from outside."""

    def visits(self, configs: Sequence[ServerConfig]) -> Iterator[ServerConfig]:
        return iter(configs)

    def settings(self, config: ServerConfig, base: capacity.Settings) -> capacity.Settings:
        return base

    def halt(self, config: ServerConfig, s: capacity.Settings, seen: Seen, fresh: bool) -> Reason | None:
        return None

    def launch_is_result(self, failure: LaunchFailure) -> bool:
        """Whether a config that did not start is a result the study goes on from (not a problem to fix)."""
        return False

    def relaunch_after_death(self, config: ServerConfig, death: Death) -> bool:
        """Whether a config whose engine died under load is launched again to finish its cells (a study that
        measures every config does; one that picks a config takes the death as its result)."""
        return True

    def doc(self) -> dict[str, Any]:
        """What the JSON result holds beside the searches."""
        return {}


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """How a study's runner runs, fixed when it is made (not what it measures)."""

    kind: str = "sweep"                  # the stored run's kind (bench or sweep), for the resume advice
    server: Server | None = None         # an already running server (e.g. deployed by `demo`), not the target's
    output: str | None = None            # tokenbench's JSON result, rewritten after every cell
    keep_records: bool = False           # every record in memory too (a result file that lists them asks it)
    header: dict = field(default_factory=dict)    # the JSON result's facts: tool, command, environment
    isolation: Isolation = Isolation()   # the client's and a local engine's CPUs and priorities (host/isolation.py)
    searching: Searching = Plain()       # a capacity study's searches (tune: study/tune.TuneSearches)


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What the runner's parts (study/configs, launch, searches, cells) share while the study runs: its
    plan, where its cells go (the store under its run id, and the journal: the database and the JSON
    result), its settings and listeners, and the server's span receiver."""

    plan: Plan
    store: Store
    run_id: str
    settings: RunSettings
    events: StudyEvents
    journal: Journal
    traces: Traces
