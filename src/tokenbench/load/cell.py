"""One cell end to end: fresh exact-length prompts, warmup with the real shape, the measured phase,
then the summary and the length verification. Failures are data; the verdict is in `status`.

Bounded memory: requests are prepared as they are due (a duration cell takes as many as it needs) and
each finished record goes at once to the cell's spool file (client/spool.py), its summary figures
(metrics/tally.py) and its verdict counts (metrics/verify.Outcomes); with `keep_records=False` no record
stays in memory, so the client's memory follows the requests in flight, not those finished."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from tokenbench.client.raw_log import RawLog
from tokenbench.client.records import RequestRecord
from tokenbench.client.request import PreparedRequest, Prompt, prepare
from tokenbench.client.spool import Spool
from tokenbench.client.transport import Session, send
from tokenbench.errors import UsageError
from tokenbench.load.ray_workers import run_ray
from tokenbench.load.runner import CellRun, run_phase
from tokenbench.load.target import ResolvedTarget
from tokenbench.load.workers import run_workers
from tokenbench.metrics.tally import CellTally
from tokenbench.metrics.verify import UNREACHABLE_AFTER, Outcomes, client_health_verdict, unreachable, verdict
from tokenbench.spec.bench import SLO, Load, Workload
from tokenbench.workload.build import build_cell


@dataclass
class CellResult:
    key: str
    load: Load
    workload: Workload
    summary: dict
    records: list[RequestRecord]     # measured, in index order; empty unless run_cell kept them
    warmup: list[RequestRecord]
    status: str                      # "ok" | "failed" | "invalid" (the client could not keep up)
    message: str = ""
    notes: list[str] = field(default_factory=list)
    unreachable: str = ""            # why the server is considered gone (the cell stopped sending)
    spool: Spool | None = None       # every record (warmup, then measured as they finished), on disk
    started_ns: int | None = None    # the first measured send
    stopped: bool = False            # stopped by the user (Ctrl-C): what finished before is the cell

    def all_records(self) -> Iterable[RequestRecord]:
        """Warmup and measured records: from the spool (read back from disk) or the kept lists."""
        return self.spool if self.spool is not None else [*self.warmup, *self.records]

    @property
    def input_len(self) -> int:
        """The cell's prompt length: exact for fixed-length workloads, the mean asked for datasets."""
        return self.summary["input_len"]

    @property
    def output_len(self) -> int:
        return self.summary["output_len"]


@dataclass
class CellProgress:
    """A running cell as its progress display shows it: requests done (of `total`, None for a duration
    cell or a trace cut by its duration), and for the measured phase the output tokens per second
    since its first send and the failed requests so far (both as parsed: they trail by a few requests)."""

    phase: str
    done: int
    total: int | None
    tokens: int = 0
    errors: int = 0
    elapsed_s: float = 0.0

    def line(self) -> str:
        if self.phase != "measure" or not self.elapsed_s:
            return ""
        return f"{self.tokens / self.elapsed_s:,.0f} tok/s, {self.errors} errors, {self.elapsed_s:,.0f} s"


Progress = Callable[[CellProgress], None]
PREPARED_BYTES = 512 * 2**20   # a duration cell prepares at most this much request data (memory bound)
BYTES_PER_TOKEN = 8            # a token id in JSON ("12345,") or a word of text, with room to spare


def cell_key(workload: Workload, load: Load) -> str:
    return f"{workload.label}/{load.label}"


LAZY_KINDS = ("random", "trace")   # workloads whose prompts are made one by one as they are sent


def planned_count(load: Load, input_len: int | None = None, kind: str = "random") -> int | None:
    """Requests to prepare: num_prompts; a trace or a lazily made workload (LAZY_KINDS) of a duration
    cell: None (its rows, or the duration, decide). Other duration cells: enough for the duration at the
    asked rate (closed loop: an upper bound from 1 request per 50 ms per slot), within PREPARED_BYTES of
    prompts; a cell that still runs out before its duration says so (`prepared_exhausted_s`)."""
    if load.num_prompts is not None or load.arrival == "trace" or kind in LAZY_KINDS:
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


