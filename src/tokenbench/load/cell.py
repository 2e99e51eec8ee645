"""One cell end to end: fresh exact-length prompts, warmup with the real shape, the measured phase,
then the summary and the length verification. Failures are data; the verdict is in `status`."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from tokenbench.client.records import RequestRecord
from tokenbench.client.request import PreparedRequest, Prompt, prepare
from tokenbench.client.transport import Session, send
from tokenbench.errors import UsageError
from tokenbench.load.ray_workers import run_ray
from tokenbench.load.runner import CellRun, run_phase
from tokenbench.load.target import ResolvedTarget
from tokenbench.load.workers import run_workers
from tokenbench.metrics.summary import summarize
from tokenbench.metrics.verify import UNREACHABLE_AFTER, client_health_verdict, unreachable, verdict
from tokenbench.spec.bench import SLO, Load, Workload
from tokenbench.workload.build import build_cell


@dataclass
class CellResult:
    key: str
    load: Load
    workload: Workload
    summary: dict
    records: list[RequestRecord]
    warmup: list[RequestRecord]
    status: str                      # "ok" | "failed" | "invalid" (the client could not keep up)
    message: str = ""
    notes: list[str] = field(default_factory=list)
    unreachable: str = ""            # why the server is considered gone (the cell stopped sending)

    @property
    def input_len(self) -> int:
        """The cell's prompt length: exact for fixed-length workloads, the mean asked for datasets."""
        return self.summary["input_len"]

    @property
    def output_len(self) -> int:
        return self.summary["output_len"]


PREPARED_BYTES = 512 * 2**20   # a duration cell prepares at most this much request data (memory bound)
BYTES_PER_TOKEN = 8            # a token id in JSON ("12345,") or a word of text, with room to spare


def cell_key(workload: Workload, load: Load) -> str:
    return f"{workload.label}/{load.label}"


def planned_count(load: Load, input_len: int | None = None) -> int | None:
    """Requests to prepare: num_prompts, or enough for the duration at the asked rate (closed loop:
    an upper bound from 1 request per 50 ms per slot), within PREPARED_BYTES of prompts. A trace: None
    (its rows decide). A cell that still runs out before its duration says so (`prepared_exhausted_s`)."""
    if load.num_prompts is not None or load.arrival == "trace":
        return load.num_prompts
    duration = load.duration_s or 0.0
    per_s = load.request_rate * 1.5 if load.request_rate else (load.concurrency or 1) * 20
    most = PREPARED_BYTES // (BYTES_PER_TOKEN * (input_len or 2048) + 512)
    return max(16, min(math.ceil(duration * per_s), most))


def exhausted_note(summary: dict, load: Load, n_meas: int) -> list[str]:
    """A duration cell that used every prepared request before its end ran shorter than asked."""
    at = summary.get("prepared_exhausted_s")
    if at is None:
        return []
    return [f"all {n_meas} prepared requests were sent after {at:.1f} s of the {load.duration_s:g} s duration: "
            f"the cell measured {at:.1f} s (use --num-prompts, or a shorter --duration)"]


def _prepare(t: ResolvedTarget, wl: Workload, prompts: list[Prompt]) -> list[PreparedRequest]:
    return [prepare(t.base_url, wl.api, t.model, p, t.api_key, t.final_usage_only) for p in prompts]


def _warmup_load(load: Load, count: int) -> Load | None:
    if count == 0:
        return None                      # `warmup_requests: 0`: no warmup phase at all
    width = max(1, min(count, load.in_flight_cap or count))
    return Load(concurrency=width, num_prompts=count)


async def _in_process(session: Session, warm_r: list, warm_load: Load | None, meas_r: list, load: Load, seed: int,
                      on_progress: Callable[[str, int, int], None],
                      offsets: list[int] | None = None) -> tuple[list, CellRun]:
    async def do_send(req: PreparedRequest, intended: int):
        return await send(session, req, intended)

    warm: list = []
    if warm_r and warm_load is not None:
        done = iter(range(1, len(warm_r) + 1))
        warm = (await run_phase(do_send, warm_r, warm_load, "warmup",
                                on_done=lambda: on_progress("warmup", next(done), len(warm_r)))).records
    done_m = iter(range(1, len(meas_r) + 1))
    run = await run_phase(do_send, meas_r, load, "measure", seed=seed, offsets=offsets,
                          on_done=lambda: on_progress("measure", next(done_m), len(meas_r)))
    return warm, run


async def run_cell(session: Session, t: ResolvedTarget, wl: Workload, load: Load, slo: SLO,
                   *, allow_mismatch: bool = False, allow_client_lag: bool = False, max_error_rate: float = 0.0, workers: int = 1,
                   ray_address: str | None = None,
                   on_progress: Callable[[str, int, int], None] = lambda phase, done, total: None) -> CellResult:
    key = cell_key(wl, load)
    if load.arrival == "trace" and (workers > 1 or ray_address):
        raise UsageError("a trace replay runs in one client process (its arrivals are one schedule)",
                         "drop --workers / --ray for trace workloads")
    n_warm = load.warmup_count()
    prompts = build_cell(t, wl, key, n_warm, planned_count(load, wl.input_len), duration_s=load.duration_s)
    warm_r, meas_r = _prepare(t, wl, prompts.warmup), _prepare(t, wl, prompts.measure)
    lengths = prompts.nominal_lengths(wl)
    prompts.warmup = prompts.measure = []          # the prepared bodies hold them now (images are large)
    n_meas = len(meas_r)
    warm_load = _warmup_load(load, n_warm)
    if ray_address:
        warm, run = await asyncio.get_running_loop().run_in_executor(
            None, run_ray, ray_address, workers, warm_r, warm_load, meas_r, load, wl.seed, session.timeout_s)
    elif workers > 1:
        warm, run = await run_workers(workers, warm_r, warm_load, meas_r, load, wl.seed, session.timeout_s,
                                      on_done=lambda d: on_progress("measure", d, n_meas),
                                      connect_in_ttft=session.connect_in_ttft)
    else:
        warm, run = await _in_process(session, warm_r, warm_load, meas_r, load, wl.seed, on_progress,
                                      prompts.offsets_ns)
    summary = summarize(run.records, load, *lengths, slo)
    summary.update(run.client_health)
    summary.update(prompts.facts)
    status, message = verdict(run.records, allow_mismatch, max_error_rate, t.api_key is not None)
    if status == "ok":
        status, message = client_health_verdict(summary, load)
        if status == "invalid" and allow_client_lag:
            summary["client_lag_tolerated"] = message       # stays ok; report/status.py marks it '~'
            status = "ok"
    lost = unreachable(run.records)
    if lost:
        lost = (f"server unreachable at {t.base_url}: {UNREACHABLE_AFTER} consecutive connection failures "
                f"({lost}); {n_meas - len(run.records)} of {n_meas} requests not sent")
        status, message = "failed", lost
        summary["server_unreachable"] = True        # `--resume` runs this cell again
    notes = prompts.notes + exhausted_note(summary, load, n_meas)
    return CellResult(key, load, wl, summary, run.records, warm, status, message, notes, lost or "")
