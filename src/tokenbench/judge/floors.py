"""The between-run noise floor of a figure, for a side measured once (no repeats to learn it from): learned
from the database's earlier runs of the same target and configuration (the same engine build, model, flags
and host, and the same cell: lengths and load), else metrics/noise.py's default, measured on real engines.
docs/metrics.md, "Between-run noise and the gate"."""

from __future__ import annotations

from collections.abc import Collection

from tokenbench.judge.cells import load_of, ok_repeats, value_of
from tokenbench.judge.intervals import Book
from tokenbench.judge.views import ConfigInfo, RunData, config_info, load_run
from tokenbench.metrics import noise
from tokenbench.metrics.cell_summary import Metric
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow

MIN_RUNS = 3          # earlier runs a floor is learned from (2 degrees of freedom at least)
MAX_RUNS = 30         # the most recent ones read


def fingerprint(config: ConfigInfo) -> str:
    """The engine build a config ran: engine, version, model, container image, profile and flags, KV pool."""
    return " | ".join(str(v) for v in (config.engine, config.version, config.model, config.image,
                                       config.flags(), config.kv_capacity))


def host_of(environment: dict) -> str:
    """The host a run measured on, as far as its stored environment tells: CPU model, CPUs, memory,
    accelerators."""
    return " | ".join(str(environment.get(k)) for k in ("cpu", "cpu_count", "memory_gb", "accelerators"))


def observed(run: RunData, cell: CellRow | None, metric: Metric, book: Book) -> noise.RunFigure | None:
    """One run's figure of a cell with its within-run standard error; None where the cell is missing, not ok
    in any repeat, or its figure is not a positive number."""
    if cell is None or not ok_repeats(cell):
        return None
    value = value_of(cell, metric)
    if value is None or not value > 0:
        return None
    iv = book.interval(cell, metric)
    return noise.RunFigure(value, iv.se if iv is not None else 0.0)


class Floors:
    """Noise floors read from one results database (None: the default floor only), each run read once."""

    def __init__(self, store: Store | None) -> None:
        self._store = store
        self._keys: dict[tuple[str, str], list[tuple[str, str]]] | None = None   # (fingerprint, host) -> runs
        self._runs: dict[str, tuple[RunData, Book]] = {}

    def __call__(self, run: RunData, cell: CellRow, metric: Metric, exclude: Collection[str] = ()) -> noise.Noise:
        """The floor of `metric` in `cell` of `run`: learned from at least MIN_RUNS earlier runs of the same
        fingerprint, host and cell (not those in `exclude`, nor `run` itself), else the default."""
        learned = self.learned(run, cell, metric, {*exclude, run.id})
        return learned or noise.default_floor(metric.key)

    def learned(self, run: RunData, cell: CellRow, metric: Metric, exclude: Collection[str]) -> noise.Noise | None:
        if self._store is None:
            return None
        key = (fingerprint(run.config(cell.config)), host_of(run.environment))
        found = [f for rid, name in self._index(self._store).get(key, []) if rid not in exclude
                 if (f := self._figure(self._store, (rid, name), cell, metric)) is not None]
        return noise.spread([found[-MAX_RUNS:]], "learned") if len(found) >= MIN_RUNS else None

    def _index(self, store: Store) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """Every stored (run, config) by its fingerprint and host, oldest first."""
        if self._keys is None:
            self._keys = {}
            for row in store.runs():
                for c in store.configs(row.id):
                    key = (fingerprint(config_info(c)), host_of(row.environment or {}))
                    self._keys.setdefault(key, []).append((row.id, c.name))
        return self._keys

    def _figure(self, store: Store, where: tuple[str, str], like: CellRow, metric: Metric) -> noise.RunFigure | None:
        run_id, config = where
        if run_id not in self._runs:
            other = load_run(store, run_id, requests=False)
            self._runs[run_id] = (other, Book(other))
        other, book = self._runs[run_id]
        return observed(other, other.cell_at(config, (like.input_len, like.output_len), load_of(like)), metric, book)
