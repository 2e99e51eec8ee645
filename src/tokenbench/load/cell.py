"""One cell end to end: fresh exact-length prompts, warmup with the real shape, the measured phase,
then the summary and the length verification. Failures are data; the verdict is in `status`. A cell is
one `CellJob`, built by the study's cells (study/cells.py) for `bench`, `sweep`, `demo`, `calibrate`,
`agree` and the tests alike, and handed down whole: `run_cell(session, job)`.

Bounded memory: requests are prepared as they are due (a duration cell takes as many as it needs) and
each finished record goes at once to the cell's spool file (client/spool.py) and its tally (metrics/tally.py:
the summary's figures and the verdict's counts); with `keep_records=False` no record stays in memory, so the
client's memory follows the requests in flight, not those finished. When the requests are done, the tally
and what the runner measured go to metrics/cell.finish, which makes the summary and the verdict."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from tokenbench.client.records import Phase, RequestRecord
from tokenbench.client.request import PreparedRequest, Prompt, RequestOptions, prepare
from tokenbench.client.spool import Spool
from tokenbench.client.transport import Session
from tokenbench.errors import UsageError
from tokenbench.load.arrivals import arrival_seed
from tokenbench.load.clock import ctrl_c_raises
from tokenbench.load.executors import Executor, InProcess
from tokenbench.load.runner import CellRun, Cutoff, Phases, Sessions, Work
from tokenbench.load.target import Endpoint
from tokenbench.metrics.cell import Measured, ServerSide, finish
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.health import Delivery
from tokenbench.metrics.summary import job_figures, shape_of, theory_figures, turn_figures
from tokenbench.metrics.summary_groups import ClientHealth, JobFigures, SessionFigures, WorkloadFacts
from tokenbench.metrics.tally import CellTally
from tokenbench.metrics.verdict import Verdict, VerdictPolicy
from tokenbench.spec.bench import SLO, Load, Workload
from tokenbench.spec.keys import cell_key
from tokenbench.workload.build import CellPrompts, build_cell, tokenizer_for

if TYPE_CHECKING:                    # a sessions cell's conversations: imported where one is made (_sessions)
    from tokenbench.workload.sessions import Context


@dataclass(kw_only=True)
class CellResult:
    key: str
    load: Load
    workload: Workload
    summary: CellSummary
    records: list[RequestRecord]     # measured, in index order; empty unless run_cell kept them
    warmup: list[RequestRecord]
    verdict: Verdict                 # "ok" | "failed" | "interrupted", why, and the figures the client's delays may have moved
    notes: list[str] = field(default_factory=list)
    spool: Spool | None = None       # every record (warmup, then measured as they finished), on disk
    started_ns: int | None = None    # the first measured send
    ended_ns: int | None = None      # the last measured byte
    stopped: bool = False            # stopped by the user (Ctrl-C): stored as interrupted, measured again

    @property
    def status(self) -> str:
        return self.verdict.status

    @property
    def message(self) -> str:
        return self.verdict.message

    @property
    def unreachable(self) -> str:
        """Why the server is considered gone (the cell stopped sending); "" while it answered."""
        return self.verdict.unreachable or ""

    def all_records(self) -> Iterable[RequestRecord]:
        """Warmup and measured records: from the spool (read back from disk) or the kept lists."""
        return self.spool if self.spool is not None else [*self.warmup, *self.records]

    @property
    def input_len(self) -> int:
        """The cell's prompt length: exact for fixed-length workloads, the mean asked for datasets."""
        return int(self.summary.input_len or 0)

    @property
    def output_len(self) -> int:
        return int(self.summary.output_len or 0)


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


def _quiet(progress: CellProgress) -> None:
    return None


class Watch(Protocol):
    """Who watches the server while a cell runs (the study's monitor, study/monitoring.CellMonitor): told
    when the warmup has ended (the measured phase's counters count from there), asked what the server
    said once the measured phase is over (`records`: the cell's, warmup included, read again on each pass)."""

    def warmed(self) -> None: ...
    async def read(self, measured: Measured, records: Iterable[RequestRecord]) -> ServerSide: ...


class Unwatched:
    """No monitor: the server says nothing."""

    def warmed(self) -> None:
        return None

    async def read(self, measured: Measured, records: Iterable[RequestRecord]) -> ServerSide:
        return ServerSide()


