"""Files tokenbench wrote, read back by `tokenbench import` with every figure as it was written:

  result   the JSON result of `bench` / `sweep --output FILE` (and `--output -`) and the recovery file a
           failed write leaves (store/journal.py writes both): the run's spec and facts, then each cell as
           `CellRow.to_json()` with its measured requests (store/records.to_dict)
  export   `tokenbench export RUN` JSON (formats/export.py): the run, its configs with their facts, each
           cell's columns beside its flat summary, with its requests when exported with `--requests`
  cells    `tokenbench export RUN --format csv`: the same cell rows, one line each; lists and dicts are JSON
           text, and an empty value (also how a NaN is written) reads as not given

`export --requests --format csv` holds requests without their chunk times and no cell figures, so it
cannot be a run: it is refused with the export that can. The verdict columns of an export are not read:
the verdict is judged again from the cell's status, message and figures, as for a measured cell."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from functools import cache
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from pydantic import TypeAdapter, ValidationError

from tokenbench.client.records import RequestRecord
from tokenbench.errors import UsageError
from tokenbench.formats.export import CELL_FIELDS, REQUEST_FIELDS
from tokenbench.formats.parsed import Parsed, SourceRun
from tokenbench.metrics.cell_summary import GROUPS, CellSummary
from tokenbench.store.records import from_dict
from tokenbench.store.rows import CellRow

RESULT, EXPORT, CELLS_CSV, REQUESTS_CSV = "result", "export", "cells-csv", "requests-csv"
VERDICT_COLUMNS = ("verdict", "verdict_mark", "verdict_reason")
SHARED = ("input_len", "output_len", "concurrency", "request_rate")    # a column and a summary key alike
NOT_SUMMARY = frozenset((*CellRow.JSON_COLUMNS, *VERDICT_COLUMNS, "config", "requests"))
REFIX = "export the run again with `tokenbench export RUN --requests` (JSON) and import that"
DEFAULT_CONFIG = "default"


def json_kind(doc: Any) -> str | None:
    """RESULT or EXPORT when `doc` is a JSON document tokenbench wrote, else None."""
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        return None
    if isinstance(doc.get("run"), dict) and isinstance(doc.get("configs"), list):
        return EXPORT
    return RESULT if "run_id" in doc and "kind" in doc else None


def csv_kind(header: list[str]) -> str | None:
    """CELLS_CSV or REQUESTS_CSV when `header` is that of an `export --format csv`, else None."""
    if header[:len(CELL_FIELDS)] == list(CELL_FIELDS):
        return CELLS_CSV
    return REQUESTS_CSV if header[:len(REQUEST_FIELDS)] == list(REQUEST_FIELDS) else None


def read(where: str, text: str, doc: Any = None) -> Parsed:
    """A file tokenbench wrote (`doc`: its JSON, when already decoded); UsageError when it is none."""
    if doc is None and text.lstrip().startswith("{"):
        doc = _decode(where, text)
    kind = json_kind(doc) if doc is not None else csv_kind(_header(text))
    if kind == RESULT:
        return read_result(where, doc)
    if kind == EXPORT:
        return read_export(where, doc)
    if kind == CELLS_CSV:
        return read_cells_csv(where, text)
    if kind == REQUESTS_CSV:
        raise UsageError(f"{where} holds requests (`export --requests --format csv`): without their chunk times "
                         "and with no cell figures they cannot make a run", REFIX)
    raise UsageError(f"{where} is not a file tokenbench wrote (its --output JSON, a recovery file, or an export "
                     "as JSON or CSV)", "pass the format it is: --format vllm, sglang, csv or aisbench")


def _decode(where: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}:{exc.lineno}: not JSON ({exc.msg})",
                         "import the file as tokenbench wrote it") from None


def _header(text: str) -> list[str]:
    return next(csv.reader(io.StringIO(text, newline="")), [])


# the JSON result and the recovery file -----------------------------------------------------------
def read_result(where: str, doc: dict) -> Parsed:
    """Each cell as `CellRow.to_json()` wrote it, with its requests; each config's facts as the run
    learnt them (`config_facts`; a file of one config: `server_facts`)."""
    cells = [(_config_of(c), _cell(where, n, c, CellRow.from_json), _requests(where, n, c))
             for n, c in enumerate(doc["cells"], start=1)]
    names = list(dict.fromkeys(name for name, _, _ in cells))
    known = doc.get("config_facts") or {}
    alone = doc.get("server_facts") if len(names) == 1 else None
    configs = {name: known.get(name) or alone or {} for name in names}
    source = SourceRun(str(doc.get("run_id")), str(doc.get("kind")), _dict(doc.get("spec")),
                       _dict(doc.get("environment")))
    return Parsed(configs, cells, source)


# export (JSON and CSV) ---------------------------------------------------------------------------
def read_export(where: str, doc: dict) -> Parsed:
    configs = {str(c.get("name")): _dict(c.get("facts")) for c in doc["configs"] if isinstance(c, dict)}
    cells = [(_config_of(c), _cell(where, n, c, export_cell), _requests(where, n, c))
             for n, c in enumerate(doc["cells"], start=1)]
    for name, _, _ in cells:
        configs.setdefault(name, {})
    run = doc["run"]
    source = SourceRun(str(run.get("id")), str(run.get("kind")), _dict(run.get("spec")),
                       _dict(run.get("environment")))
    return Parsed(configs, cells, source)


def export_cell(row: Mapping[str, Any]) -> CellRow:
    """An export row (the cell's columns beside its flat summary, formats/export.py) as a cell. The asked
    load and lengths are both columns and summary keys: in the summary when it has any figure at all."""
    rest = {k: v for k, v in row.items() if k not in NOT_SUMMARY}
    summary = {**{k: row[k] for k in SHARED if k in row}, **rest} if rest else {}
    columns = {k: row[k] for k in CellRow.JSON_COLUMNS if k in row}
    for k in ("input_len", "output_len"):                 # the summary's may be a mean (datasets)
        columns[k] = int(columns[k] or 0) if k in columns else columns.get(k)
    return CellRow.from_json({**columns, "summary": summary})


def read_cells_csv(where: str, text: str) -> Parsed:
    cells: list[tuple[str, CellRow, list[RequestRecord]]] = []
    for n, row in enumerate(csv.DictReader(io.StringIO(text, newline="")), start=2):
        at = f"{where}:{n}"
        typed = {k: _csv_value(at, k, v) for k, v in row.items() if k is not None and v}
        cells.append((_config_of(typed), _cell(at, None, typed, export_cell), []))
    if not cells:
        raise UsageError(f"{where} has a header but no cells", REFIX)
    return Parsed({name: {} for name, _, _ in cells}, cells, None)


def _csv_value(where: str, key: str, raw: str) -> Any:
    """One CSV value as its field's type: a cell column by CellRow's annotation, a list or dict of the
    summary from its JSON text; other summary values are left to CellSummary to read."""
    if key in SHARED:
        return _number_or_text(raw)
    try:
        if key in _column_types():
            return _column_types()[key].validate_python(raw)
        if key in _structured_keys():
            return json.loads(raw)
    except (ValidationError, json.JSONDecodeError) as exc:
        raise UsageError(f"{where}: column {key} is '{raw[:40]}', not what export writes there ({exc})",
                         REFIX) from None
    return raw if key in _summary_keys() else _number_or_text(raw)


@cache
def _column_types() -> dict[str, TypeAdapter]:
    hints = get_type_hints(CellRow)
    return {name: TypeAdapter(hints[name]) for name in CellRow.JSON_COLUMNS}


@cache
def _summary_keys() -> frozenset[str]:
    return frozenset(CellSummary.model_fields) | {k for g in GROUPS.values() for k in g.key_names()}


@cache
def _structured_keys() -> frozenset[str]:
    """Summary keys whose values are lists or dicts (written as JSON text in a CSV)."""
    own = {k for k, f in CellSummary.model_fields.items() if _structured(f.annotation)}
    return frozenset(own | {g.PREFIX + k for g in GROUPS.values() for k, f in g.model_fields.items()
                            if _structured(f.annotation)})


def _structured(t: Any) -> bool:
    origin = get_origin(t)
    return origin in (dict, list) or (origin in (Union, UnionType) and any(_structured(a) for a in get_args(t)))


def _number_or_text(raw: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


# shared -------------------------------------------------------------------------------------------
def _config_of(cell: Mapping[str, Any]) -> str:
    return str(cell.get("config") or DEFAULT_CONFIG)


def _cell(where: str, n: int | None, cell: Any, reader) -> CellRow:
    try:
        return reader(cell)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        at = f"{where}: cell {n}" if n else where
        raise UsageError(f"{at} is not as tokenbench writes it ({type(exc).__name__}: {exc})", REFIX) from None


def _requests(where: str, n: int, cell: Mapping[str, Any]) -> list[RequestRecord]:
    """The cell's requests (store/records.from_dict; the per-request figures export adds are derived
    again from the record)."""
    try:
        return [from_dict(r) for r in cell.get("requests") or []]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{where}: a request of cell {n} is not as tokenbench writes it "
                         f"({type(exc).__name__}: {exc})", REFIX) from None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}
