"""How a cell is named wherever it is stored or looked up: `{workload label}/{load label}` ("512:128/c=8").
One spelling for the plan, the runner, the store and the importers of other tools' results."""

from __future__ import annotations

from tokenbench.spec.bench import Load, Workload


def cell_key(workload: Workload, load: Load) -> str:
    return f"{workload.label}/{load.label}"
