"""Small value readers shared by the offline parsers. They never raise: unknown is `None`."""

from __future__ import annotations

import math
import re

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_MISSING = {"", "-", "na", "n/a", "[n/a]", "not supported", "[not supported]", "unknown", "[unknown]"}


def number(text: str) -> float | None:
    """The leading number of `text` ("106.56 W" -> 106.56); None for N/A, '-', empty or no number."""
    value = text.strip()
    if value.lower() in _MISSING:
        return None
    match = _NUMBER.match(value)
    if match is None:
        return None
    result = float(match.group(0))
    return result if math.isfinite(result) else None


def integer(text: str) -> int | None:
    """`text` as a whole number, or None when it is not exactly one."""
    value = text.strip()
    return int(value) if value.isascii() and value.isdigit() else None


def clip(text: str, limit: int = 80) -> str:
    """A short, printable head of some input, for error messages."""
    head = text.strip().splitlines()[0] if text.strip() else ""
    head = "".join(ch if ch.isprintable() else "?" for ch in head)
    return head if len(head) <= limit else head[: limit - 3] + "..."
