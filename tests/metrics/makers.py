"""Who makes a cell's summary and verdict, recorded while the code runs (the one-maker rule, checked by
behaviour: tests/metrics/test_one_maker.py).

A profile hook (`sys.setprofile`, and `threading.setprofile` for threads started meanwhile) sees every Python
call. A call that builds or copies a `CellSummary` (pydantic's `__init__`, `model_validate*`, `model_construct`,
`model_copy`, `__copy__`, `__deepcopy__`, `__setstate__`), builds a `Verdict` (its `__init__`, which
`dataclasses.replace` calls too) or copies either (`copy._reconstruct`) is put down to its maker: the first
caller outside pydantic, dataclasses and copy that is not a method of the record's own class, so whatever name
the caller gives the class or the record (an alias, a receiver called `s`), `summary.with_(...)` and
`verdict.failed(...)` are the caller's amendments. A group's `model_copy` (an amendment by string) is put down
to its direct caller, its own named methods included."""

from __future__ import annotations

import copy
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from types import FrameType
from typing import Any

from pydantic import BaseModel

from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import Group
from tokenbench.metrics.verdict import Verdict

MACHINERY = frozenset({"pydantic", "pydantic_core", "dataclasses", "copy", "copyreg", "functools"})
# the allowed makers (docs/architecture.md, "One cell, end to end"): a module, or a package ending in "."
ALLOWED = {"CellSummary": ("tokenbench.metrics.summary", "tokenbench.metrics.cell", "tokenbench.store.",
                           "tokenbench.formats."),
           "Verdict": ("tokenbench.metrics.verdict",),
           "group": ("tokenbench.metrics.",)}


def _code(f: Any) -> Any:
    return getattr(f, "__func__", f).__code__


# id(code) -> the entry point it is; the codes are kept alive by the classes that hold them
WATCHED: dict[int, str] = {id(_code(getattr(BaseModel, n))): n for n in (
    "__init__", "model_validate", "model_validate_json", "model_validate_strings", "model_construct", "model_copy",
    "__copy__", "__deepcopy__", "__setstate__")}
WATCHED[id(Verdict.__init__.__code__)] = "Verdict.__init__"
WATCHED[id(copy._reconstruct.__code__)] = "copy"        # type: ignore[attr-defined]


@dataclass(frozen=True)
class Made:
    record: str          # CellSummary | Verdict | group (a group's model_copy)
    kind: str            # the group's class, else the record's
    how: str             # the entry point reached: __init__, model_copy, model_validate, ...
    module: str          # the maker: its module ...
    function: str        # ... and its function's qualified name

    def allowed(self) -> bool:
        return any(self.module == a or (a.endswith(".") and self.module.startswith(a)) for a in ALLOWED[self.record])


def _subject(frame: FrameType) -> Any:
    local = frame.f_locals
    return local.get("self", local.get("cls", local.get("x")))


def _record(subject: Any, how: str) -> str | None:
    t = subject if isinstance(subject, type) else type(subject)
    if issubclass(t, CellSummary):
        return "CellSummary"
    if issubclass(t, Verdict):
        return "Verdict"
    return "group" if issubclass(t, Group) and how == "model_copy" else None


def _module(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", "?"))


def _own(frame: FrameType, t: type) -> bool:
    """A method of the record's own class (or a base): `CellSummary.with_`, `Verdict.failed`."""
    owner = frame.f_code.co_qualname.split(".")[0]
    return any(c.__name__ == owner and c.__module__ == _module(frame) for c in t.__mro__)


NESTED = "nested"


def _maker(frame: FrameType, t: type, skip_own: bool) -> tuple[str, str]:
    """The maker's module and function (NESTED when the call is made inside another watched one: `model_copy`
    copies with `__copy__`, that one is the make; "?" when no frame is left)."""
    f = frame.f_back
    while f is not None and (_module(f).split(".")[0] in MACHINERY or (skip_own and _own(f, t))):
        if id(f.f_code) in WATCHED:
            return NESTED, NESTED
        f = f.f_back
    return (_module(f), f.f_code.co_qualname) if f is not None else ("?", "?")


class Makers:
    """Every make and amendment of a summary, a verdict or a group (by model_copy) while it is entered."""

    def __init__(self) -> None:
        self.seen: Counter[Made] = Counter()
        self._before: tuple[Any, Any] = (None, None)

    def _hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or id(frame.f_code) not in WATCHED:
            return
        how = WATCHED[id(frame.f_code)]
        subject = _subject(frame)
        record = _record(subject, how)
        if record is None:
            return
        t = subject if isinstance(subject, type) else type(subject)
        module, function = _maker(frame, t, skip_own=record != "group")
        if module != NESTED:
            self.seen[Made(record, t.__name__, how, module, function)] += 1

    def __enter__(self) -> Makers:
        self._before = (sys.getprofile(), threading.getprofile())
        sys.setprofile(self._hook)
        threading.setprofile(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(self._before[0])
        threading.setprofile(self._before[1])

    def outside(self) -> list[Made]:
        """The makes and amendments by a maker the rule does not allow."""
        return sorted((m for m in self.seen if not m.allowed()), key=str)

    def makers(self, record: str) -> set[tuple[str, str]]:
        return {(m.module, m.function) for m in self.seen if m.record == record}
