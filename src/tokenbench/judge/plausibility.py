"""Is a result physically possible? The decode roofline from model size and device limits.

Decoding one token of one stream reads every weight once, so with W = params x bytes-per-param bytes of
weights split over d devices of memory bandwidth B:

    per-stream output tokens/s  <=  d x B / W                         (batch 1, or any batch: per step)
    aggregate output tokens/s   <=  min(c x d x B / W,  d x F / (2 x params))   at concurrency c
    (input + output) tokens/s   <=  d x F / (2 x params)              every token costs >= 2 FLOP/param

with F the dense peak FLOP/s. These are upper bounds: KV-cache reads, activations and efficiency below
100 % only lower the real limit, so a result above a bound is impossible, not merely fast.

A mixture-of-experts model reads (and computes with) only its active parameters per token, so `params`
is the active count; speculative decoding verifies up to k drafted tokens + 1 per weight read, so the
decode bounds are k + 1 times higher (the compute bound is not: every output token still costs the
target model 2 FLOP per active parameter). Where the run does not say what it needs (a MoE model's
active parameters, the draft length) the configuration is "not checked", never "impossible".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tokenbench.judge import hardware
from tokenbench.judge import model_facts as mf
from tokenbench.judge.views import ConfigInfo, RunData
from tokenbench.metrics.cell_summary import known
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store.rows import CellRow

DTYPE_BYTES = mf.DTYPE_BYTES


@dataclass(frozen=True)
class ModelSize:
    params_b: float                     # parameters read and computed with per token (MoE: the active ones)
    bytes_per_param: float
    total_params_b: float | None = None  # MoE: all parameters (shown, not in the bounds)
    kv_bytes: float | None = None        # KV-cache element width (shown: KV reads only lower the bound)
    spec_tokens: int = 0                 # speculative decoding: drafted tokens verified per weight read

    @property
    def weights_gb(self) -> float:
        return self.params_b * self.bytes_per_param


@dataclass(frozen=True)
class Roofline:
    device: hardware.Device
    devices: int
    size: ModelSize

    @property
    def per_stream(self) -> float:
        return (1 + self.size.spec_tokens) * self.devices * self.device.bandwidth_gbs / self.size.weights_gb

    @property
    def compute(self) -> float:
        return self.devices * self.device.bf16_tflops * 1e12 / (2 * self.size.params_b * 1e9)

    def aggregate(self, concurrency: int | None) -> float:
        return min(concurrency * self.per_stream, self.compute) if concurrency else self.compute


@dataclass(frozen=True)
class Unknown:
    """Why a config's results are not checked: what the run does not say."""

    reason: Literal["no_size", "no_active", "spec_unknown", "no_hw"]
    total_params_b: float | None = None     # no_active: the MoE model's size
    known_hardware: tuple[str, ...] = ()    # no_hw: the devices the table holds


How = Literal["measured", "derived", "tpot", "total", "total_derived"]


@dataclass(frozen=True)
class Rate:
    """A measured rate and how it was had: reported, or derived from the request rate and lengths."""

    value: float
    how: How
    rps: float | None = None          # derived: the request rate it was derived from
    tpot_ms: float | None = None      # per stream: the TPOT it was derived from


@dataclass
class Finding:
    cell: CellRow
    check: Literal["per_stream", "aggregate", "compute"]
    measured: Rate
    bound: float
    telling_latency: bool = False     # derived from the request rate: the latency it implies says more

    @property
    def times(self) -> float:
        return self.measured.value / self.bound


@dataclass
class ConfigCheck:
    config: ConfigInfo
    roofline: Roofline | None
    skipped: Unknown | None = None
    findings: list[Finding] = field(default_factory=list)
    cells: int = 0


@dataclass(frozen=True, kw_only=True)
class Overrides:
    hardware: str | None = None
    hardware_file: str | None = None
    params_b: float | None = None
    bytes_per_param: float | None = None
    devices: int | None = None
    active_params_b: float | None = None
    spec_tokens: int | None = None


def model_size(profile: Profile | None, facts: ServerFacts, ov: Overrides = Overrides()) -> ModelSize | None:
    size = size_or_reason(profile, facts, ov)
    return size if isinstance(size, ModelSize) else None


