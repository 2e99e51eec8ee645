"""Graph capture and TPOT cliffs, as data (docs/metrics.md, "Bottleneck labels"): whether a cell's decode
batch is above its config's captured graph sizes (it runs eager: the `^` mark), and whether TPOT jumped
between a cell and the load below it more than the load did (a cliff), with what explains it: the batch
crossing the largest captured size (graph capture), or KV capacity, or nothing known. Pure: reads the
stored facts and summaries."""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.judge.views import CellInfo, RunData
from tokenbench.metrics.cell_summary import known
from tokenbench.spec.server_facts import GraphCapture

CLIFF = 1.2          # TPOT up at least 20 % ...
                     # ... and by more than the load rose (aggregate decode throughput fell)


@dataclass(frozen=True)
class Cliff:
    """TPOT from the load below (`below`) to this cell: the ratio of the mean TPOTs, and the loads'."""

    below: CellInfo
    tpot_ratio: float
    load_ratio: float
    crossed: int | None        # the largest captured size, when the decode batch crossed it between the two
    padded: tuple[int, int] | None = None   # the captured sizes the two batches were padded to, when the
                                             # padded size rose more than the load did


def graphs(run: RunData, c: CellInfo) -> GraphCapture | None:
    g = next((cfg.facts.graphs for cfg in run.configs if cfg.name == c.config), None)
    return g if g is not None and g.max_size else None


def batch(run: RunData, c: CellInfo) -> float | None:
    slots = next((cfg.facts.slots for cfg in run.configs if cfg.name == c.config), None)
    return c.decode_batch(slots)[0]


def below(run: RunData, c: CellInfo) -> CellInfo | None:
    """The ok cell of the next lower load (same config, pair and loop)."""
    same = [o for o in run.cells_of(c.config) if o.pair == c.pair and (o.concurrency is None) == (c.concurrency is None)
            and o.state.ok and o.x < c.x]
    return max(same, key=lambda o: o.x, default=None)


def cliff(run: RunData, c: CellInfo) -> Cliff | None:
    """A TPOT cliff into `c` from the load below, or None."""
    low = below(run, c)
    a, b = (known(low.summary.mean_tpot_ms) if low else None), known(c.summary.mean_tpot_ms)
    if low is None or not a or not b or not low.x:
        return None
    tpot, load = b / a, c.x / low.x
    if tpot < CLIFF or tpot <= load:
        return None
    g = graphs(run, c)
    lo, hi = batch(run, low), batch(run, c)
    crossed = g.max_size if g is not None and lo is not None and not g.eager(lo) and g.eager(hi) else None
    pads = (g.padded(lo), g.padded(hi)) if g is not None else (None, None)
    padded = (pads[0], pads[1]) if pads[0] and pads[1] and pads[1] / pads[0] > load else None
    return Cliff(low, tpot, load, crossed, padded)
