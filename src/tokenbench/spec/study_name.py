"""The name of a study nobody named: its target and its loads, e.g. `127.0.0.1:8000 c=1,8,32`, so that the
runs listing, the report's title and `compare`'s verdicts say what was measured, not "bench"."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenbench.spec.study import StudySpec


def derived_name(spec: StudySpec) -> str:
    return f"{target_name(spec.target.base_url, spec.target.profile)} {loads_name(spec)}".strip()


def target_name(base_url: str | None, profile: str | None) -> str:
    """The server's address without its scheme (`127.0.0.1:8000`), or the profile's name (a profile file: its
    stem)."""
    if base_url:
        return base_url.split("://", 1)[-1].rstrip("/")
    return Path(profile).stem if profile and profile.endswith((".yaml", ".yml")) else profile or ""


def _numbers(values: list[int] | list[float]) -> str:
    return ",".join(f"{v:g}" for v in values)


def loads_name(spec: StudySpec) -> str:
    """The load axes as the cells' keys spell them: `c=1,8`, `rate=4/s,max=64`, `users=4`, `sessions=0.5/s`,
    `replay`, or the capacity search (`concurrency search`)."""
    if spec.find_capacity:
        return f"{spec.find_capacity} search"
    if spec.workload.kind == "trace":
        return "replay"
    cap = f",max={spec.max_concurrency}" if spec.max_concurrency else ""
    parts = [f"c={_numbers(spec.concurrency)}" if spec.concurrency else "",
             f"rate={_numbers(spec.rates)}/s{cap}" if spec.rates else "",
             f"c={spec.max_concurrency}" if spec.max_concurrency and not spec.rates and not spec.concurrency else "",
             f"users={_numbers(spec.users)}" if spec.users else "",
             f"sessions={_numbers(spec.session_rates)}/s" if spec.session_rates else ""]
    return " ".join(p for p in parts if p)