def repeat_first(n_warm: int, measure: Iterable[Prompt]) -> tuple[list[Prompt], Iterable[Prompt]]:
    """The warmup as vllm bench serve and sglang.bench_serving make it: the first measured prompt, once per
    warmup request (`warmup_first_prompt`); the measured prompts are unchanged (a list stays a list)."""
    rest = iter(measure)
    first = next(rest, None)
    if first is None:
        return [], []
    both = itertools.chain([first], rest)
    return [first] * n_warm, list(both) if isinstance(measure, list) else both


def _prepare(t: ResolvedTarget, wl: Workload, prompts: Iterable[Prompt]) -> Iterator[PreparedRequest]:
    """Each request's body, made when the request is taken (nothing prepared waits in memory)."""
    return (prepare(t.base_url, wl.api, t.model, p, t.api_key, t.request) for p in prompts)


class _Sink:
    """Where each finished record goes while the cell runs: the spool, the summary tally and the
    verdict counts (measured ones), and the kept lists when asked."""

    def __init__(self, slo: SLO, keep: bool) -> None:
        self.spool, self.tally, self.seen = Spool(), CellTally(slo), Outcomes()
        self.keep = keep
        self.warmup: list[RequestRecord] = []
        self.records: list[RequestRecord] = []
        self.started_ns: int | None = None
        self.tokens = 0

    def progress(self, phase: str, done: int, total: int | None) -> CellProgress:
        if phase != "measure" or self.started_ns is None:
            return CellProgress(phase, done, total)
        return CellProgress(phase, done, total, self.tokens, self.seen.failed,
                            (time.perf_counter_ns() - self.started_ns) / 1e9)

    def __call__(self, r: RequestRecord) -> None:
        self.spool.add(r)
        if r.phase == "warmup":
            if self.keep:
                self.warmup.append(r)
            return
        if r.error_kind == "cancelled":       # cut off by a stop: stored, not measured
            return
        self.tally.add(r)
        self.seen.add(r)
        self.tokens += r.output_tokens if r.ok else 0
        self.started_ns = r.sent_ns if self.started_ns is None else min(self.started_ns, r.sent_ns)
        if self.keep:
            self.records.append(r)


def _warmup_load(load: Load, count: int) -> Load | None:
    if count == 0:
        return None                      # `warmup_requests: 0`: no warmup phase at all
    width = max(1, min(count, load.in_flight_cap or count))
    return Load(concurrency=width, num_prompts=count)


async def _in_process(session: Session, warm_r: list, warm_load: Load | None, meas_r: Iterable[PreparedRequest],
                      n_meas: int | None, load: Load, seed: int, on_progress: Progress,
                      sink: _Sink, offsets: list[int] | None = None, raw: RawLog | None = None) -> CellRun:
    async def do_send(req: PreparedRequest, intended: int):
        return await send(session, req, intended)

    if warm_r and warm_load is not None:
        done = iter(range(1, len(warm_r) + 1))
        await run_phase(do_send, warm_r, warm_load, "warmup", sink=sink, raw_sink=raw,
                        on_done=lambda: on_progress(sink.progress("warmup", next(done), len(warm_r))))
    done_m = iter(range(1, 1 << 62))
    return await run_phase(do_send, meas_r, load, "measure", seed=seed, offsets=offsets, sink=sink, stoppable=True,
                           raw_sink=raw, on_done=lambda: on_progress(sink.progress("measure", next(done_m), n_meas)))