@dataclass(frozen=True, kw_only=True)
class CellJob:
    """One cell, handed down whole with what it needs and nothing else: the server, what to send under
    which load, how each request is made (the client options), what its figures and verdict need (the
    SLOs for goodput, the timeslice width, the verdict options: each declared once, on the study's spec,
    and read there by the study's runner), where its requests are sent from, who watches the server."""

    endpoint: Endpoint
    workload: Workload
    load: Load
    request: RequestOptions              # the client options: each request's shape (study/cells.request_options)
    policy: VerdictPolicy                # the verdict options: what the cell tolerates, the server it names
    slo: SLO = field(default_factory=SLO)   # goodput's SLOs
    timeslice_s: float = 10.0            # the width of the cell's timeslices
    executor: Executor = InProcess()     # chosen once per study (load/executors.executor_for)
    keep_records: bool = False           # also return every record in memory (else read back from the spool)
    on_progress: Progress = _quiet
    watch: Watch = Unwatched()

    @property
    def key(self) -> str:
        return cell_key(self.workload, self.load)


PREPARED_BYTES = 512 * 2**20   # a duration cell prepares at most this much request data (memory bound)
BYTES_PER_TOKEN = 8            # a token id in JSON ("12345,") or a word of text, with room to spare


LAZY_KINDS = ("random", "text", "trace")   # workloads whose prompts are made one by one as they are sent


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


def exhausted_note(health: ClientHealth, load: Load, n_meas: int) -> list[str]:
    """A duration cell that used every prepared request before its end ran shorter than asked."""
    at = health.prepared_exhausted_s
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


def _prepare(job: CellJob, prompts: Iterable[Prompt]) -> Iterator[PreparedRequest]:
    """Each request's body, made when the request is taken (nothing prepared waits in memory)."""
    return (_prepare_one(job, p) for p in prompts)


def _prepare_one(job: CellJob, p: Prompt) -> PreparedRequest:
    e = job.endpoint
    return prepare(e.base_url, job.workload.api, e.model, p, e.api_key, job.request)


@dataclass
class _Work:
    """A cell's requests before it runs: the warmup's prompts (and the workload's facts and notes), the
    measured work (requests made as they are taken, or a sessions cell's conversations), the measured
    requests planned, and what a sessions cell's conversations share (how they went, filled in as they run)."""

    prompts: CellPrompts
    measure: Work
    count: int | None
    context: Context | None = None
    cutoff: Cutoff = field(default_factory=Cutoff)


def _requests(job: CellJob, n_warm: int) -> _Work:
    wl, load = job.workload, job.load
    prompts = build_cell(job.endpoint, wl, job.key, n_warm, planned_count(load, wl.input_len, wl.kind),
                         duration_s=load.duration_s)
    if load.warmup_first_prompt:
        prompts.warmup, prompts.measure = repeat_first(len(prompts.warmup), prompts.measure)
    return _Work(prompts, _prepare(job, prompts.measure), prompts.measure_count)


def _session_facts(wl: Workload, warm: CellPrompts) -> WorkloadFacts:
    """The workload facts of a sessions cell: the kind, the prompt lengths its turns ask (as planned, with
    answers of output_len), and the warmup's tokenizer and chat-template facts."""
    turns, sys, ilen, olen = wl.turns or 1, wl.system_prompt_len or 0, wl.input_len or 0, wl.output_len or 0
    lengths = [sys + (k + 1) * ilen + k * olen for k in range(turns)]
    return warm.facts.of_sessions(lengths)


def _warmup(job: CellJob, n_warm: int, input_len: int, output_len: int | None) -> CellPrompts:
    """A sessions cell's warmup: single random prompts of the first turn's shape (no session, nothing shared
    with the measured sessions)."""
    wl = job.workload
    warm_wl = Workload(api=wl.api, input_len=max(1, input_len), output_len=output_len, seed=wl.seed,
                       salt=wl.salt, tokenizer_path=wl.tokenizer_path, vocab_size=wl.vocab_size)
    return build_cell(job.endpoint, warm_wl, job.key, n_warm, 0)


def _cutoff(load: Load, kind: str) -> Cutoff:
    return Cutoff(load.window or ("first-user" if kind == "trajectories" else "all"))


