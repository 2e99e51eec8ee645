"""A capacity study's searches on a launch: per workload, the search (study/capacity.search, a generator that
yields the next load and is sent each cell's samples) driven cell by cell through study/cells.py, each search
stored with its record (store.save_search) and told to the JSON result. Cells already stored (a resume) are
replayed through the same search, not rerun; a config whose searches the store completes is replayed without
a launch at all (`Searches.replayed`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tokenbench.client.records import RequestRecord
from tokenbench.load.clock import run as run_loop
from tokenbench.spec.bench import Workload
from tokenbench.store.rows import CellRow
from tokenbench.study.cells import Cells, Launch, ServerDied
from tokenbench.study.plan import PlannedCell, ServerConfig, capacity_load, repeat_workload
from tokenbench.study.settings import RunContext

if TYPE_CHECKING:
    from tokenbench.judge.cost import Price
    from tokenbench.metrics.capacity import CellSamples, SearchRecord
    from tokenbench.study import capacity


class _NeedsServer(Exception):
    """A search replayed from the store asks for a cell that is not stored: the config must be launched."""


class Searches:
    """Runs the capacity searches of each config visited; `lines` (config name -> the searches' result lines)
    and `done` (the configs whose searches finished in this visit) are what the runner reads of them."""

    def __init__(self, ctx: RunContext, cells: Cells) -> None:
        self.ctx, self.cells = ctx, cells
        self.lines: dict[str, list[str]] = {}
        self.done: set[str] = set()

    def replayed(self, config: ServerConfig) -> bool:
        """Whether the config's searches are complete in the store: then they are replayed (and stored
        again) without launching its server."""
        ctx = self.ctx
        stored = next((c for c in ctx.store.configs(ctx.run_id) if c.name == config.name), None)
        if stored is None or stored.launch is not None:
            return False
        try:
            run_loop(self.run(None, config, stored.id))
        except _NeedsServer:
            return False
        return True

    async def run(self, launch: Launch | None, config: ServerConfig, config_id: int) -> None:
        """One capacity search per workload (study/capacity.py); cells already stored (resume) are replayed
        through it, not rerun (without a launch, a cell not stored raises _NeedsServer). Each search is
        stored with its record (store.save_search)."""
        from tokenbench.study import capacity_lines  # a capacity search's modules: only a study that searches
        ctx = self.ctx
        stored = {(c.config, c.key, c.repeat): c for c in ctx.store.cells(ctx.run_id)
                  if not c.summary.server_unreachable and c.status != "interrupted"}
        try:
            records = [await self._search(launch, config, wl, stored) for wl in ctx.plan.spec.workloads()]
        except ServerDied as died:
            if died.record is not None:                   # the search as far as it got, kept with the death
                ctx.store.save_search(ctx.run_id, config_id, died.record)
                ctx.journal.header.record_search(config.name, died.record)
            raise
        lines = []
        for record in records:
            ctx.store.save_search(ctx.run_id, config_id, record)
            ctx.journal.header.record_search(config.name, record)
            for line in capacity_lines.describe(record, *self._units(launch)):
                lines.append(line)
                ctx.events.log(f"{config.name}: {line}")
        self.lines[config.name] = lines
        self.done.add(config.name)

    def _units(self, launch: Launch | None) -> tuple[int | None, Price | None]:
        """The devices serving the launched config (judge/hardware.py) and the study's price, for the answer per
        device and per $ an hour; no devices without a launch (a search replayed from the store)."""
        from tokenbench.judge.cost import Price  # a capacity search's: only a study that searches
        from tokenbench.judge.hardware import device_count
        spec = self.ctx.plan.spec
        price = Price(spec.price_per_hour, spec.price_basis) if spec.price_per_hour else None
        if launch is None:
            return None, price
        return device_count(launch.server.profile, launch.server.facts), price

    async def _search(self, launch: Launch | None, config: ServerConfig, wl: Workload,
                      stored: dict[tuple[str, str, int], CellRow]) -> SearchRecord:
        from tokenbench.study import capacity
        spec, searching = self.ctx.plan.spec, self.ctx.settings.searching
        s = searching.settings(config, capacity.settings(spec, wl.label))
        gen = capacity.search(s)
        seen: list[tuple[capacity.Probe, CellSamples]] = []
        probe = next(gen)
        while True:
            cell = PlannedCell(config, repeat_workload(wl, probe.repeat),
                               capacity_load(spec, probe.load, probe.duration_s, probe.requests), probe.repeat)
            row = stored.get((config.name, cell.key, cell.repeat))
            halt = searching.halt(config, s, seen, row is None)
            if halt is not None:
                gen.close()
                return capacity.halted(s, seen, halt)
            try:
                got = await self._cell(launch, cell, row)
            except ServerDied as died:
                died.role = probe.role                  # the launch keeps whether it died confirming the answer
                if probe.role != "sustain":             # a search cut short; a sustain cell's keeps its record
                    died.record = capacity.halted(s, seen, "died")
                raise
            seen.append((probe, got))
            try:
                probe = gen.send(got)
            except StopIteration as end:
                return end.value

    async def _cell(self, launch: Launch | None, cell: PlannedCell, row: CellRow | None) -> CellSamples:
        """The cell's samples for the search: measured now, or read back from the store (a resume)."""
        from tokenbench.metrics.capacity import CellSamples, metrics_of, samples_of
        if row is not None and row.id:
            records: Iterable[RequestRecord] = self.ctx.store.requests(row.id)
        elif launch is None:
            raise _NeedsServer
        else:
            row, result = await self.cells.run(launch, cell)
            records = result.all_records()
        spec, s = self.ctx.plan.spec, row.summary
        values = samples_of(records, metrics_of(spec.capacity_tiers()), spec.slo, s.jobs)
        bounds = {k: b.bound for k, b in ((s.figures.client_bounds if s.figures else None) or {}).items()}
        marks = {k: m.cause for k, m in ((s.figures.client_marks if s.figures else None) or {}).items()}
        got = CellSamples(key=row.key, repeat=row.repeat, status=row.status, values=values,
                          request_rate=s.request_throughput, slices=s.slices, bounds=bounds, marked=list(marks),
                          causes=marks, schedule_off=s.send.send_schedule_off if s.send and s.send.reshaped else None,
                          late_ms=(s.send.send_late_max_ms or 0.0) if s.send else 0.0)
        return got.with_doubt(spec.capacity_tiers(), spec.find_capacity != "rate")
