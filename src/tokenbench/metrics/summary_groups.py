"""Every group of a cell's summary, declared here (the per-slice figures apart: metrics/timeslices.py):
each is one field of `CellSummary` (metrics/cell_summary.py), which says who fills it. Adding a group is
declaring its class here and that one field; `CellSummary.with_` places a group by its type, so a group
that has no field fails at run time and at type-check time. In the stored and JSON form their keys sit
flat beside the tally's figures, under the names they have always had (a group's PREFIX before them).
Formulas: docs/metrics.md ("Client health", "Send rates", "Stream tail", "Sessions", "Server counters
over a cell", "Where the time went"), docs/monitoring.md, docs/reliability.md ("Interruptions")."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tokenbench.metrics.tally import CAUSES, Cause, Stalls
from tokenbench.spec.slo import JobMetric

Number = int | float
OffReason = Literal["few_requests", "cap", "connect", "client"]     # why an open loop's sent rate is off
OFF_REASONS: tuple[OffReason, ...] = ("few_requests", "cap", "connect", "client")
FLOOR_MS = 1.0        # below this a stream tail cannot be told from the client's own stamping (calibrate's limit)
SHARE = 0.01          # ... nor matter to E2EL: half the smallest effect `compare` names by default (2 %)


def not_defined(data: Any) -> Any:
    """A summary's fields with every figure that is not a number (NaN, infinity: no TPOT with one output token,
    no latency without a completed request) as None, "not defined": the same value the database and every
    file give back (JSON has no NaN), so a figure reads the same fresh and stored."""
    if isinstance(data, dict):
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in data.items()}
    return data


class Group(BaseModel):
    """Keys given are kept (and only those): `flat()` is the stored form, `take()` reads it back."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    PREFIX: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _not_defined(cls, data: Any) -> Any:
        return not_defined(data)

    def flat(self) -> dict[str, Any]:
        return {self.PREFIX + k: v for k, v in self.model_dump(exclude_unset=True).items()}

    @classmethod
    def key_names(cls) -> tuple[str, ...]:
        return tuple(cls.PREFIX + k for k in cls.model_fields)

    @classmethod
    def take(cls, flat: dict[str, Any]) -> Self | None:
        """This group from a stored summary (its keys are removed from `flat`), or None without any."""
        mine = {k[len(cls.PREFIX):]: flat.pop(k) for k in cls.key_names() if k in flat}
        return cls.model_validate(mine) if mine else None


