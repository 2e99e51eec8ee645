"""Sweep specs: target, (input, output) pairs x concurrency/rates x server-config variants x repeats."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tokenbench.spec.base import StrictModel
from tokenbench.spec.bench import SLO

SHORT_KEYS = {"tp": "parallelism.tp", "dp": "parallelism.dp", "slots": "parallelism.slots",
              "threads": "parallelism.threads", "ctx": "parallelism.ctx"}


class SweepTarget(StrictModel):
    base_url: str | None = Field(None, description="an already running server")
    profile: str | None = Field(None, description="a profile name or path, deployed per server config")
    set: list[str] = Field(default_factory=list, description="profile overrides applied to every config")
    model: str | None = None
    api_key_env: str | None = None
    timeout_s: float = Field(600.0, gt=0)

    @model_validator(mode="after")
    def _one(self) -> "SweepTarget":
        if (self.base_url is None) == (self.profile is None):
            raise ValueError("give exactly one of base_url or profile")
        return self


class Requests(StrictModel):
    """Requests per cell: max(per_concurrency x concurrency, min), or a duration."""

    per_concurrency: int = Field(4, ge=1)
    min: int = Field(16, ge=1)
    duration_s: float | None = Field(None, gt=0)


class SweepSpec(StrictModel):
    name: str = "sweep"
    target: SweepTarget
    pairs: list[tuple[int, int]] = Field(min_length=1, description="[input, output] token pairs")
    concurrency: list[int] = Field(default_factory=list)
    rates: list[float] = Field(default_factory=list)
    max_concurrency: int | None = Field(None, gt=0)
    vary: dict[str, list[Any]] = Field(default_factory=dict,
                                       description="server-config axes: profile key -> values (tp, slots, ...)")
    repeats: int = Field(1, ge=1)
    requests: Requests = Field(default_factory=Requests)
    warmup_requests: int | None = Field(None, ge=0)
    api: Literal["completions", "chat"] = "completions"
    seed: int = 0
    kv_capacity: int | None = Field(None, gt=0, description="override the KV capacity read from the server")
    slo: SLO = Field(default_factory=SLO)
    allow_length_mismatch: bool = False
    max_error_rate: float = Field(0.0, ge=0, le=1)
    stop_on_saturation: bool = Field(False, description="skip higher concurrencies once throughput stops rising")
    monitor_interval_s: float = Field(1.0, gt=0)

    @field_validator("pairs")
    @classmethod
    def _positive(cls, v: list[tuple[int, int]]) -> list[tuple[int, int]]:
        for a, b in v:
            if a <= 0 or b <= 0:
                raise ValueError(f"pair [{a}, {b}] must have positive input and output lengths")
        return v

    @field_validator("concurrency")
    @classmethod
    def _conc(cls, v: list[int]) -> list[int]:
        if any(c <= 0 for c in v):
            raise ValueError("concurrency values must be positive")
        return v

    @field_validator("vary")
    @classmethod
    def _axes(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in v.items():
            if not values:
                raise ValueError(f"axis '{key}' is empty: give at least one value or remove it")
        return {SHORT_KEYS.get(k, k): vals for k, vals in v.items()}

    @model_validator(mode="after")
    def _load_axis(self) -> "SweepSpec":
        if not self.concurrency and not self.rates:
            raise ValueError("the concurrency axis is empty: give 'concurrency: [1, 8, ...]' or 'rates: [...]'")
        if self.vary and self.target.base_url:
            raise ValueError("'vary' needs a profile target (tokenbench must relaunch the server per config)")
        return self
