"""What to measure: target, workload, load cells and SLOs. Pure data, no I/O."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tokenbench.spec.base import StrictModel


class Target(StrictModel):
    base_url: str = Field(description="server root, e.g. http://127.0.0.1:8000")
    model: str | None = Field(None, description="model name; default: the first one /v1/models lists")
    api_key_env: str | None = Field(None, description="environment variable that holds the API key")
    api_key_file: str | None = Field(None, description="file whose first line is the API key")
    timeout_s: float = Field(600.0, gt=0, description="per-request timeout (whole request)")


class Workload(StrictModel):
    kind: Literal["random"] = "random"
    api: Literal["completions", "chat"] = "completions"
    input_len: int = Field(gt=0, description="exact prompt tokens")
    output_len: int = Field(gt=0, description="exact output tokens (max_tokens=min_tokens, ignore_eos)")
    seed: int = 0
    tokenizer_path: str | None = Field(None, description="local tokenizer dir; default: ask the server")


class SLO(StrictModel):
    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    e2el_ms: float | None = Field(None, gt=0)

    def is_empty(self) -> bool:
        return self.ttft_ms is None and self.tpot_ms is None and self.e2el_ms is None


class Load(StrictModel):
    """One cell's load: closed-loop concurrency or an open-loop request rate."""

    concurrency: int | None = Field(None, gt=0, description="closed loop: requests in flight")
    request_rate: float | None = Field(None, gt=0, description="open loop: requests/s")
    arrival: Literal["poisson", "constant"] = "poisson"
    max_concurrency: int | None = Field(None, gt=0, description="cap on in-flight requests in rate mode")
    num_prompts: int | None = Field(None, gt=0)
    duration_s: float | None = Field(None, gt=0)
    warmup_requests: int | None = Field(None, ge=0, description="default: the cell's concurrency")

    @model_validator(mode="after")
    def _one_mode(self) -> "Load":
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("give exactly one of concurrency or request_rate")
        if self.num_prompts is None and self.duration_s is None:
            raise ValueError("give num_prompts or duration_s")
        return self

    @property
    def label(self) -> str:
        if self.concurrency is not None:
            return f"c={self.concurrency}"
        return f"rate={self.request_rate:g}/s"

    @property
    def in_flight_cap(self) -> int | None:
        return self.concurrency if self.concurrency is not None else self.max_concurrency

    def warmup_count(self) -> int:
        if self.warmup_requests is not None:
            return self.warmup_requests
        return self.in_flight_cap or 1


class BenchSpec(StrictModel):
    target: Target
    workload: Workload
    cells: list[Load] = Field(min_length=1)
    slo: SLO = Field(default_factory=SLO)
    allow_length_mismatch: bool = False
    max_error_rate: float = Field(0.0, ge=0, le=1, description="fail a cell above this failed fraction")