def size_or_reason(profile: Profile | None, facts: ServerFacts, ov: Overrides = Overrides()) -> ModelSize | Unknown:
    """The model as the bounds need it, or what is unknown."""
    m = profile.model if profile else None
    params = ov.params_b or facts.params_b or (m.params_b if m else None)
    if params is None and facts.n_params:
        params = facts.n_params / 1e9
    bpp = ov.bytes_per_param or facts.bytes_per_param or (m.bytes_per_param if m else None) or mf.weight_bytes(profile)
    if not (params and bpp):
        return Unknown("no_size")
    active, moe = mf.active_params(profile, facts)
    active = ov.active_params_b or active
    if moe and active is None:
        return Unknown("no_active", float(params))
    spec, k = mf.speculative_tokens(profile, facts)
    k = ov.spec_tokens if ov.spec_tokens is not None else k
    if spec and k is None:
        return Unknown("spec_unknown")
    return ModelSize(float(active or params), float(bpp), float(params) if active else None, mf.kv_bytes(profile),
                     k or 0)


def roofline_for(run: RunData, cfg: ConfigInfo, ov: Overrides) -> Roofline | Unknown:
    size = size_or_reason(cfg.profile, cfg.facts, ov)
    if not isinstance(size, ModelSize):
        return size
    name = ov.hardware or hardware.hardware_name(cfg.profile, cfg.facts, run.environment)
    dev = hardware.lookup(name, ov.hardware_file, run.environment.get("cpu_count"))
    if dev is None:
        return Unknown("no_hw", known_hardware=tuple(hardware.known(ov.hardware_file)))
    return Roofline(dev, ov.devices or hardware.device_count(cfg.profile, cfg.facts), size)


def _output_tps(c: CellRow) -> Rate | None:
    """Reported output tokens/s, or request rate x output length (also when an importer derived it)."""
    rps, out = known(c.summary.request_throughput), known(c.summary.output_throughput)
    derived = any(str(d).startswith("output_throughput") for d in c.summary.derived or [])
    if out is not None and not (derived and rps is not None):
        return Rate(out, "measured")
    return None if rps is None else Rate(rps * c.output_len, "derived", rps)


def _per_stream(c: CellRow) -> Rate | None:
    """One stream's decode rate from TPOT (without TPOT, output/concurrency adds nothing to the
    aggregate check)."""
    tpot = known(c.summary.mean_tpot_ms)
    return Rate(1000 / tpot, "tpot", tpot_ms=tpot) if tpot else None


def _total_tps(c: CellRow, out: Rate | None) -> Rate | None:
    total, rps = known(c.summary.total_token_throughput), known(c.summary.request_throughput)
    if total is not None:
        return Rate(total, "total")
    if out is None or rps is None:
        return None
    return Rate(out.value + rps * c.input_len, "total_derived", rps)


def check_cell(c: CellRow, r: Roofline) -> Finding | None:
    """The worst violation of one cell, or None when every bound holds."""
    out, stream = _output_tps(c), _per_stream(c)
    total = _total_tps(c, out)
    found: list[Finding] = []
    if stream is not None and stream.value > r.per_stream:
        found.append(Finding(c, "per_stream", stream, r.per_stream))
    agg = r.aggregate(c.concurrency)
    if out is not None and out.value > agg:
        found.append(Finding(c, "aggregate", out, agg))
    if total is not None and total.value > r.compute:
        found.append(Finding(c, "compute", total, r.compute))
    if not found:
        return None
    worst = max(found, key=lambda f: f.times)
    worst.telling_latency = out is not None and out.how == "derived" and bool(known(c.summary.request_throughput)) \
        and bool(c.concurrency)
    return worst


def check_run(run: RunData, ov: Overrides = Overrides()) -> list[ConfigCheck]:
    checks = []
    for name in run.config_names():
        cfg = run.config(name)
        roof = roofline_for(run, cfg, ov)
        cells = run.all_cells_of(name)     # every repeat: one impossible repeat is not averaged away
        if not isinstance(roof, Roofline):
            checks.append(ConfigCheck(cfg, None, roof, cells=len(cells)))
            continue
        found = [f for c in cells if (f := check_cell(c, roof)) is not None]
        checks.append(ConfigCheck(cfg, roof, None, found, len(cells)))
    return checks


def flagged(checks: list[ConfigCheck]) -> int:
    return sum(len(c.findings) for c in checks)
