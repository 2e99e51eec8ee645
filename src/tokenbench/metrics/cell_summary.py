"""A cell's summary as a typed model. The figures `vllm bench serve` reports carry vLLM's names and are
typed fields; every other key of `summarize` (cache, images, steady state, client health, monitor
annotations) is kept as an extra, so `to_dict()` gives back exactly the keys and values stored in the
results database and the JSON results. Formulas: docs/metrics.md."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

Number = int | float
LATENCIES = ("ttft", "tpot", "itl", "e2el")
STATISTICS = ("mean", "median", "std", "min", "max", "p50", "p90", "p95", "p99")


class _Figures(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    concurrency: int | None = None           # the cell: closed loop
    request_rate: float | None = None        # open loop, requests/s
    max_concurrency: int | None = None
    input_len: Number | None = None          # asked (datasets: the mean asked)
    output_len: Number | None = None
    num_prompts: int = 0                     # measured requests
    completed: int = 0
    failed: int = 0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    duration: float | None = None            # seconds
    request_throughput: float | None = None  # completed / duration
    request_goodput: float | None = None     # requests meeting every SLO / duration
    output_throughput: float | None = None   # tokens/s
    total_token_throughput: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored form: the keys given, vLLM's names, same values."""
        return self.model_dump(exclude_unset=True)


_STATS: dict[str, Any] = {f"{s}_{m}_ms": (float | None, None) for m in LATENCIES for s in STATISTICS}
CellSummary = create_model("CellSummary", __base__=_Figures, __doc__=__doc__, **_STATS)


def typed(summary: dict[str, Any]) -> _Figures:
    """The typed view of a stored or fresh summary dict (unknown keys kept as extras)."""
    return CellSummary.model_validate(summary)
