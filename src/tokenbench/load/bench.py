"""Several cells against one target in one HTTP session, in order. Each finished cell is handed to
`on_cell` at once (to be stored) so an interruption loses at most the cell in progress. A cell that
found the server unreachable ends the bench: later cells are not run against nothing."""

from __future__ import annotations

from collections.abc import Callable

from tokenbench.client.transport import new_session
from tokenbench.load.cell import CellProgress, CellResult, run_cell
from tokenbench.load.target import ResolvedTarget
from tokenbench.spec.bench import BenchSpec, Load


async def run_bench(spec: BenchSpec, target: ResolvedTarget, on_cell: Callable[[CellResult], None],
                    on_progress: Callable[[Load, CellProgress], None] = lambda *a: None,
                    workers: int = 1, ray_address: str | None = None) -> list[CellResult]:
    results = []
    async with new_session(spec.target.timeout_s, spec.target.connect_in_ttft) as session:
        for load in spec.cells:
            def progress(p: CellProgress, load: Load = load) -> None:
                on_progress(load, p)
            result = await run_cell(
                session, target, spec.workload, load, spec.slo, allow_mismatch=spec.allow_length_mismatch,
                allow_client_lag=spec.allow_client_lag,
                max_error_rate=spec.max_error_rate, workers=workers, ray_address=ray_address, on_progress=progress)
            on_cell(result)
            results.append(result)
            if result.unreachable:
                break                       # the next cells would run against nothing
    return results
