"""The between-run noise floor of a figure, for a side measured on one launch (no repeated launches to learn it
from): learned from the database's earlier runs of the same engine build and host (judge/fingerprint.py
`build_and_host`: the engine, its version, model, flags and image; the host's name, CPU model and count) and
the same cell (lengths and load), their runs of one launch counted once (metrics/noise.by_launch), else
metrics/noise.py's default, measured on real engines. docs/metrics.md, "Between-run noise and the gate"."""

from __future__ import annotations

from collections.abc import Collection

from tokenbench.judge.cells import launch_of, load_of, ok_repeats, value_of
from tokenbench.judge.fingerprint import build_and_host
from tokenbench.judge.intervals import Book
from tokenbench.judge.views import RunData, config_info, load_run
from tokenbench.metrics import noise
from tokenbench.metrics.cell_summary import Metric
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow

MIN_RUNS = 3          # earlier launches a floor is learned from (2 degrees of freedom at least)
MAX_RUNS = 30         # the most recent runs read
Key = tuple[tuple[str, str], ...]      # a config's engine build and host (build_and_host), as a dictionary key


def key_of(facts: dict[str, str]) -> Key:
    return tuple(sorted(facts.items()))


def observed(run: RunData, cell: CellRow | None, metric: Metric, book: Book) -> noise.RunFigure | None:
    """One run's figure of a cell with its within-run standard error and the launch it ran on; None where the
    cell is missing, not ok in any repeat, or its figure is not a positive number."""
    if cell is None or not ok_repeats(cell):
        return None
    value = value_of(cell, metric)
    if value is None or not value > 0:
        return None
    iv = book.interval(cell, metric)
    return noise.RunFigure(value, iv.se if iv is not None else 0.0, launch_of(cell))


class Floors:
    """Noise floors read from one results database (None: the default floor only), each run read once."""

    def __init__(self, store: Store | None) -> None:
        self._store = store
        self._keys: dict[Key, list[tuple[str, str]]] | None = None   # build and host -> (run, config), oldest first
        self._runs: dict[str, tuple[RunData, Book]] = {}

    def __call__(self, run: RunData, cell: CellRow, metric: Metric, exclude: Collection[str] = ()) -> noise.Noise:
        """The floor of `metric` in `cell` of `run`: learned from the most recent MAX_RUNS earlier runs of the
        same engine build, host and cell (not those in `exclude`, nor `run` itself), where they span at least
        MIN_RUNS launches; else the default."""
        learned = self.learned(run, cell, metric, {*exclude, run.id})
        return learned or noise.default_floor(metric.key)

    def learned(self, run: RunData, cell: CellRow, metric: Metric, exclude: Collection[str]) -> noise.Noise | None:
        if self._store is None:
            return None
        key = key_of(build_and_host(run.config(cell.config), run.environment))
        found = [f for rid, name in self._index(self._store).get(key, []) if rid not in exclude
                 if (f := self._figure(self._store, (rid, name), cell, metric)) is not None]
        launches = noise.by_launch(found[-MAX_RUNS:])
        return noise.spread([launches], "learned") if len(launches) >= MIN_RUNS else None

    def _index(self, store: Store) -> dict[Key, list[tuple[str, str]]]:
        """Every stored (run, config) by its engine build and host, oldest first."""
        if self._keys is None:
            self._keys = {}
            for row in store.runs():
                for c in store.configs(row.id):
                    key = key_of(build_and_host(config_info(c), row.environment or {}))
                    self._keys.setdefault(key, []).append((row.id, c.name))
        return self._keys

    def _figure(self, store: Store, where: tuple[str, str], like: CellRow, metric: Metric) -> noise.RunFigure | None:
        run_id, config = where
        if run_id not in self._runs:
            other = load_run(store, run_id, requests=False)
            self._runs[run_id] = (other, Book(other))
        other, book = self._runs[run_id]
        return observed(other, other.cell_at(config, (like.input_len, like.output_len), load_of(like)), metric, book)
