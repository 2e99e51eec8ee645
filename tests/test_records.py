"""Wide records are built by keyword: every dataclass of the package with WIDE or more fields takes at most one
of them by position (its key, as `Flag("seed", vllm=...)`), so no call can swap two of a dozen positional
arguments silently (`Measured` took 12, `CellResult` 12, `CellJob` 11; 71 calls passed 7 or more)."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import pytest

import tokenbench
from tokenbench.cli.flags import Flag
from tokenbench.load.cell import CellJob, CellResult
from tokenbench.metrics.cell import Measured

WIDE = 7


def _records() -> dict[str, type]:
    """Every dataclass the package defines, by its dotted name (every module imported)."""
    out: dict[str, type] = {}
    for info in pkgutil.walk_packages(tokenbench.__path__, "tokenbench."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if isinstance(obj, type) and obj.__module__ == info.name and dataclasses.is_dataclass(obj):
                out[f"{info.name}.{obj.__qualname__}"] = obj
    return out


def _positional(record: type) -> list[str]:
    return [f.name for f in dataclasses.fields(record) if f.init and not f.kw_only]


def _wide(record: type) -> bool:
    return sum(f.init for f in dataclasses.fields(record)) >= WIDE


def test_every_wide_record_is_built_by_keyword():
    wide = {name: record for name, record in _records().items() if _wide(record)}
    assert {Measured, CellResult, CellJob, Flag} <= set(wide.values())       # the scan sees the package's records
    assert {name: _positional(r) for name, r in wide.items() if len(_positional(r)) > 1} == {}


def test_a_positional_call_is_refused():
    with pytest.raises(TypeError, match="positional"):
        CellJob(*[None] * 11)       # type: ignore[misc]
    assert _positional(Flag) == ["key"]