async def run_cell(session: Session, t: ResolvedTarget, wl: Workload, load: Load, slo: SLO,
                   *, allow_mismatch: bool = False, allow_client_lag: bool = False, max_error_rate: float = 0.0,
                   workers: int = 1, ray_address: str | None = None, keep_records: bool = True,
                   keep_raw: str | None = None, on_progress: Progress = lambda progress: None) -> CellResult:
    """`keep_records`: also return every record in memory (`records`, `warmup`); without it a cell of
    any length holds only the requests in flight, and its records are read back from `spool`.
    `keep_raw`: a JSONL file each request's raw response is appended to (client/raw_log.py)."""
    key = cell_key(wl, load)
    if load.arrival == "trace" and (workers > 1 or ray_address):
        raise UsageError("a trace replay runs in one client process (its arrivals are one schedule)",
                         "drop --workers / --ray for trace workloads")
    if keep_raw and (workers > 1 or ray_address):
        raise UsageError("--keep-raw records the raw bytes of one client process",
                         "drop --workers / --ray, or --keep-raw")
    n_warm = load.warmup_count()
    prompts = build_cell(t, wl, key, n_warm, planned_count(load, wl.input_len, wl.kind), duration_s=load.duration_s)
    if load.warmup_first_prompt:
        prompts.warmup, prompts.measure = repeat_first(len(prompts.warmup), prompts.measure)
    warm_r, meas_r = list(_prepare(t, wl, prompts.warmup)), _prepare(t, wl, prompts.measure)
    lengths = prompts.nominal_lengths(wl)
    n_meas = prompts.measure_count
    prompts.warmup, prompts.measure = [], []        # the requests being made hold them now (images are large)
    warm_load = _warmup_load(load, n_warm)
    sink = _Sink(slo, keep_records)
    if ray_address or workers > 1:            # dealt out before the cell: prepared, within PREPARED_BYTES
        n_meas = n_meas if n_meas is not None else planned_count(load, wl.input_len, "prepared")
        run = await _out_of_process(session, ray_address, workers, warm_r, warm_load,
                                    list(itertools.islice(meas_r, n_meas)), load, wl.seed, on_progress, sink)
    else:
        raw = RawLog(keep_raw, key) if keep_raw else None
        try:
            run = await _in_process(session, warm_r, warm_load, meas_r, n_meas, load, wl.seed, on_progress, sink,
                                    prompts.offsets_ns, raw)
        finally:
            if raw is not None:
                raw.close()
    return _result(key, t, wl, load, slo, sink, run, lengths, n_meas, prompts.notes, prompts.facts,
                   allow_mismatch, allow_client_lag, max_error_rate)


async def _out_of_process(session: Session, ray_address: str | None, workers: int, warm_r: list,
                          warm_load: Load | None, meas_r: list, load: Load, seed: int,
                          on_progress: Progress, sink: _Sink) -> CellRun:
    """Several client processes (--workers) or Ray actors: their records come back when the cell ends."""
    if ray_address:
        warm, run = await asyncio.get_running_loop().run_in_executor(
            None, run_ray, ray_address, workers, warm_r, warm_load, meas_r, load, seed, session.timeout_s)
    else:
        n = len(meas_r)
        warm, run = await run_workers(workers, warm_r, warm_load, meas_r, load, seed, session.timeout_s,
                                      on_done=lambda d: on_progress(CellProgress("measure", d, n)),
                                      connect_in_ttft=session.connect_in_ttft)
    for r in [*warm, *run.records]:
        sink(r)
    run.records = []
    return run


def _result(key: str, t: ResolvedTarget, wl: Workload, load: Load, slo: SLO, sink: _Sink, run: CellRun,
            lengths: tuple[int, int], n_meas: int | None, notes: list[str], facts: dict, allow_mismatch: bool,
            allow_client_lag: bool, max_error_rate: float) -> CellResult:
    summary = sink.tally.summary(load, *lengths)
    summary.update(run.client_health)
    summary.update(facts)
    status, message = verdict(sink.seen, allow_mismatch, max_error_rate, t.api_key is not None)
    if status == "ok":
        status, message = client_health_verdict(summary, load)
        if status == "invalid" and allow_client_lag:
            summary["client_lag_tolerated"] = message       # stays ok; report/status.py marks it '~'
            status = "ok"
    lost = unreachable(sink.seen)
    if lost:
        left = f"{n_meas - sink.seen.n} of {n_meas} requests not sent" if n_meas else "the rest not sent"
        lost = (f"server unreachable at {t.base_url}: {UNREACHABLE_AFTER} consecutive connection failures "
                f"({lost}); {left}")
        status, message = "failed", lost
        summary["server_unreachable"] = True        # `--resume` runs this cell again
    notes = notes + exhausted_note(summary, load, sink.seen.n)
    if run.stopped:
        notes.append(f"stopped by the user after {summary['stopped_after_s']:.1f} s: the cell is the "
                     f"{sink.seen.n} requests that finished before (requests cut off are stored as cancelled)")
    records = sorted(sink.records, key=lambda r: r.index)
    return CellResult(key, load, wl, summary, records, sink.warmup, status, message, notes, lost or "",
                      sink.spool, sink.started_ns, run.stopped)