def _sessions(job: CellJob, n_warm: int) -> _Work:
    """A sessions cell: the warmup, then the conversations (workload/sessions.py); trajectories: _trajectories."""
    from tokenbench.workload.sessions import Context, Maker, conversations
    wl, load = job.workload, job.load
    if wl.kind == "trajectories":
        return _trajectories(job, n_warm)
    prompts = _warmup(job, n_warm, (wl.system_prompt_len or 0) + (wl.input_len or 1), wl.output_len)
    prompts.facts, prompts.length_means = _session_facts(wl, prompts), None
    tok = tokenizer_for(job.endpoint, wl)
    ctx = Context(wl=wl, make=lambda p: _prepare_one(job, p), tok=tok)
    items = conversations(job.endpoint, Maker(wl, job.key, job.endpoint.vocab, tok), ctx, load.num_sessions)
    count = load.num_sessions * (wl.turns or 1) if load.num_sessions else None
    cutoff = _cutoff(load, wl.kind)
    return _Work(prompts, Sessions(items, load.num_sessions, cutoff), count, ctx, cutoff)


def _trajectories(job: CellJob, n_warm: int) -> _Work:
    """A trajectories cell: its corpus resolved (refused, or its unreplayable trajectories stated), a warmup
    of the first turn's shape, then one session per trajectory of each pass (workload/trajectories.py)."""
    from tokenbench.workload.sessions import Context, Conversation
    from tokenbench.workload.trajectories import CacheOracle, TrajectoryMaker, replay
    wl, load, e = job.workload, job.load, job.endpoint
    tok = tokenizer_for(e, wl)
    r = replay(wl, job.key, e.vocab, tok, e.max_model_len)
    first = r.trajectories[0]
    prompts = _warmup(job, n_warm, len(first.system) + len(first.news[0]), first.outputs[0])
    sessions = load.num_sessions or (None if load.duration_s else len(r.trajectories))
    prompts.facts = r.facts(wl, prompts.facts, sessions)
    prompts.length_means = (round(prompts.facts.input_len_mean or 0), round(prompts.facts.output_len_mean or 0))
    prompts.notes += r.notes()
    ctx = Context(wl=wl, make=lambda p: _prepare_one(job, p), tok=tok, oracle=CacheOracle(wl.cache_block_size))
    items = (Conversation(plan, ctx) for plan in TrajectoryMaker(wl, job.key, e.vocab, r).plans(sessions))
    turns = [len(t.news) for t in r.trajectories]
    count = sum(turns[n % len(turns)] for n in range(sessions)) if sessions is not None else None
    cutoff = _cutoff(load, wl.kind)
    return _Work(prompts, Sessions(items, sessions, cutoff), count, ctx, cutoff)


class _Intake:
    """Where each finished record goes while the cell runs: the spool, the tally (measured ones), and
    the kept lists when asked; and the cell's progress."""

    def __init__(self, tally: CellTally, job: CellJob, cutoff: Cutoff) -> None:
        self.spool, self.tally, self.cutoff = Spool(), tally, cutoff
        self.keep, self.on_progress, self.watch = job.keep_records, job.on_progress, job.watch
        self.warmup: list[RequestRecord] = []
        self.records: list[RequestRecord] = []
        self.started_ns: int | None = None
        self.ended_ns: int | None = None
        self.tokens = 0
        self.cut = 0                    # measured requests cut off by a stop (Ctrl-C)

    def progress(self, phase: str, done: int, total: int | None) -> CellProgress:
        if phase != "measure" or self.started_ns is None:
            return CellProgress(phase, done, total)
        return CellProgress(phase, done, total, self.tokens, self.tally.outcomes.failed,
                            (time.perf_counter_ns() - self.started_ns) / 1e9)

    def done(self, phase: Phase, n: int, total: int | None) -> None:
        if phase == "warmup" and n == total:
            self.watch.warmed()
        self.on_progress(self.progress(phase, n, total))

    def __call__(self, r: RequestRecord) -> None:
        self.spool.add(r)
        if r.phase == "warmup":
            if self.keep:
                self.warmup.append(r)
            return
        if r.error_kind == "cancelled":       # cut off by a stop: stored, not measured
            self.cut += 1
            return
        in_window = self.cutoff.measured(r)
        self.tally.add(r, in_window)
        if not in_window:
            return
        self.tokens += r.output_tokens if r.ok else 0
        self.started_ns = r.sent_ns if self.started_ns is None else min(self.started_ns, r.sent_ns)
        self.ended_ns = r.end_ns if self.ended_ns is None else max(self.ended_ns, r.end_ns)
        if self.keep:
            self.records.append(r)


def _warmup_load(load: Load, count: int) -> Load | None:
    if count == 0:
        return None                      # `warmup_requests: 0`: no warmup phase at all
    return Load(concurrency=load.warmup_width, num_prompts=count)


