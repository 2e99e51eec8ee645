"""What a cell's tokens cost at a stated price (the study spec's `price_per_hour`, per device-hour or per
node-hour), as data: $ per million output tokens with the whole cost on them, the cost split between input
and output tokens (by the server's measured prefill and decode time where the cell has it, else by token
share, and saying which), and output tokens per $; a capacity answer per device and per $ an hour (agents per device:
`capacity_units`). Formulas: docs/metrics.md, "Cost", "Capacity search".

The split reads the server's own timings where the cell has them (`phase_times`): its request spans joined
to the measured requests (the phase ledger), else its request-time histograms' means over the measured phase;
a cell stored without either is split by token share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tokenbench.metrics.cell_summary import known
from tokenbench.store.rows import CellRow

Basis = Literal["device", "node"]
SplitBy = Literal["spans", "histograms", "tokens"]
SECONDS_PER_HOUR = 3600
MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """A price per hour of one device (`device`) or of the whole node (`node`), in $ (any currency)."""

    per_hour: float
    basis: Basis = "device"

    @classmethod
    def of(cls, spec: dict[str, Any]) -> Price | None:
        """The price a run's stored spec states, or None."""
        value = spec.get("price_per_hour")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            return None
        return cls(float(value), "node" if spec.get("price_basis") == "node" else "device")

    def hourly(self, devices: int) -> float:
        """What the server costs per hour: the device price x its devices, or the node price (one node)."""
        return self.per_hour * devices if self.basis == "device" else self.per_hour


@dataclass(frozen=True)
class PhaseTimes:
    """Σ prefill and Σ decode seconds of a cell's measured requests, from the server's own timings: its spans
    (`spans`) or its request-time histograms (`histograms`)."""

    prefill_s: float
    decode_s: float
    source: Literal["spans", "histograms"] = "spans"


def phase_times(c: CellRow) -> PhaseTimes | None:
    """The cell's prefill and decode time from the server: mean x requests of its joined spans (the phase
    ledger), else of its histograms' means; None when it has neither (or they do not add up to any time)."""
    ledger, means = c.summary.phases, c.summary.server_means
    if ledger is not None and ledger.joined and ledger.prefill_ms is not None and ledger.decode_ms is not None:
        n = float(ledger.joined)
        return PhaseTimes(ledger.prefill_ms * n / 1000, ledger.decode_ms * n / 1000, "spans")
    if means is not None and means.prefill_ms is not None and means.decode_ms is not None:
        n = float(means.requests or 1)
        return PhaseTimes(means.prefill_ms * n / 1000, means.decode_ms * n / 1000, "histograms")
    return None


@dataclass(frozen=True, kw_only=True)
class Cost:
    usd_per_hour: float               # the server's, as priced
    per_m_output: float               # $ / 1e6 output tokens, the whole cost on them
    per_m_input_split: float | None   # the input tokens' share of the cost / 1e6 input tokens
    per_m_output_split: float | None  # the output tokens' share / 1e6 output tokens
    input_share: float | None         # the share of the cost charged to input tokens
    split_by: SplitBy | None
    output_per_usd: float             # output tokens per $


def per_million(usd_per_hour: float, tokens_per_s: float) -> float:
    """$ per million tokens at `usd_per_hour` producing `tokens_per_s`: $/h / (tok/s x 3600) x 10^6."""
    return usd_per_hour / (tokens_per_s * SECONDS_PER_HOUR) * MILLION


def input_share(c: CellRow, phases: PhaseTimes | None) -> tuple[float, SplitBy] | None:
    """The share of the cost charged to input tokens: prefill time / (prefill + decode time) where the server's
    phase timings exist, else input tokens / (input + output tokens)."""
    if phases is not None and phases.prefill_s + phases.decode_s > 0:
        return phases.prefill_s / (phases.prefill_s + phases.decode_s), phases.source
    tokens_in, tokens_out = known(c.summary.total_input_tokens), known(c.summary.total_output_tokens)
    if not tokens_in or not tokens_out:
        return None
    return tokens_in / (tokens_in + tokens_out), "tokens"


def cell_cost(c: CellRow, price: Price, devices: int, phases: PhaseTimes | None = None) -> Cost | None:
    """The cell's cost figures at `price` on `devices` devices (`phases`: the server's timings, by default the
    cell's own, `phase_times`); None without its output throughput."""
    out_tps = known(c.summary.output_throughput)
    if not out_tps:
        return None
    hourly = price.hourly(devices)
    share = input_share(c, phases or phase_times(c))
    duration, tokens_in = known(c.summary.duration), known(c.summary.total_input_tokens)
    in_tps = tokens_in / duration if tokens_in and duration else None
    split_in = per_million(hourly * share[0], in_tps) if share and in_tps else None
    split_out = per_million(hourly * (1 - share[0]), out_tps) if share else None
    return Cost(usd_per_hour=hourly, per_m_output=per_million(hourly, out_tps), per_m_input_split=split_in,
                per_m_output_split=split_out, input_share=share[0] if share else None,
                split_by=share[1] if share else None, output_per_usd=out_tps * SECONDS_PER_HOUR / hourly)


@dataclass(frozen=True)
class CapacityUnits:
    """A capacity answer (agents, users, streams or a rate) per device and, at a price, per $ an hour: the
    answer and its 95 % interval's ends, each divided alike (docs/metrics.md, "Capacity search")."""

    devices: int
    per_device: tuple[float | None, float | None, float | None]      # capacity, lo, hi per device
    per_usd_hour: tuple[float | None, float | None, float | None] | None = None


def capacity_units(answer: tuple[float | None, float | None, float | None], devices: int,
                   price: Price | None = None) -> CapacityUnits:
    """`answer` (capacity, lo, hi: metrics/capacity.Answer's) per device, and per $ an hour at `price` on
    `devices` devices (the device price x devices, or the node's)."""
    def over(d: float) -> tuple[float | None, float | None, float | None]:
        return tuple(None if x is None else x / d for x in answer)      # type: ignore[return-value]
    n = max(1, devices)
    return CapacityUnits(n, over(n), over(price.hourly(n)) if price is not None else None)
