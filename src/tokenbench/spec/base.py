"""Shared pydantic base: unknown keys are errors, values are validated on assignment, and every number is
one a run can use: an integer fits 64 bits and a float is finite (`inf`, `nan` and 1e400 are refused where
they are given, in one line, not met later as an overflow deep in a run)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

INT_MAX = 2**63 - 1


def usable_number(value: Any) -> Any:
    """`value` unchanged; ValueError for an integer beyond 64 bits or a float that is not finite, found in
    it or in the lists, tuples and dicts it holds."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) > INT_MAX:
        raise ValueError(f"{value:.3g} is too large: at most {INT_MAX:,}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number: give a number")
    for item in value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ():
        usable_number(item)
    return value


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    _usable = field_validator("*", mode="after")(usable_number)
