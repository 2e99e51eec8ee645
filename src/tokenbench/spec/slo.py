"""Limits on a cell's statistics (`ttft:p99<=2000`) and named tiers of them, what a capacity search
answers against (`--find-capacity`, docs/metrics.md "Capacity search"). Pure data, no I/O.

A limit is METRIC:STAT OP VALUE: a latency (ttft, tpot, itl, e2el; ms) with a statistic (mean, p50,
p90, p95, p99) under `<=` or `<` a bound; or `goodput:fraction>=X`, the share of requests meeting every
per-request SLO (`--slo ttft=500,...`). A sessions or trajectories cell also has job limits, over its complete
jobs (sessions): `job` (a job's completion time, first send to last token), `job_ttft` and `job_tpot` (its worst
turn's TTFT and TPOT); the request limits then judge every turn. A tier is a named set of limits that must all hold. MLPerf's
published server and interactive limits are built in (PRESETS; sources in docs/metrics.md)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_serializer, model_validator

from tokenbench.spec.base import StrictModel

LimitMetric = Literal["ttft", "tpot", "itl", "e2el", "goodput", "job", "job_ttft", "job_tpot"]
JobMetric = Literal["job", "job_ttft", "job_tpot"]
JOB_METRICS: tuple[JobMetric, ...] = ("job", "job_ttft", "job_tpot")
LimitStat = Literal["mean", "p50", "p90", "p95", "p99", "fraction"]
LATENCY_STATS = ("mean", "p50", "p90", "p95", "p99")
_TEXT = re.compile(r"^\s*(?P<metric>\w+)\s*:\s*(?P<stat>\w+)\s*(?P<op><=|<|>=)\s*(?P<value>[0-9.eE+-]+)\s*(ms)?\s*$")
FORM = ("METRIC:STAT<=MS, e.g. ttft:p99<=2000 (metrics ttft, tpot, itl, e2el; sessions' jobs: job, job_ttft, "
        "job_tpot; stats mean, p50, p90, p95, p99)")


class Limit(StrictModel):
    """One limit on a statistic of a cell; its text form is `ttft:p99<=2000`."""

    metric: LimitMetric
    stat: LimitStat
    op: Literal["<=", "<", ">="] = "<="
    value: float = Field(gt=0, le=1e9)         # ms (a latency), or a share (goodput)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        return parse_limit(data) if isinstance(data, str) else data

    @model_validator(mode="after")
    def _consistent(self) -> Limit:
        if self.metric == "goodput":
            if self.stat != "fraction" or self.op != ">=" or self.value > 1:
                raise ValueError(f"{self.text}: goodput takes fraction>=X with 0 < X <= 1 (e.g. goodput:fraction>=0.9)")
        elif self.stat not in LATENCY_STATS or self.op == ">=":
            raise ValueError(f"{self.text}: a latency limit is {FORM}")
        return self

    @model_serializer
    def _as_text(self) -> str:
        """Stored and dumped as its text form (`ttft:p99<=2000`), which it is read back from."""
        return self.text

    @property
    def text(self) -> str:
        return f"{self.metric}:{self.stat}{self.op}{self.value:g}"

    @property
    def upper(self) -> bool:
        """The statistic must stay below the bound (latencies), not above it (goodput)."""
        return self.op != ">="

    def holds(self, observed: float) -> bool:
        if self.op == "<=":
            return observed <= self.value
        if self.op == "<":
            return observed < self.value
        return observed >= self.value

    def margin(self, observed: float) -> float:
        """How far the observed statistic is inside the limit, as a share of the bound (negative: outside)."""
        return (self.value - observed) / self.value if self.upper else (observed - self.value) / self.value


def parse_limit(text: str) -> dict[str, Any]:
    m = _TEXT.match(text)
    if m is None:
        raise ValueError(f"'{text}' is not a limit: write {FORM}")
    try:
        value = float(m["value"])
    except ValueError:
        raise ValueError(f"'{text}': '{m['value']}' is not a number") from None
    return {"metric": m["metric"].lower(), "stat": m["stat"].lower(), "op": m["op"], "value": value}


def parse_limits(text: str) -> list[Limit]:
    """`ttft:p99<=2000,tpot:p99<=200` -> limits (ValueError with the cause)."""
    return [Limit.model_validate(part) for part in text.split(",") if part.strip()]


# MLPerf Inference server-scenario limits (ms, p99 of TTFT and of per-request TPOT; LoadGen passes at <=):
# mlcommons/inference loadgen/mlperf.conf (ttft_latency / tpot_latency) and the submission checker's
# LLM_LATENCY_LIMITS (tools/submission/submission_checker/constants.py). docs/metrics.md cites them.
MLPERF: dict[str, tuple[float, float]] = {
    "llama2-70b-server": (2000, 200), "llama2-70b-interactive": (450, 40),
    "mixtral-8x7b-server": (2000, 200),
    "llama3.1-405b-server": (6000, 175), "llama3.1-405b-interactive": (4500, 80),
    "llama3.1-8b-server": (2000, 100), "llama3.1-8b-interactive": (500, 30),
    "deepseek-r1-server": (2000, 80), "deepseek-r1-interactive": (1500, 15),
    "gpt-oss-120b-server": (3000, 80), "gpt-oss-120b-interactive": (2000, 15),
}
PRESETS: dict[str, str] = {f"mlperf-{k}": f"ttft:p99<={a:g},tpot:p99<={b:g}" for k, (a, b) in MLPERF.items()}


class Tier(StrictModel):
    """A named set of limits that must all hold; a preset's name alone (`mlperf-llama2-70b-server`) is
    that preset."""

    name: str = Field(min_length=1)
    limits: list[Limit] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if isinstance(data, str):
            if data not in PRESETS:
                raise ValueError(f"no SLO preset '{data}': use one of {', '.join(PRESETS)}, or NAME=LIMIT,LIMIT")
            return {"name": data, "limits": PRESETS[data].split(",")}
        if isinstance(data, dict) and isinstance(data.get("limits"), str):
            return {**data, "limits": [p for p in data["limits"].split(",") if p.strip()]}
        return data

    @property
    def text(self) -> str:
        return ",".join(limit.text for limit in self.limits)


def parse_tiers(text: str) -> list[Tier]:
    """`--slo-tier`: tiers separated by `;`, each a preset name or NAME=LIMIT,LIMIT (ValueError with the
    cause)."""
    out: list[Tier] = []
    for part in (p.strip() for p in text.split(";")):
        name, sep, limits = part.partition("=")
        if part:
            out.append(Tier.model_validate({"name": name.strip(), "limits": limits} if sep else part))
    return out
