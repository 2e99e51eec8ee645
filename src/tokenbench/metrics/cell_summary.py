"""A cell's summary, typed: ONE class from the tally to the report. The figures `vllm bench serve`
reports carry vLLM's names (metrics/summary.py computes them from the tally); the groups are typed parts of
it, each ONE field below that says who fills it (the group types: metrics/summary_groups.py), so the set of
group names is fixed: `with_` places a group by its type, and a group without its field fails at run time
and at type-check time. `to_dict()` is the stored and JSON form (the keys given, flat, the names they have
always had); `from_dict()` reads it back. Unknown keys are refused: keys of other tools' results that no
field declares (an imported p99.9, say) sit in ONE declared field, `undeclared`, where `from_dict` puts them
(a summary stored by an older version with such keys flat reads back the same), and `to_dict` writes them
flat again, as they came. Formulas: docs/metrics.md."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, model_validator

from tokenbench.metrics.summary_groups import (
    CacheState,
    ClientHealth,
    CpuShares,
    EarlyEnds,
    FigureHealth,
    Group,
    Interruption,
    JobFigures,
    LaunchFacts,
    MonitorFigures,
    Number,
    PhaseLedger,
    SendRates,
    ServerCounters,
    ServerMeans,
    SessionFigures,
    StreamTail,
    WorkloadFacts,
    not_defined,
)
from tokenbench.metrics.timeslices import Timeslices
from tokenbench.spec.slo import JOB_METRICS, JobMetric

Latency = Literal["ttft", "tpot", "itl", "e2el", "ntpot", "queue", "ttfc", "connect"]
Statistic = Literal["mean", "median", "std", "min", "max", "p50", "p90", "p95", "p99"]
Rate = Literal["request_throughput", "output_throughput", "total_token_throughput", "request_goodput"]
LATENCIES: tuple[Latency, ...] = ("ttft", "tpot", "itl", "e2el")           # vLLM's four
STATISTICS: tuple[Statistic, ...] = ("mean", "median", "std", "min", "max", "p50", "p90", "p95", "p99")
RATES: tuple[Rate, ...] = ("output_throughput", "request_throughput", "request_goodput")
JOBS: tuple[JobMetric, ...] = JOB_METRICS      # a sessions or trajectories cell's job figures (JobFigures)
KEY_OF_STAT: dict[str, Statistic] = {"mean": "mean", "p50": "median", "p90": "p90", "p95": "p95", "p99": "p99"}
UNDECLARED = "undeclared"       # the one field that holds keys no other field declares


class CellSummary(BaseModel):
    """One cell's figures. Counts are numbers (a mean over repeats need not be whole)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # the cell, as asked
    concurrency: int | None = None           # closed loop
    request_rate: float | None = None        # open loop, requests/s
    max_concurrency: int | None = None
    arrival: str | None = None               # open loop: poisson | constant | trace
    burstiness: float | None = None          # open loop, Poisson: gamma shape of the gaps, when not 1
    input_len: Number | None = None          # asked (datasets: the mean asked)
    output_len: Number | None = None
    # counts of the measured requests (None: not told, as in some imported results)
    num_prompts: Number | None = None
    completed: Number | None = None
    failed: Number | None = None
    failed_by_kind: dict[str, Number] = {}
    total_input_tokens: Number | None = None
    total_output_tokens: Number | None = None
    usage_source: dict[str, Number] = {}
    count_source: dict[str, Number] = {}
    length_mismatches: Number = 0
    total_reasoning_tokens: Number = 0
    reasoning_requests: Number = 0
    zero_token_requests: Number = 0
    # what the server told about caching, prompt lengths and images (when it told)
    total_cached_tokens: Number | None = None
    cache_hit_rate: float | None = None
    cache_reported_requests: Number | None = None
    prompt_tokens_disagreeing: Number | None = None
    prompt_tokens_diff_mean: float | None = None
    prompt_tokens_diff_max: Number | None = None
    total_images: Number | None = None
    total_image_bytes: Number | None = None
    server_counted_images: Number | None = None
    # rates over the measured window
    duration: float | None = None            # seconds
    request_throughput: float | None = None  # completed / duration
    output_throughput: float | None = None   # tokens/s
    total_token_throughput: float | None = None
    achieved_concurrency: float | None = None
    sustained_concurrency: float | None = None
    request_goodput: float | None = None     # requests meeting every SLO / duration
    goodput_fraction: float | None = None
    # ttfc: time to the first answer (non-reasoning) token, ms
    mean_ttfc_ms: float | None = None
    median_ttfc_ms: float | None = None
    std_ttfc_ms: float | None = None
    min_ttfc_ms: float | None = None
    max_ttfc_ms: float | None = None
    p50_ttfc_ms: float | None = None
    p90_ttfc_ms: float | None = None
    p95_ttfc_ms: float | None = None
    p99_ttfc_ms: float | None = None
    new_connections: Number | None = None
    # connect: set-up of new connections, ms
    mean_connect_ms: float | None = None
    median_connect_ms: float | None = None
    std_connect_ms: float | None = None
    min_connect_ms: float | None = None
    max_connect_ms: float | None = None
    p50_connect_ms: float | None = None
    p90_connect_ms: float | None = None
    p95_connect_ms: float | None = None
    p99_connect_ms: float | None = None
    # ttft: time to first token, ms
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    std_ttft_ms: float | None = None
    min_ttft_ms: float | None = None
    max_ttft_ms: float | None = None
    p50_ttft_ms: float | None = None
    p90_ttft_ms: float | None = None
    p95_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    # tpot: time per output token after the first, ms
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    std_tpot_ms: float | None = None
    min_tpot_ms: float | None = None
    max_tpot_ms: float | None = None
    p50_tpot_ms: float | None = None
    p90_tpot_ms: float | None = None
    p95_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    # itl: gaps between token-bearing chunks, ms
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    std_itl_ms: float | None = None
    min_itl_ms: float | None = None
    max_itl_ms: float | None = None
    p50_itl_ms: float | None = None
    p90_itl_ms: float | None = None
    p95_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    # e2el: end-to-end latency, ms
    mean_e2el_ms: float | None = None
    median_e2el_ms: float | None = None
    std_e2el_ms: float | None = None
    min_e2el_ms: float | None = None
    max_e2el_ms: float | None = None
    p50_e2el_ms: float | None = None
    p90_e2el_ms: float | None = None
    p95_e2el_ms: float | None = None
    p99_e2el_ms: float | None = None
    # ntpot: E2EL / output tokens, ms
    mean_ntpot_ms: float | None = None
    median_ntpot_ms: float | None = None
    std_ntpot_ms: float | None = None
    min_ntpot_ms: float | None = None
    max_ntpot_ms: float | None = None
    p50_ntpot_ms: float | None = None
    p90_ntpot_ms: float | None = None
    p95_ntpot_ms: float | None = None
    p99_ntpot_ms: float | None = None
    # queue: sent late versus the schedule (client-side queueing), ms
    mean_queue_ms: float | None = None
    median_queue_ms: float | None = None
    std_queue_ms: float | None = None
    min_queue_ms: float | None = None
    max_queue_ms: float | None = None
    p50_queue_ms: float | None = None
    p90_queue_ms: float | None = None
    p95_queue_ms: float | None = None
    p99_queue_ms: float | None = None
    # steady state (closed loop: while the full concurrency was held)
    steady_duration: float | None = None
    steady_request_throughput: float | None = None
    steady_output_throughput: float | None = None
    steady_total_token_throughput: float | None = None
    # The groups: one field each, `<name>: <Group subclass> | None = None`, whose comment says who fills it
    # (two flags of the verdict sit among them). A new group is a class in metrics/summary_groups.py and one
    # field here; its maker hands it to metrics/cell.finish, which places it with `with_`. The field order
    # is the stored key order.
    tail: StreamTail | None = None           # the tally (metrics/summary.py): last token to the end of the stream
    early: EarlyEnds | None = None           # the tally (metrics/summary.py): answers ended early, not forbidden
    send: SendRates | None = None            # the tally, open loop only: the send rates asked, scheduled, sent
    health: ClientHealth | None = None       # the load runner (load/runner.py, load/lag.py): the client's own health
    facts: WorkloadFacts | None = None       # the workload builder (workload/build.py)
    client_lag_tolerated: str | None = None  # the verdict: --allow-client-lag kept the cell ok despite this
    server_unreachable: bool | None = None   # the verdict: the server went away (`--resume` runs it again)
    monitor: MonitorFigures | None = None    # the cell's monitor (study/monitoring.py, monitor/summary.py)
    slices: Timeslices | None = None         # the tally: per-timeslice figures, steady state; the monitor's samples
    figures: FigureHealth | None = None      # client health per figure (metrics/health.py): bounds, the verdict's marks
    counters: ServerCounters | None = None   # the server's counters over the measured phase (metrics/server.py)
    sessions: SessionFigures | None = None   # a sessions cell only: its shape and figures by turn (metrics/summary.py)
    jobs: JobFigures | None = None           # a sessions cell only: its jobs, each measured whole (metrics/summary.py)
    interruption: Interruption | None = None   # the user stopped the cell (Ctrl-C): how far it got
    phases: PhaseLedger | None = None        # the server's spans joined to the cell's requests (metrics/server.py,
                                             # study/traces.py): where the time went, phase by phase
    server_means: ServerMeans | None = None  # the server's request-time histograms over the measured phase
                                             # (metrics/server.py, study/monitoring.py)
    cpu: CpuShares | None = None             # the cell's monitor (monitor/cpu.py): who used the host's CPUs
    cache: CacheState | None = None          # the study's runner (study/prompt_cache.py): the prefix cache's state
    launch: LaunchFacts | None = None        # the study's runner (study/server_process.py): the server's launch
    # other tools' results (`tokenbench import`)
    source: str | None = None
    notes: str | None = None
    derived: list[str] | None = None          # figures tokenbench derived, with how
    input_throughput: float | None = None
    max_output_tokens_per_s: float | None = None
    max_concurrent_requests: Number | None = None
    # keys no field declares (another tool's p99.9, a key an older version stored), as they came: `from_dict`
    # puts them here, `to_dict` writes them flat after the others
    undeclared: dict[str, Any] = {}

    @model_validator(mode="before")
    @classmethod
    def _not_defined(cls, data: Any) -> Any:
        return not_defined(data)

    def to_dict(self) -> dict[str, Any]:
        """The stored form: the keys given, flat, vLLM's names, the same values."""
        out: dict[str, Any] = {}
        given = self.model_fields_set
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, Group):
                out.update(value.flat())
            elif name in given and name != UNDECLARED:
                out[name] = value
        return {**out, **self.undeclared}

    @classmethod
    def from_dict(cls, stored: dict[str, Any]) -> CellSummary:
        """A stored (or fresh, or imported) summary; keys no field declares go to `undeclared` as they came."""
        flat = dict(stored)
        groups = {name: group.take(flat) for name, group in GROUPS.items()}
        undeclared = {**(flat.pop(UNDECLARED, None) or {}),
                      **{k: flat.pop(k) for k in [k for k in flat if k not in cls.model_fields]}}
        known = {**flat, **{k: v for k, v in groups.items() if v is not None}}
        return cls.model_validate({**known, UNDECLARED: not_defined(undeclared)} if undeclared else known)

    def stat(self, latency: Latency, statistic: Statistic) -> float | None:
        """One latency statistic (`stat("ttft", "p99")` is `p99_ttft_ms`)."""
        value = getattr(self, f"{statistic}_{latency}_ms")
        return None if value is None else float(value)

    def rate(self, name: Rate) -> float | None:
        return getattr(self, name)

    def with_(self, *groups: Group | None) -> CellSummary:
        """A copy with these groups in their fields (each group's type names its one field; None is left
        out). A group no field is declared for is a TypeError, as is anything that is not a group."""
        return self.model_copy(update={field_of(type(g)): g for g in groups if g is not None})


