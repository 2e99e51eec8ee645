"""Where a run's finished cells go: the results database and, when asked, a JSON result file rewritten
after every cell. Each cell goes to every sink that still works. When the database refuses a write
(disk full, read-only, I/O error) or the JSON file cannot be written, the cell's records are kept in the
other sink, or in a recovery file when there is no other, and the run stops with an OutputError that says
what was kept where; the database's run is then shown "interrupted" and `--resume` runs the rest. The JSON
result's header, the run's facts before its cells, is the journal's too (`Header`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import msgspec

from tokenbench.client.records import RequestRecord
from tokenbench.errors import OutputError, StoreError
from tokenbench.store import outputs
from tokenbench.store.db import Store
from tokenbench.store.records import dumps, to_dict
from tokenbench.store.rows import CellRow

if TYPE_CHECKING:
    from tokenbench.metrics.capacity import SearchRecord
    from tokenbench.spec.server_facts import ServerFacts
    from tokenbench.workload.vocab import Vocab


@dataclass(frozen=True)
class Target:
    """The server a launch measured, as the JSON result's `target` says it: its address and model, the
    context it serves, the vocabulary prompts are drawn from, and how output lengths are kept."""

    base_url: str
    model: str
    max_model_len: int | None
    vocab: Vocab            # its size, the ids drawn (low to high, exclusive) and where the size came from
    method: str


class Header:
    """The JSON result's header: the run's facts, written before its cells. It opens with the run (id,
    kind, spec, tool, command, environment: the dict it is made with); each later fact is placed when it is
    first learnt (a config's server facts, the target, the capacity searches, a study's own facts such as a
    tune's judgement, the status), so the keys come in the order they always have. Changed only through the
    methods below."""

    def __init__(self, opening: dict) -> None:
        self._facts = opening

    def to_dict(self) -> dict:
        return self._facts

    def seed_config_facts(self, stored: Iterable[tuple[str, ServerFacts]]) -> None:
        """The facts of the server configs stored before (a resumed run); the section opens even when none."""
        known = self._facts.setdefault("config_facts", {})
        for config, facts in stored:
            known.setdefault(config, facts.to_dict())

    def add_config_facts(self, config: str, facts: ServerFacts) -> None:
        """A server config's facts as its launch read them."""
        self._facts.setdefault("config_facts", {})[config] = facts.to_dict()

    def set_target(self, server_facts: dict, target: Target) -> None:
        """The server the cells that follow measure: its facts (ServerFacts.to_dict()) and the target."""
        self._facts.update(server_facts=server_facts, target=asdict(target))

    def record_search(self, config: str, record: SearchRecord) -> None:
        """A config's capacity search; one visited again replaces its earlier record."""
        kept = [e for e in self._facts.get("capacity", [])
                if (e["config"], e["workload"]) != (config, record.workload)]
        self._facts["capacity"] = [*kept, {"config": config, **record.model_dump(mode="json")}]

    def add_study_facts(self, facts: Mapping[str, Any]) -> None:
        """What a study adds beside its searches (a tune: its judgement so far)."""
        self._facts.update(facts)

    def set_status(self, status: str) -> None:
        self._facts["status"] = status


class Journal:
    def __init__(self, store: Store | None, run_id: str | None, header: dict, json_path: str | Path | None,
                 resume_hint: str = "") -> None:
        if json_path is not None:
            outputs.check(json_path, probe=True)
        self.store, self.run_id, self.header = store, run_id, Header(header)
        self.json_path = Path(json_path) if json_path and str(json_path) != outputs.STDOUT else None
        self.to_stdout = str(json_path) == outputs.STDOUT      # printed once, by write()
        self.resume_hint = resume_hint
        self.stored_keys: list[str] = []          # cells committed to the database by this process
        self.cells: list[JsonCell] = []           # the JSON result's cells, in the order they were measured

    @property
    def wants_json(self) -> bool:
        return self.json_path is not None or self.to_stdout

    def add(self, config_id: int | None, row: CellRow, records: Iterable[RequestRecord],
            samples: Iterable[tuple] = (), config: str | None = None) -> None:
        """Store one finished cell everywhere; OutputError (after keeping it elsewhere) when a sink fails.
        `records` is read once per sink (a cell's spool reads them back from disk each time), and the JSON
        result keeps a reference to it, not the records, until it is written (the same records the database
        stored, read from the spool rather than back from the database: the store's round trip is lossless,
        store/records.py, and reading 3,072 requests back cost 0.07 s)."""
        _, db_error = self._to_db(config_id, row, records, samples)
        which = (config, row.key, row.repeat)
        self.cells = [c for c in self.cells if c.cell != which]     # an interrupted cell, measured again
        self.cells.append(JsonCell({**row.to_json(), **({"config": config} if config else {})},
                                   _Measured(records) if self.wants_json or db_error else None, which))
        json_error = self._write_json()
        if db_error or json_error:
            self._fail(row.key, db_error, json_error)

    def _to_db(self, config_id: int | None, row: CellRow, records: Iterable[RequestRecord],
               samples: Iterable[tuple]) -> tuple[int | None, StoreError | None]:
        """The stored cell's id, or why the database refused it."""
        if self.store is None or config_id is None or self.run_id is None:
            return None, None
        try:
            cell_id = self.store.save_cell(self.run_id, config_id, row, records, samples)
        except StoreError as exc:
            return None, exc
        self.stored_keys.append(row.key)
        return cell_id, None

    def _write_json(self) -> OutputError | None:
        if self.json_path is None:
            return None
        try:
            outputs.write_text(self.json_path, json_pieces(self.header.to_dict(), self.cells))
        except OutputError as exc:
            return exc
        return None

    def _fail(self, key: str, db_error: StoreError | None, json_error: OutputError | None) -> None:
        kept = []
        if db_error is None and self.store is not None:
            kept.append(f"cell {key} and earlier in {self.store.path} (run {self.run_id})")
        elif self.stored_keys and self.store is not None:
            kept.append(f"{len(self.stored_keys)} earlier cell(s) in {self.store.path} (run {self.run_id})")
        if json_error is None and self.json_path is not None:
            kept.append(f"cell {key} and earlier in {self.json_path}")
        elif db_error is not None:
            kept.append(self._recover(key))
        cause = db_error or json_error
        why = cause.message if cause is not None else "an output failed"
        self._mark_interrupted(why)
        raise OutputError(f"{why}; kept: {'; '.join(kept)}",
                          f"free space or fix the path{self.resume_hint}") from None

    def _recover(self, key: str) -> str:
        name = f"tokenbench-recovery-{self.run_id or os.getpid()}.json"
        near = [p.parent / name for p in (self.json_path, self.store.path if self.store else None) if p]
        where, _ = outputs.first_writable("".join(json_pieces(self.header.to_dict(), self.cells)),
                                          [*near, Path.cwd() / name, Path(tempfile.gettempdir()) / name])
        return f"cell {key} and earlier in recovery file {where}" if where else f"cell {key} LOST (no disk took it)"

    def _mark_interrupted(self, why: str) -> None:
        if self.store is None or self.run_id is None:
            return
        try:
            self.store.set_run_status(self.run_id, "interrupted", why)
        except StoreError:
            pass            # the disk refuses even that: `runs` shows it interrupted once this process ends

    def write(self) -> None:
        """Rewrite the JSON result (e.g. with final facts); OutputError when it cannot be written."""
        if self.to_stdout:
            outputs.write_text(outputs.STDOUT, [*json_pieces(self.header.to_dict(), self.cells), "\n"])
        err = self._write_json()
        if err:
            where = (f"the cells are in {self.store.path} (run {self.run_id})" if self.store
                     else self._recover("last"))
            raise OutputError(f"{err.message}; kept: {where}", "free space or choose another --output")

    def seed_from_store(self) -> None:
        """A resumed run's JSON result starts with the cells already stored, so rewriting it loses none."""
        if self.store is None or self.run_id is None or self.json_path is None:
            return
        self.header.seed_config_facts((c.name, c.facts) for c in self.store.configs(self.run_id))
        for c in self.store.cells(self.run_id):
            if c.id:
                self.cells.append(JsonCell({**c.to_json(), "config": c.config},
                                           _Measured(_Stored(self.store, c.id)), (c.config, c.key, c.repeat)))

    def locations(self) -> list[str]:
        out = []
        if self.store:
            out.append(f"stored run {self.run_id} in {self.store.path}")
        if self.json_path:
            out.append(f"wrote {self.json_path}")
        return out


class _Measured:
    """A cell's measured requests as JSON lines, made from its records the first time they are
    written and kept in an anonymous temporary file: a rewrite of the JSON result (after every cell,
    and at the end with the final facts) copies the cell's text instead of encoding it again."""

    def __init__(self, records: Iterable[RequestRecord]) -> None:
        self.records = records
        self.text: IO[str] | None = None

    def pieces(self) -> Iterator[str]:
        if self.text is not None:
            self.text.seek(0)
            while piece := self.text.read(1 << 20):
                yield piece
            return
        cache: IO[str] | None = _temp_text()
        for m, r in enumerate(r for r in self.records if r.phase == "measure"):
            line = ("," if m else "") + "\n   " + _encode(to_dict(r)).decode()
            cache = _keep(cache, line)
            yield line
        self.text = cache                       # only a whole pass is kept (None: it could not be)


def _temp_text() -> IO[str] | None:
    try:
        return tempfile.TemporaryFile("w+", encoding="utf-8")
    except OSError:
        return None                             # no room even for that: encode again next time


def _keep(cache: IO[str] | None, line: str) -> IO[str] | None:
    if cache is None:
        return None
    try:
        cache.write(line)
    except OSError:
        cache.close()
        return None
    return cache


class _Stored:
    """A stored cell's measured records, read from the database when iterated (a resumed run)."""

    def __init__(self, store: Store, cell_id: int) -> None:
        self.store, self.cell_id = store, cell_id

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(self.store.requests(self.cell_id))


_encode = msgspec.json.Encoder().encode      # a request's JSON (non-finite floats as null, as json_safe)


@dataclass
class JsonCell:
    """One cell of the JSON result: its row (CellRow.to_json(), with its config) and its requests."""

    fields: dict
    requests: _Measured | None = None       # None: written without its requests (no JSON asked)

    cell: tuple[str | None, str, int] | None = None     # (config, key, repeat): a cell measured again replaces it


def json_pieces(doc: dict, cells: list[JsonCell]) -> Iterator[str]:
    """The JSON result in pieces: the run's facts, then each cell with its requests one per line."""
    head = dumps(doc, indent=1)
    yield (head[:-2] + ",\n" if head != "{}" else "{\n") + ' "cells": ['
    for n, cell in enumerate(cells):
        rest = dumps(cell.fields)
        yield ("," if n else "") + "\n  " + rest[:-1] + ', "requests": ['
        if cell.requests is not None:
            yield from cell.requests.pieces()
        yield "]}"
    yield "\n ]\n}"
