"""`--find-capacity`: per (pair, server config), the highest concurrency whose cell meets the SLOs.

A generator that receives results: it yields a concurrency to try and is sent whether that cell met
the SLOs. Doubling from 1 until a cell fails (or `max_c`), then bisection between the last pass and the
first fail. It returns (capacity, first failing concurrency); either may be None.
"""

from __future__ import annotations

from collections.abc import Generator

from tokenbench.spec.bench import SLO
from tokenbench.store.rows import CellRow


def search(max_c: int) -> Generator[int, bool, tuple[int | None, int | None]]:
    c, best, worst = 1, None, None
    while c <= max_c:
        if (yield c):
            best, c = c, c * 2
        else:
            worst = c
            break
    if best is None or worst is None:
        return best, worst
    lo, hi = best, worst
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if (yield mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def meets(row: CellRow, slo: SLO, attainment: float) -> bool:
    """A cell meets the SLOs when it is ok and at least `attainment` of its requests meet every SLO."""
    fraction = row.summary.goodput_fraction
    return row.status == "ok" and fraction is not None and fraction >= attainment


def describe(label: str, best: int | None, worst: int | None, max_c: int) -> str:
    if best is None:
        return f"capacity {label}: none (concurrency 1 already misses the SLOs)"
    if worst is None:
        return f"capacity {label}: at least {best} (every level up to the search limit {max_c} met the SLOs)"
    return f"capacity {label}: concurrency {best} (meets the SLOs; {worst} does not)"