def _group_fields(cls: type[BaseModel]) -> dict[str, type[Group]]:
    """The group fields of a summary class, name -> group type (`x: SomeGroup | None`), each type once."""
    out: dict[str, type[Group]] = {}
    for name, info in cls.model_fields.items():
        types = [t for t in (info.annotation, *get_args(info.annotation)) if isinstance(t, type) and issubclass(t, Group)]
        if types:
            if types[0] in out.values():
                raise TypeError(f"{types[0].__name__} is the type of two summary fields: a group has one field")
            out[name] = types[0]
    return out


GROUPS: dict[str, type[Group]] = _group_fields(CellSummary)      # the fixed set of group names, in field order
_FIELD_OF: dict[type[Group], str] = {group: name for name, group in GROUPS.items()}


def field_of(group: type) -> str:
    """The summary field a group type fills; TypeError for a type without one (not declared, or not a group)."""
    try:
        return _FIELD_OF[group]
    except KeyError:
        raise TypeError(f"{group.__name__} is not a group of CellSummary: declare it as one field there "
                        "(metrics/cell_summary.py)") from None


@dataclass(frozen=True)
class Metric:
    """One headline figure of a cell: a latency statistic, a rate, or a statistic over a sessions cell's jobs
    (`job`: completion time; `job_ttft`, `job_tpot`: the worst turn's; docs/metrics.md, "Jobs")."""

    name: Latency | Rate | JobMetric
    stat: Literal["mean", "p50", "p90", "p95", "p99"] = "mean"     # "mean" for rates

    @property
    def higher_is_better(self) -> bool:
        return self.name in RATES

    @property
    def key(self) -> str:
        """The summary key of the same figure (vLLM names); a job figure's is named alike (`p95_job_ms`), and
        marked as its turn figure is (summary_groups.JOB_MARK_KEYS)."""
        if self.name in RATES:
            return self.name
        return f"{KEY_OF_STAT[self.stat]}_{self.name}_ms"

    def of(self, summary: CellSummary) -> float | None:
        """The figure in a summary; None where it is missing or not a number (NaN)."""
        if self.name in RATES:
            return known(summary.rate(cast(Rate, self.name)))
        if self.name in JOBS:
            found = summary.jobs.stat(cast(JobMetric, self.name), self.stat) if summary.jobs else None
            return None if found is None else known(found.value)
        return known(summary.stat(cast(Latency, self.name), KEY_OF_STAT[self.stat]))


def known(value: float | None) -> float | None:
    """A figure as the report shows it: None for a missing one or NaN (nothing to show)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value