async def run_cell(session: Session, job: CellJob) -> CellResult:
    """Prompts, warmup, the measured phase (on the job's executor), then the summary and the verdict."""
    wl, load = job.workload, job.load
    if wl.sessions_like != load.sessions:
        raise UsageError(f"cell {job.key}: a sessions workload runs under a load of users or session starts, "
                         "and only it does", "give users (--users) or session_rate (--session-rate) with "
                         "--dataset-name sessions")
    if wl.kind == "sessions" and load.num_sessions is None and load.duration_s is None:
        raise UsageError(f"cell {job.key}: a sessions cell needs a count of sessions or a duration",
                         "give num_sessions (--num-sessions) or duration_s (--duration)")
    n_warm = load.warmup_count()
    with ctrl_c_raises():
        work = _sessions(job, n_warm) if load.sessions else _requests(job, n_warm)
        warmup = list(_prepare(job, work.prompts.warmup))
    prompts = work.prompts
    phases = Phases(key=job.key, warmup=warmup, warmup_load=_warmup_load(load, n_warm),
                    measure=work.measure, load=load, seed=arrival_seed(wl.seed, job.key), count=work.count,
                    limit=planned_count(load, wl.input_len, "prepared") or 0, offsets=prompts.offsets_ns)
    prompts.warmup, prompts.measure = [], []        # the requests being made hold them now (images are large)
    intake = _Intake(CellTally(job.slo, job.timeslice_s, sessions=load.sessions), job, work.cutoff)
    run = await job.executor.run(session, phases, intake)
    return await _result(job, work, phases, intake, run)


def _session_groups(job: CellJob, ctx: Context, tally: CellTally, window: tuple[Cutoff, int | None]
                    ) -> tuple[SessionFigures, JobFigures | None]:
    """A sessions cell's groups: its shape, how its sessions went, its figures by turn (with the theoretical
    hit where an oracle counted it), where its measured window ended; and its jobs."""
    fb, (cutoff, started) = ctx.feedback, window
    went = {"started": fb.started, "completed": fb.completed, "cut_short": fb.cut_short,
            "replies_returned_ids": fb.returned_ids, "replies_retokenized": fb.retokenized, "replies_fixed": fb.fixed}
    shape = shape_of(job.workload, job.load)
    by_turn: dict[str, object] = {**turn_figures(tally.turns)} if tally.turns is not None else {}
    if ctx.oracle is not None and tally.turns is not None:
        by_turn = {**by_turn, **theory_figures(tally.turns, ctx.theory), "cache_block_size": ctx.oracle.block}
    end = (cutoff.end_ns - started) / 1e9 if cutoff.end_ns is not None and started is not None else None
    told = {"window": cutoff.mode, "window_end_s": end, "outside_requests": tally.outside}
    groups = SessionFigures.model_validate({**shape.model_dump(exclude_unset=True), **went, **by_turn, **told})
    return groups, job_figures(tally.jobs, ctx.planned) if tally.jobs is not None else None


async def _result(job: CellJob, work: _Work, phases: Phases, sink: _Intake, run: CellRun) -> CellResult:
    wl, load, prompts, health, tally = job.workload, job.load, work.prompts, run.client_health, sink.tally
    ctx = work.context
    sessions, jobs = _session_groups(job, ctx, tally, (work.cutoff, sink.started_ns)) if ctx else (None, None)
    e = job.endpoint
    delivery = Delivery(e.server_writes, e.server_writes_from, e.via_proxy)
    measured = Measured(tally=tally, load=load, lengths=prompts.nominal_lengths(wl), health=health,
                        slot_waits=run.slot_waits, arrival_seed=phases.seed, planned=phases.count,
                        window=(sink.started_ns, sink.ended_ns), stopped=run.stopped, cut=sink.cut,
                        groups=(prompts.facts, sessions, jobs), delivery=delivery)
    summary, verdict = finish(measured, await job.watch.read(measured, sink.spool), job.policy)
    notes = prompts.notes + exhausted_note(health, load, tally.outcomes.n)
    notes += [ctx.feedback.problem] if ctx is not None and ctx.feedback.problem else []
    records = sorted(sink.records, key=lambda r: r.index)
    return CellResult(key=job.key, load=load, workload=wl, summary=summary, records=records, warmup=sink.warmup,
                      verdict=verdict, notes=notes, spool=sink.spool, started_ns=sink.started_ns,
                      ended_ns=sink.ended_ns, stopped=run.stopped)
