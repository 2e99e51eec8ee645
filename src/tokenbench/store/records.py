"""RequestRecord <-> database row and <-> JSON result, without pickles, from ONE table derived from the
record's own fields: a field added to RequestRecord is stored and read back without touching this file
(its column comes with a schema migration, store/schema.py; a test fails until it does).

Each field is stored under its own name and value, except:
- times of the request's chunks are kept relative to its send (`token_times_ns` -> `token_offsets`,
  `first_content_ns` -> `first_content_offset_ns`), so they stay small and read the same on any clock;
- lists are JSON text in the database (`..._json` columns);
- `index` is the column `idx`.
The JSON result (and `export`) writes every field but the generated text and the worker number."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec

from tokenbench.client.records import RequestRecord

_encode = msgspec.json.Encoder().encode
_ints = msgspec.json.decode          # what json.loads gives for these lists of ints, faster

OFFSETS = {"token_times_ns": "token_offsets_ns", "first_content_ns": "first_content_offset_ns"}
COLUMN_NAMES = {"index": "idx", "token_times_ns": "token_offsets_json", "token_counts": "token_counts_json"}
NOT_IN_JSON = ("text", "worker")


@dataclass(frozen=True)
class Field:
    """One RequestRecord field: its column, its JSON key (None: not written there), and how its value
    is written (`put`) and read back (`take`, given the value and the record's send time)."""

    name: str
    column: str
    key: str | None
    put: Callable[[Any, int], Any]
    take: Callable[[Any, int], Any]


def _same(v: Any, sent: int) -> Any:
    return v


def _offset(v: int | None, sent: int) -> int | None:
    return None if v is None else v - sent


def _absolute(v: int | None, sent: int) -> int | None:
    return None if v is None else v + sent


def _flag(v: Any, sent: int) -> bool:
    return bool(v)


def _field(f: dataclasses.Field) -> Field:
    relative = OFFSETS.get(f.name)
    column = COLUMN_NAMES.get(f.name, relative or f.name)
    key = None if f.name in NOT_IN_JSON else relative or f.name
    if f.name == "token_times_ns":
        return Field(f.name, column, key, lambda v, s: [t - s for t in v], lambda v, s: [s + o for o in v])
    if relative:
        return Field(f.name, column, key, _offset, _absolute)
    return Field(f.name, column, key, _same, _flag if f.type in ("bool", bool) else _same)


FIELDS = tuple(_field(f) for f in dataclasses.fields(RequestRecord))
REQUEST_COLUMNS = ("cell_id", *(f.column for f in FIELDS))
_LISTS = {f.column for f in FIELDS if f.column.endswith("_json")}


_values = attrgetter(*(f.name for f in FIELDS))            # read in C, in the columns' order
_ROW_PUT = [(i, f.put, f.column in _LISTS) for i, f in enumerate(FIELDS) if f.put is not _same or f.column in _LISTS]


def to_row(cell_id: int, r: RequestRecord) -> tuple:
    values = [cell_id, *_values(r)]
    for i, put, as_json in _ROW_PUT:
        v = put(values[i + 1], r.sent_ns)
        values[i + 1] = _encode(v).decode() if as_json else v
    return tuple(values)


def from_row(row: dict) -> RequestRecord:
    sent = row["sent_ns"]
    return RequestRecord(**{f.name: f.take(_ints(row[f.column]) if f.column in _LISTS else row[f.column], sent)
                            for f in FIELDS})


_IN_JSON = [f for f in FIELDS if f.key is not None]
_JSON_KEYS = [f.key for f in _IN_JSON]
_json_values = attrgetter(*(f.name for f in _IN_JSON))      # read in C, in the keys' order
_JSON_PUT = [(i, f.put) for i, f in enumerate(_IN_JSON) if f.put is not _same]


def to_dict(r: RequestRecord) -> dict:
    """JSON form for result files: times of chunks relative to the request's send, in ns."""
    values = list(_json_values(r))
    for i, put in _JSON_PUT:
        values[i] = put(values[i], r.sent_ns)
    return dict(zip(_JSON_KEYS, values, strict=True))


def from_dict(d: dict) -> RequestRecord:
    """The inverse of `to_dict` (the text and worker number are not in the JSON result). A field the
    dict lacks (a file of an older tokenbench) takes its default; other keys (export's per-request
    figures) are left out."""
    sent = d["sent_ns"]
    return RequestRecord(**{f.name: f.take(d[f.key], sent) for f in FIELDS if f.key is not None and f.key in d})


def json_safe(obj):
    """JSON has no NaN or infinity: null instead (recursively through dicts, lists and tuples). A figure
    that is not a number is "not defined", and null is how every file and the database say so."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def dumps(obj: Any, **options: Any) -> str:
    """Standard JSON (RFC 8259), NaN and infinity written as null: what the results database and every file
    tokenbench writes hold, so SQLite's JSON functions of any version read it (3.40 rejects NaN)."""
    return json.dumps(json_safe(obj), allow_nan=False, **options)
