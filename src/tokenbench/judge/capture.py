"""Graph capture and TPOT cliffs, as data (docs/metrics.md, "Bottleneck labels"): whether a cell's decode
batch is above its config's captured graph sizes (it runs eager: the `^` mark), and whether TPOT jumped
between a cell and the load below it more than the load did (a cliff), with what explains it: the batch
crossing the largest captured size (graph capture), or KV capacity, or nothing known. Pure: reads the
stored facts and summaries."""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.judge.cells import decode_batch, pair_of, state_of, x_of
from tokenbench.judge.views import RunData
from tokenbench.metrics.cell_summary import known
from tokenbench.spec.server_facts import GraphCapture
from tokenbench.store.rows import CellRow

CLIFF = 1.2          # TPOT up at least 20 % ...
                     # ... and by more than the load rose (aggregate decode throughput fell)


@dataclass(frozen=True)
class Cliff:
    """TPOT from the load below (`below`) to this cell: the ratio of the mean TPOTs, and the loads'."""

    below: CellRow
    tpot_ratio: float
    load_ratio: float
    crossed: int | None        # the largest captured size, when the decode batch crossed it between the two
    padded: tuple[int, int] | None = None   # the captured sizes the two batches were padded to, when the
                                             # padded size rose more than the load did


def graphs(run: RunData, c: CellRow) -> GraphCapture | None:
    g = next((cfg.facts.graphs for cfg in run.configs if cfg.name == c.config), None)
    return g if g is not None and g.max_size else None


def batch(run: RunData, c: CellRow) -> float | None:
    slots = next((cfg.facts.slots for cfg in run.configs if cfg.name == c.config), None)
    return decode_batch(c, slots)[0]


def below(run: RunData, c: CellRow) -> CellRow | None:
    """The ok cell of the next lower load (same config, pair and loop)."""
    same = [o for o in run.cells_of(c.config) if pair_of(o) == pair_of(c) and (o.concurrency is None) == (c.concurrency is None)
            and state_of(o).ok and x_of(o) < x_of(c)]
    return max(same, key=lambda o: x_of(o), default=None)


def cliff(run: RunData, c: CellRow) -> Cliff | None:
    """A TPOT cliff into `c` from the load below, or None."""
    low = below(run, c)
    a, b = (known(low.summary.mean_tpot_ms) if low else None), known(c.summary.mean_tpot_ms)
    if low is None or not a or not b or not x_of(low):
        return None
    tpot, load = b / a, x_of(c) / x_of(low)
    if tpot < CLIFF or tpot <= load:
        return None
    g = graphs(run, c)
    lo, hi = batch(run, low), batch(run, c)
    crossed = g.max_size if g is not None and lo is not None and not g.eager(lo) and g.eager(hi) else None
    pads = (g.padded(lo), g.padded(hi)) if g is not None else (None, None)
    padded = (pads[0], pads[1]) if pads[0] and pads[1] and pads[1] / pads[0] > load else None
    return Cliff(low, tpot, load, crossed, padded)
