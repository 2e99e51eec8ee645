"""The loop over a study's server configs: `StudyRunner` visits each config in turn (repeats of several
configs interleaved, plan.visits; a capacity study's order chosen by its `Searching`) and hands each one
with cells still to run to study/launch.py, which deploys it, runs its cells or searches (study/searches.py,
study/cells.py) and relaunches it after a death. Every finished cell is committed in one transaction;
`--resume` runs exactly the cells not committed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tokenbench.store import commands
from tokenbench.store.db import Store
from tokenbench.store.journal import Journal
from tokenbench.study.cells import Cells
from tokenbench.study.launch import Launcher
from tokenbench.study.plan import Plan, PlannedCell, ServerConfig, pending, visits
from tokenbench.study.searches import Searches
from tokenbench.study.settings import RunContext, RunSettings, StudyEvents
from tokenbench.study.traces import Traces


class StudyRunner:
    """Runs a stored study's missing cells, config by config; configured once, when it is made."""

    def __init__(self, plan: Plan, store: Store, run_id: str, settings: RunSettings = RunSettings(),
                 events: StudyEvents | None = None) -> None:
        self.plan, self.store, self.run_id, self.settings = plan, store, run_id, settings
        kind = settings.kind
        hint = f"; then {commands.resume_advice(store, kind, run_id)}"
        header = {"run_id": run_id, "kind": kind, "spec": plan.spec.model_dump(mode="json"), **settings.header}
        self.journal = Journal(store, run_id, header, settings.output, hint)
        self.journal.seed_from_store()
        ev = events or StudyEvents()
        self.attempted: set[tuple[str, str, int]] = set()   # cells run by this process (a cut-short one too)
        self.round: int | None = None                       # the repeat being run (interleaved repeats)
        ctx = RunContext(plan=plan, store=store, run_id=run_id, settings=settings, events=ev, journal=self.journal,
                         traces=Traces(plan.spec.target, ev.log))   # the server's spans: receiver and joins
        cells = Cells(ctx, self.attempted)
        self.searches = Searches(ctx, cells)
        self.capacity = self.searches.lines                 # config name -> capacity result lines
        self.ctx, self.launcher = ctx, Launcher(ctx, self.searches, cells, self.pending)

    def pending(self, config: ServerConfig) -> Sequence[PlannedCell | None]:
        if self.plan.spec.find_capacity:
            return [] if config.name in self.searches.done else [None]   # cells are decided as it goes
        return pending(self.plan, self.store.done_keys(self.run_id) | self.attempted, config, self.round)

    def run(self) -> list[str]:
        """Run every config's missing cells, repeats of several configs interleaved (plan.visits); returns
        one line per config visit that could not finish."""
        problems = []
        try:
            for config, repeat in self._visits():
                self.round = repeat
                self.searches.done.discard(config.name)          # a capacity config visited again searches on
                if self.pending(config):
                    problem = self._run_config(config)
                    if problem:
                        problems.append(f"{config.name}: {problem}")
                    self.journal.header.add_study_facts(self.settings.searching.doc())
        finally:
            self.ctx.traces.close()
        self.round = None
        return problems

    def _visits(self) -> Iterable[tuple[ServerConfig, int | None]]:
        if self.plan.spec.find_capacity:
            return ((c, None) for c in self.settings.searching.visits(self.plan.configs))
        return visits(self.plan)

    def _run_config(self, config: ServerConfig) -> str | None:
        """One visit of a config: its launches (study/launch.py); a problem line when it could not finish."""
        return self.launcher.run_config(config)