class ClientHealth(Group):
    """How the client itself fared while the cell ran (the load runner; per-worker figures merged)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    loop_lag_p50_ms: float | None = None       # event-loop wake-up lateness (load/lag.py)
    loop_lag_p99_ms: float | None = None
    loop_lag_max_ms: float | None = None
    client_cpu_percent: float | None = None    # CPU of the client, % of one core (summed over workers)
    client_cpu_max_percent: float | None = None  # several workers: the busiest one's
    client_workers: Number | None = None          # several workers: how many
    prepared_exhausted_s: float | None = None  # a duration cell that ran out of prepared requests: when
    stopped_after_s: float | None = None       # stopped by the user (Ctrl-C): when
    clock_offsets_ns: list[int] | None = None  # --ray: each actor's clock minus the driver's
    ray_nodes: list[str] | None = None         # --ray: the node each actor ran on
    # what held the loop up (load/lag.py, metrics/tally.Stalls): the stalls, and the share of the measured
    # phase the loop's thread waited for a CPU it was ready to use (the kernel's run delay)
    stall_count: Number | None = None
    stall_ms: dict[str, float] | None = None            # stalled time (sum of the stalls' lags) by cause
    client_wait_percent: float | None = None            # run delay / wall time (several workers: the worst)
    client_involuntary_switches: Number | None = None   # the loop's thread preempted (summed over workers)
    host_steal_percent: float | None = None             # a VM's CPUs taken by the hypervisor (all CPUs)
    stalls: Stalls = Field(default_factory=Stalls, exclude=True)   # each stall, while the cell is summed
                                                                   # (not stored: the bounds are)

    def busiest_cpu_percent(self) -> float:
        """CPU of the busiest client process (per-worker maximum when the cell ran several)."""
        if self.client_cpu_max_percent is not None:
            return float(self.client_cpu_max_percent)
        return float(self.client_cpu_percent or 0) / (self.client_workers or 1)

    def merged(self, others: list[ClientHealth]) -> ClientHealth:
        """Several workers as one: the worst loop lag, CPU summed and the busiest's, the earliest exhaustion, the
        latest stop."""
        parts = [self, *others]
        lags = {k: max((v for p in parts if (v := getattr(p, k)) is not None), default=None)
                for k in ("loop_lag_p50_ms", "loop_lag_p99_ms", "loop_lag_max_ms")}
        out = ClientHealth(**lags, client_cpu_percent=sum(p.client_cpu_percent or 0 for p in parts),
                           client_cpu_max_percent=max(p.client_cpu_percent or 0 for p in parts),
                           client_workers=len(parts), **_merged_stalls(parts))
        ran_out = [p.prepared_exhausted_s for p in parts if p.prepared_exhausted_s is not None]
        stops = [p.stopped_after_s for p in parts if p.stopped_after_s is not None]
        update = {"prepared_exhausted_s": min(ran_out)} if ran_out else {}
        return out.model_copy(update={**update, **({"stopped_after_s": max(stops)} if stops else {})})

    # Amendments, one named method each (the load runner's and the Ray driver's): a copy with those keys given.
    def ran_out(self, after_s: float | None) -> ClientHealth:
        """A duration cell whose prepared requests ran out `after_s` seconds in (None: they did not)."""
        return self if after_s is None else self.model_copy(update={"prepared_exhausted_s": after_s})

    def stopped(self, after_s: float) -> ClientHealth:
        """Stopped by the user (Ctrl-C) `after_s` seconds in."""
        return self.model_copy(update={"stopped_after_s": after_s})

    def shifted(self, offset_ns: int) -> ClientHealth:
        """A Ray actor's health with its stalls on the driver's clock (`offset_ns`: the actor's clock minus it)."""
        return self.model_copy(update={"stalls": self.stalls.shifted(offset_ns)})

    def on_ray(self, clock_offsets_ns: list[int], ray_nodes: list[str]) -> ClientHealth:
        """The cell ran on Ray actors: each one's clock offset and node."""
        return self.model_copy(update={"clock_offsets_ns": clock_offsets_ns, "ray_nodes": ray_nodes})


def _worst(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _merged_stalls(parts: list[ClientHealth]) -> dict[str, Any]:
    """Every worker's stalls (each tagged with its worker), their time by cause summed, the worst wait."""
    stalls = parts[0].stalls.merged([p.stalls for p in parts[1:]])
    by_cause = {c: sum((p.stall_ms or {}).get(c, 0.0) for p in parts) for c in CAUSES}
    out: dict[str, Any] = {"stalls": stalls, "stall_count": sum(p.stall_count or 0 for p in parts),
                           "stall_ms": {c: v for c, v in by_cause.items() if v}}
    told = {"client_wait_percent": _worst([p.client_wait_percent for p in parts]),
            "host_steal_percent": _worst([p.host_steal_percent for p in parts]),
            "client_involuntary_switches": sum(p.client_involuntary_switches or 0 for p in parts)}
    return {**out, **{k: v for k, v in told.items() if v is not None}}


class WorkloadFacts(Group):
    """What the cell's workload turned out to be (the workload builder: workload/build.py)."""

    workload: str | None = None                # the kind, when not random
    dataset_path: str | None = None
    dataset_entries: Number | None = None
    dataset_examined: Number | None = None
    dataset_rejected: Number | None = None
    dataset_reused: Number | None = None
    prefix_len: Number | None = None
    num_groups: Number | None = None
    prefix_share: float | None = None
    images_per_request: Number | None = None
    image_source: str | None = None
    time_scale: float | None = None
    trace_rows: Number | None = None
    trace_rows_dropped: Number | None = None
    trace_span_s: float | None = None
    trace_block_size: Number | None = None      # trace with hash_ids: tokens per block, and the trace's own reuse
    trace_prompt_tokens: Number | None = None
    trace_reusable_tokens: Number | None = None
    trace_reuse_rate: float | None = None
    text_corpus: str | None = None              # text: the corpus its windows are cut from, and its length
    text_corpus_tokens: Number | None = None
    length_distribution: str | None = None     # lengths drawn per request (workload/lengths.py): in words
    length_draws: str | None = None            # ... and as the short tag of the cell key
    input_len_mean: float | None = None        # variable lengths (datasets, traces, drawn lengths): as asked
    input_len_min: Number | None = None
    input_len_max: Number | None = None
    output_len_mean: float | None = None
    output_len_min: Number | None = None
    output_len_max: Number | None = None
    chat_template_overhead_tokens: Number | None = None
    image_tokens_per_image: float | None = None
    tokenizer: str | None = None               # "local DIR" when the prompts were counted locally
    prompt_as_text_special_tokens: Number | None = None   # prompt_as_text: tokens the server adds (BOS)
    corpus_format: str | None = None           # trajectories: mlcommons | mooncake | weka | generated
    corpus_sha256: str | None = None           # ... the corpus read (or the generated one's lengths)
    corpus_trajectories: Number | None = None  # ... in the corpus (a Weka trace's chains each count)
    corpus_replayed: Number | None = None      # ... that this cell could replay
    corpus_turns: Number | None = None         # ... their turns (one pass)
    corpus_skipped: dict[str, str] | None = None   # ... each one skipped (unreplayable: skip) -> its cause
    corpus_chains: dict[str, str] | None = None    # ... a Weka trace's chains replayed apart -> why
    corpus_passes: float | None = None         # sessions planned / trajectories replayed (None: by duration)

    def of_sessions(self, lengths: list[int]) -> WorkloadFacts:
        """A sessions cell's facts (these, its warmup's): its kind, and the prompt lengths its turns ask (turn k's
        at `lengths[k]`, shortest first)."""
        return self.model_copy(update={"workload": "sessions", "input_len_mean": sum(lengths) / len(lengths),
                                       "input_len_min": lengths[0], "input_len_max": lengths[-1]})

    def without_lengths(self) -> WorkloadFacts:
        """Fixed-length workloads state no length statistics (every request asked the same)."""
        kept = self.model_dump(exclude_unset=True)
        return WorkloadFacts.model_validate({k: v for k, v in kept.items()
                                             if not k.startswith(("input_len_", "output_len_"))})


COVERAGE_MIN_PCT = 90.0     # power samples must cover this share of the measured window ...
GAP_MAX_INTERVALS = 2.0     # ... and no gap between them may exceed this many monitor intervals


class DeviceFigures(BaseModel):
    """One accelerator device (a GPU, or one chip of an NPU) over the cell's measured window
    (monitor/window.py; formulas: docs/monitoring.md, "Cell summary")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str                                  # npu | gpu
    device: str                                  # GPU index, or NPU id / chip ("0/1")
    name: str = ""
    util_mean_pct: float | None = None
    util_max_pct: float | None = None
    mem_used_mean_mb: float | None = None
    mem_peak_mb: float | None = None
    mem_total_mb: float | None = None
    power_mean_w: float | None = None            # time-weighted over the window
    power_max_w: float | None = None
    energy_j: float | None = None
    energy_source: str | None = None             # "counter" (NVML total energy) | "power" (integrated samples)
    coverage_pct: float | None = None            # share of the window within one interval of a sample
    max_gap_s: float | None = None               # the longest stretch between samples over the window (a
    #                                              counter: between the readings around an edge)


class MonitorFigures(Group):
    """The accelerator's and host's figures over the cell's measured window (first measured send to last
    measured byte), the server's over the cell (monitor/summary.py), and the check of the `*` mark against
    the queue the server showed (the sweep's monitor)."""

    PREFIX: ClassVar[str] = "monitor_"
    samples: Number | None = None
    span_s: float | None = None
    window_s: float | None = None              # the measured window the accelerator and host figures cover
    interval_s: float | None = None            # the monitor's sampling interval
    accel_chips: Number | None = None
    accel_util_mean_pct: Number | None = None
    accel_util_max_pct: Number | None = None
    accel_mem_used_mean_mb: Number | None = None
    accel_mem_peak_mb: Number | None = None
    accel_mem_peak_chip_mb: Number | None = None
    accel_mem_capacity_mb: Number | None = None
    accel_power_mean_w: Number | None = None
    accel_power_max_w: Number | None = None
    accel_energy_j: Number | None = None
    accel_energy_source: str | None = None     # "counter" | "power" | "counter+power" (devices differ)
    accel_energy_per_output_token_j: Number | None = None
    accel_energy_per_request_j: Number | None = None
    accel_tokens_per_joule: Number | None = None
    accel_coverage_pct: Number | None = None   # the worst device's
    accel_max_gap_s: Number | None = None      # the worst device's
    accel_temp_max_c: Number | None = None
    devices: list[DeviceFigures] | None = None
    server_running_mean: Number | None = None
    server_running_max: Number | None = None
    server_waiting_mean: Number | None = None
    server_waiting_max: Number | None = None
    server_kv_usage_peak: Number | None = None
    server_preemptions: Number | None = None
    host_cpu_mean_pct: Number | None = None
    host_cpu_max_pct: Number | None = None
    host_mem_peak_mb: Number | None = None
    host_energy_j: Number | None = None        # the host's CPU packages (RAPL), where the host exposes them
    host_energy_per_output_token_j: Number | None = None
    host_energy_note: str | None = None        # why there is no host energy (no powercap, not readable)
    proc_cpu_mean_pct: Number | None = None
    proc_cpu_max_pct: Number | None = None
    proc_rss_peak_mb: Number | None = None
    queue_check: str | None = None             # the `*` mark and the server's queue disagree: why

    def checked(self, queue_check: str | None, host_energy_note: str | None = None) -> MonitorFigures:
        """The figures with the `*` mark's check against the server's queue (None: they agree) and, where the
        host has no energy figure, why (the cell's monitor: study/monitoring.py)."""
        update: dict[str, Any] = {"queue_check": queue_check}
        return self.model_copy(update=update | ({"host_energy_note": host_energy_note} if host_energy_note else {}))

    @property
    def power_sparse(self) -> bool:
        """The power (so energy) samples do not cover the measured window: below COVERAGE_MIN_PCT of it, or
        a gap above GAP_MAX_INTERVALS intervals; an energy counter's readings around an edge of the window
        that far apart (docs/monitoring.md, "Coverage")."""
        gap = self.accel_max_gap_s or 0.0
        return ((self.accel_coverage_pct is not None and self.accel_coverage_pct < COVERAGE_MIN_PCT)
                or (self.interval_s is not None and gap > GAP_MAX_INTERVALS * self.interval_s))


# the figures read from power samples: marked together when the samples do not cover the window
POWER_KEYS = frozenset(MonitorFigures.PREFIX + k for k in (
    "accel_power_mean_w", "accel_power_max_w", "accel_energy_j", "accel_energy_per_output_token_j",
    "accel_energy_per_request_j", "accel_tokens_per_joule"))


class ServerCounters(Group):
    """What the server's own counters said over the cell's measured phase (study/monitoring.readings, metrics/server.counters):
    prefix-cache hits, speculative decoding and its acceptance (metrics/server.py),
    the window the increases span; and the `§` mark of a speculative server fed random prompts. Formulas:
    docs/metrics.md ("Server counters over a cell", "Speculative decoding", "Prefix-cache hit rate")."""

    server_prefix_cache_queries: float | None = None   # prompt tokens the engine's prefix cache was asked for
    server_prefix_cache_hits: float | None = None      # of them, found
    server_prefix_cache_hit_rate: float | None = None
    cache_hit_source: str | None = None        # which one the summary's cache_hit_rate is: "usage" | "counters"
    spec_acceptance_rate: float | None = None  # accepted draft tokens / draft tokens
    spec_mean_acceptance_length: float | None = None   # tokens per verify step, the target's own included
    spec_source: str | None = None             # "counters" (increase over the cell) | "gauges" (mean of scrapes)
    spec_drafts: float | None = None
    spec_draft_tokens: float | None = None
    spec_accepted_tokens: float | None = None
    speculative: str | None = None             # the server's speculative decoding ("ngram, 3 draft tokens")
    spec_random_prompts: str | None = None     # the `§` mark: random prompts to a speculative server, and why
    server_counters_window_s: float | None = None   # from the base scrape to the last one counted
    server_counters_lead_s: float | None = None     # the base scrape's lead on the first measured send


class SendRates(Group):
    """What an open-loop cell offered (metrics/summary.send_rates): the send rate asked, the rate its
    schedule held, the rate its requests were really sent at, and, when the sent rate is off the asked one
    by more than RATE_TOLERANCE, why (`send_rate_off`, a reason code). A mark on the cell, not a failure.
    An open-loop cell's send rates (requests/s) and what delayed its sends (ms, means over the sends).
    Counts are numbers (repeats merged into a mean need not be whole)."""

    arrival_seed: Number | None = None         # seed of the cell's arrival draws (load/arrivals.arrival_seed)
    send_rate_asked: float | None = None       # --request-rate
    send_rate_scheduled: float | None = None   # (n - 1) / (last intended - first intended)
    send_rate_achieved: float | None = None    # (n - 1) / (last written - first written)
    send_late_mean_ms: float | None = None     # the client's own lateness: written - intended - connect - slot wait
    send_slot_wait_mean_ms: float | None = None  # waiting for a free --max-concurrency slot (over all sends)
    send_slot_waits: Number | None = None         # sends that waited for one
    send_connect_mean_ms: float | None = None  # new connections' set-up before the write (over all sends)
    send_rate_off: OffReason | None = None     # achieved off asked by > RATE_TOLERANCE: why
    send_cap: Literal["queue", "gate"] | None = None  # how --max-concurrency held arrivals (--rate-cap)
    # each send against its own time (metrics/summary.schedule_fidelity): written - intended - connect, ms
    send_late_p99_ms: float | None = None      # (slot waits included where a cap held them)
    send_late_max_ms: float | None = None
    send_late_tolerance_ms: float | None = None   # a send this late is off its time: max(1 ms, 5 % of the mean gap)
    send_late_share: float | None = None       # the share of sends later than that
    send_gap_cv_scheduled: float | None = None  # the gaps between sends: their CV as scheduled
    send_gap_cv_sent: float | None = None       # ... and as sent
    send_schedule_off: OffReason | None = None  # the sends left the schedule beyond tolerance: why

    @property
    def off(self) -> float | None:
        """achieved / asked - 1 (None without both)."""
        a, b = self.send_rate_achieved, self.send_rate_asked
        return a / b - 1 if a is not None and b else None

    @property
    def reshaped(self) -> bool:
        """The sends left their schedule enough to offer the server another load: their gaps' CV moved by
        more than 0.1 from the scheduled one, or the p99 lateness passed a quarter of the mean gap (a few ms
        of jitter on a busy host does neither)."""
        a, b, late, sched = self.send_gap_cv_sent, self.send_gap_cv_scheduled, self.send_late_p99_ms, self.send_rate_scheduled
        cv = a is not None and b is not None and abs(a - b) > 0.1
        return self.send_schedule_off is not None and (cv or (late is not None and sched is not None
                                                              and late > 250.0 / sched))


class StreamTail(Group):
    """The stream tail: from a request's last token-bearing chunk to the end of its stream (the usage-only
    chunk and `[DONE]`, or a gateway's hook before them); TPOT and ITL end at the last token, E2EL includes
    the tail. Tail = end of stream - last token-bearing chunk, over ok requests with a token, ms."""

    mean_stream_tail_ms: float | None = None
    median_stream_tail_ms: float | None = None
    p99_stream_tail_ms: float | None = None
    max_stream_tail_ms: float | None = None

    def matters(self, mean_e2el_ms: float | None, p99_e2el_ms: float | None) -> bool:
        """Worth showing: the mean or the p99 tail above FLOOR_MS and above SHARE of the same E2EL figure."""
        pairs = ((self.mean_stream_tail_ms, mean_e2el_ms), (self.p99_stream_tail_ms, p99_e2el_ms))
        return any(tail is not None and e2el and tail > max(FLOOR_MS, SHARE * e2el) for tail, e2el in pairs)


class EarlyEnds(Group):
    """Answers the server ended before their asked output length where the request could not forbid it (the
    server refused ignore_eos and min_tokens: load/probe.py): not wrong lengths, and not hidden. Over ok
    requests whose output (usage, else counted) is shorter than asked without a length error."""

    ended_early: Number = 0                        # how many
    ended_early_share: float | None = None         # of the ok requests
    ended_early_out_min: Number | None = None      # their output lengths, tokens
    ended_early_out_median: float | None = None
    ended_early_out_mean: float | None = None
    ended_early_out_max: Number | None = None


class Interruption(Group):
    """How far a cell the user stopped (Ctrl-C) got, set only on an interrupted cell: its figures cover the
    requests that finished; the report shows its request count as finished / planned next to the
    interrupted mark (docs/reliability.md, "Interruptions"). Stored flat as `interrupted_planned` and `interrupted_cut`."""

    PREFIX: ClassVar[str] = "interrupted_"
    planned: Number | None = None       # measured requests the cell was to send (None: a --duration cell)
    cut: Number | None = None           # requests cut off by the stop (stored as `cancelled`, in no figure)


class SessionFigures(Group):
    """A sessions cell (keys `session_*`): its shape (what was asked), how its sessions went, and its figures by turn index
    (lists: item k is turn k; None where no request of that turn told)."""

    PREFIX: ClassVar[str] = "session_"
    # the shape (fairness compares it: judge/fairness.py)
    users: Number | None = None
    rate: float | None = None                 # open loop: sessions started per second
    ramp_up_s: float | None = None
    turns: Number | None = None
    user_len: Number | None = None            # new user tokens per turn
    output_len: Number | None = None
    system_len: Number | None = None
    system_shared: bool | None = None
    think_time_s: float | None = None
    think_time_dist: str | None = None
    assistant_turns: str | None = None        # returned | fixed
    api: str | None = None
    # how they went
    started: Number | None = None
    completed: Number | None = None
    cut_short: Number | None = None
    replies_returned_ids: Number | None = None
    replies_retokenized: Number | None = None
    replies_fixed: Number | None = None
    # by turn index
    turn_requests: list[Number] | None = None
    turn_prompt_tokens_mean: list[float | None] | None = None
    turn_cached_tokens_mean: list[float | None] | None = None
    turn_hit_rate: list[float | None] | None = None
    turn_ttft_mean_ms: list[float | None] | None = None
    turn_ttft_lo_ms: list[float | None] | None = None
    turn_ttft_hi_ms: list[float | None] | None = None
    turn_ttft_p50_ms: list[float | None] | None = None
    turn_tpot_mean_ms: list[float | None] | None = None
    # trajectories: the theoretical prefix-cache hit (workload/trajectories.CacheOracle) beside turn_hit_rate
    turn_theory_hit_rate: list[float | None] | None = None
    theory_hit_rate: float | None = None      # over every measured ok turn
    cache_block_size: Number | None = None    # the block the theoretical hits count
    # the measured window (load.window): where it ended, and the turns sent after it (stored, not measured)
    window: str | None = None
    window_end_s: float | None = None         # after the first measured send
    outside_requests: Number | None = None

    def shape_text(self) -> str:
        """What two sessions cells must share to be compared, the load's size apart (the cells' x): turns,
        lengths, system prompt, think time, what the assistant turns are, the API, the ramp."""
        system = f", system {self.system_len}{' shared' if self.system_shared else ''}" if self.system_len else ""
        think = f", think {self.think_time_s:g} s {self.think_time_dist}" if self.think_time_s else ""
        ramp = f", ramp {self.ramp_up_s:g} s" if self.ramp_up_s else ""
        return (f"{self.turns} turns of {self.user_len}+{self.output_len} tokens{system}{think}, "
                f"{self.assistant_turns} replies, {self.api}{ramp}")

    def load_text(self) -> str:
        return f"{self.users} users" if self.users is not None else f"{self.rate:g} sessions/s"


# the request figure a job figure is made of, turn by turn: the client's delays that could move that figure's
# statistic are those a job figure is read with (its mark, its client bound: metrics/capacity.py)
TURN_FIGURE: dict[str, str] = {"job": "e2el", "job_ttft": "ttft", "job_tpot": "tpot"}
# a job figure's key (cell_summary.Metric.key: `p95_job_ms`) -> its turn figure's (`p95_e2el_ms`)
JOB_MARK_KEYS: dict[str, str] = {f"{stat}_{job}_ms": f"{stat}_{turn}_ms" for job, turn in TURN_FIGURE.items()
                                 for stat in ("mean", "median", "p90", "p95", "p99")}


class JobStat(BaseModel):
    """A statistic over a cell's jobs with its 95 % interval (metrics/uncertainty.within)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    value: float
    lo: float
    hi: float
    unreliable: bool = False


class JobFigures(Group):
    """A sessions or trajectories cell's jobs (keys `job_*`; docs/metrics.md, "Jobs"): a job is one session
    (an agent's trajectory), measured whole from its first send to its last token, the turns sent after the
    measured window included. Statistics over the complete jobs, each with its interval; each complete job's
    own figures (`each_*`, in the order of `ids`), which a capacity search's job limits read."""

    PREFIX: ClassVar[str] = "job_"
    started: Number | None = None
    complete: Number | None = None            # every planned turn answered ok
    incomplete: Number | None = None          # a failed turn, or cut by the cell's end
    completion_ms: dict[str, JobStat] | None = None    # mean, p50, p90, p95, p99 of the completion time
    ttft_max_ms: dict[str, JobStat] | None = None      # ... of each job's worst turn TTFT
    tpot_max_ms: dict[str, JobStat] | None = None      # ... of each job's worst turn TPOT (turns of 2+ tokens)
    turns_mean: float | None = None
    turns_max: Number | None = None
    server_share: float | None = None         # mean over jobs of (sum of turns' send to last token) / completion
    tool_share: float | None = None           # ... of (sum of tool delays) / completion
    client_share: float | None = None         # ... of the rest: stream tails and the client's lateness
    ids: list[str] | None = None
    each_completion_ms: list[float] | None = None
    each_server_ms: list[float] | None = None
    each_tool_ms: list[float] | None = None
    each_ttft_max_ms: list[float | None] | None = None
    each_tpot_max_ms: list[float | None] | None = None
    each_turns: list[Number] | None = None

    def each(self, metric: str) -> list[float]:
        """Each complete job's figure a limit reads: job (completion), job_ttft, job_tpot (ms; none missing)."""
        values = {"job": self.each_completion_ms, "job_ttft": self.each_ttft_max_ms,
                  "job_tpot": self.each_tpot_max_ms}[metric] or []
        return [float(v) for v in values if v is not None]

    def stat(self, metric: JobMetric, stat: str) -> JobStat | None:
        """One statistic of a job figure with its interval (`stat("job", "p95")`), None where not told."""
        stats = {"job": self.completion_ms, "job_ttft": self.ttft_max_ms, "job_tpot": self.tpot_max_ms}[metric]
        return (stats or {}).get(stat)


BurstSource = Literal["server", "proxy", "upstream"]    # the server's own writes (its account), a declared
                                                      # proxy, or upstream: the server or a proxy, not told apart


class FigureBound(BaseModel):
    """The most the measured delays could have moved one figure (in its unit), and what could move it most."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    bound: float
    cause: Cause | None = None


class FigureMark(BaseModel):
    """A figure the verdict marks: its bound exceeds the tolerance (both in the figure's unit)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    cause: Cause
    bound: float
    tolerance: float


class FigureHealth(Group):
    """The client-health judgement per figure: for every published figure, how far the delays the client
    measured could have moved it (`client_bounds`, metrics/health.py), and the figures the verdict marks
    because that exceeds the stated tolerance (`client_marks`). A cell stays `ok` when some figures are
    marked; the report marks those figures only, and `compare` gives verdicts for the others.
    Per-figure client health (keys: the summary's figure names, e.g. `p99_itl_ms`, `output_throughput`)."""

    client_bounds: dict[str, FigureBound] | None = None
    token_chunks: Number | None = None          # token-bearing chunks of the ok requests
    chunks_after_stall: Number | None = None    # ... stamped in a stall's window (its catch-up included)
    chunks_coalesced: Number | None = None      # ... read in bursts (2 chunks of a request or more) while the
                                                # client's loop waited idle: the stream's shape upstream
    burst_chunks_upstream: Number | None = None  # ... of them in bursts the server's own account does not explain
    burst_size_median: float | None = None      # those idle bursts: chunks per burst (median, largest)
    burst_size_max: Number | None = None
    burst_period_ms: float | None = None        # ... median time since the request's read before
    burst_source: BurstSource | None = None     # whose shape, on the evidence (metrics/health.py)
    server_writes: Number | None = None         # chunks the server writes at once, by its own account
    server_writes_from: str | None = None       # ... where that was read (its server info, the study)
    held_upstream: bool | None = None           # the streams came in pieces: every stamp bounded by its hold
    client_marks: dict[str, FigureMark] | None = None

    def mark(self, key: str) -> FigureMark | None:
        """The figure's mark; a job figure's is its turn figure's (JOB_MARK_KEYS: `p95_job_ms` -> `p95_e2el_ms`)."""
        return (self.client_marks or {}).get(JOB_MARK_KEYS.get(key, key))


PhaseName = Literal["network", "queue", "prefill", "server_other", "delivery", "decode", "decode_other",
                    "last_delivery"]
PHASES: tuple[PhaseName, ...] = ("network", "queue", "prefill", "server_other", "delivery", "decode", "decode_other",
                                 "last_delivery")
# the phases whose sum is the client's TTFT, in the order the time passes
TTFT_PHASES: tuple[PhaseName, ...] = ("network", "queue", "prefill", "server_other", "delivery")
# ... and those whose sum is the client's time to the last token (the first token's way back runs beside decode)
LAST_PHASES: tuple[PhaseName, ...] = ("network", "queue", "prefill", "server_other", "decode", "decode_other",
                                      "last_delivery")
LedgerStat = Literal["mean", "p50", "p99"]


class PhaseLedger(Group):
    """Where the time went, from the server's spans (metrics/server.py, joined by study/traces.py): mean, p50 and
    p99 of each phase over the measured requests that joined a span, with how many joined, what else arrived,
    and the clock offset used. Keys are stored with the prefix `phase_` (`phase_mean_ms`: {"queue": ...})."""

    PREFIX: ClassVar[str] = "phase_"
    requests: Number | None = None           # measured requests that finished ok
    joined: Number | None = None             # ... whose span arrived and was read
    missing: Number | None = None            # ... without one
    unjoined_spans: Number | None = None     # request spans whose trace id is no request of the cell
    other_spans: Number | None = None        # spans that are not a request's (counted, dropped)
    dropped_payloads: Number | None = None   # exports the receiver could not decode
    clock_offset_ms: float | None = None     # server clock minus client clock
    clock_offset_error_ms: float | None = None
    clock_consistent: bool | None = None     # no joined request runs backwards beyond the offset's error
    mean_ms: dict[PhaseName, float] | None = None
    p50_ms: dict[PhaseName, float] | None = None
    p99_ms: dict[PhaseName, float] | None = None
    client_ttft_mean_ms: float | None = None  # the joined requests' client TTFT: the sum of TTFT_PHASES' means
    delivery_flagged: Number | None = None   # joined requests whose delivery exceeds the client's TTFT tolerance
    delivery_max_ms: float | None = None

    def stat(self, phase: PhaseName, statistic: LedgerStat = "mean") -> float | None:
        table = {"mean": self.mean_ms, "p50": self.p50_ms, "p99": self.p99_ms}[statistic]
        return (table or {}).get(phase)

    @property
    def prefill_ms(self) -> float | None:
        """Mean server prefill per request (ms): what splits a cell's time (and cost) into prefill and decode."""
        return self.stat("prefill")

    @property
    def decode_ms(self) -> float | None:
        """Mean server decode per request (ms)."""
        return self.stat("decode")


class ServerMeans(Group):
    """Per-cell means of the server's own request-time histograms over the measured phase (from the /metrics
    scrapes: increase of each histogram's sum / increase of its count), labelled as the server's means: they
    need no tracing but give no per-request figure and no percentile. Stored with the prefix `server_mean_`."""

    PREFIX: ClassVar[str] = "server_mean_"
    queue_ms: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    inference_ms: float | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    requests: Number | None = None           # requests the e2e histogram counted over the window


ServerSeen = Literal["deployed", "local", "remote", "container", "not_found"]


class CpuShares(Group):
    """Who used the host's CPUs over the cell's measured window (monitor/cpu.py, from the kernel's per-process
    accounting and /proc/stat; PSI from /proc/pressure/cpu where the kernel has it): tokenbench's own processes
    (the client), the server's process tree where tokenbench sees it, and everything else. Every share is in %
    of one core (100: one core busy for the whole window), as `top` shows a process. Formulas: docs/metrics.md
    ("Who used the host's CPUs")."""

    PREFIX: ClassVar[str] = "cpu_"
    window_s: float | None = None          # the measured window the counters were read over
    count: Number | None = None            # the host's CPUs (online, logical)
    host_pct: float | None = None          # busy: every process's and the kernel's time (steal included)
    client_pct: float | None = None        # tokenbench: this process, its worker processes and helpers
    client_wait_pct: float | None = None   # time the client's threads were runnable but waited for a CPU
    server_pct: float | None = None        # the server's process tree (None: not seen, `server_seen` says why)
    server_wait_pct: float | None = None   # time the server's threads were runnable but waited for a CPU
    server_seen: ServerSeen | None = None  # how the server's processes were found, or why they were not
    other_pct: float | None = None         # host - client - server (None where the server was not seen)
    psi_some_pct: float | None = None      # share of the window some runnable task waited for a CPU (PSI)
    psi_full_pct: float | None = None      # ... every non-idle task did (PSI; 0 on hosts that do not count it)

    def idle_pct(self) -> float | None:
        """The host's idle CPU over the window, % of one core."""
        if self.count is None or self.host_pct is None:
            return None
        return max(0.0, 100.0 * float(self.count) - self.host_pct)


CacheStateName = Literal["cold", "warm", "unknown"]
CacheReason = Literal["reset", "fresh_launch", "fresh_prompts", "sent_before", "no_evidence"]


class CacheState(Group):
    """Could the server's prefix cache hold this cell's prompts when it started (the study's runner decides it
    before the cell, study/prompt_cache.py)? cold: it could not (tokenbench reset the cache, launched the server
    for this run, or salted the prompts); warm: the same prompts went to the same server before; unknown:
    nothing tells. Beside it, the hit rate the server's counters measured over the cell (the usage's own:
    `cache_hit_rate`). Rules: docs/metrics.md ("Prefix-cache state")."""

    PREFIX: ClassVar[str] = "prefix_cache_"
    state: CacheStateName | None = None
    reason: CacheReason | None = None
    prompts: Literal["salted", "seeded"] | None = None   # fresh per run (the default), or reproducible (--seed)
    sent_by: str | None = None             # warm: the run that sent these prompts before
    hit_rate: float | None = None          # the server's counters over the measured phase (None: not reported)


class LaunchFacts(Group):
    """Which launch of the server the cell ran on (the study's runner, study/server_process.py): a deployment's id
    (tokenbench started it) or the local server process (its pid and start); on another host, nothing."""

    PREFIX: ClassVar[str] = "launch_"
    id: str | None = None                  # the same id: the same server process
    number: Number | None = None           # tokenbench's launch of this server config in this run (2: one relaunch)
    ours: bool | None = None               # tokenbench started the server for this run
    started: str | None = None             # when the server process started (UTC, ISO 8601), where seen
