"""What a cell keeps while it runs, fed every measured record once as it finishes (in any order): a few
numbers per request in compact arrays (8 bytes each), the token-bearing chunks in a TokenLog (exact up to
FOLD_CHUNKS chunks, then folded into a histogram of stated error: metrics/token_log.py), the reads of many
chunks (`Reads`), what the verdict needs (`Outcomes`), a sessions cell's requests by turn (`TurnTally`,
only there); beside them what the load runner keeps (the sends' slot waits, `SlotWaits`; the stalls its
loop-lag probe saw, `Stalls`, each with its cause). Never the records themselves: a cell of any length
is tallied in memory that grows by well under 1 KB per request. The figures are computed from this
afterwards (metrics/summary.py). Formulas: docs/metrics.md.

A stall's cause is one of:
- `client_cpu`: the loop's thread was on the CPU the whole time: its own work held it (client overloaded);
- `host_contention`: it was runnable but not running: other processes had the CPU (the kernel's run delay,
  /proc/thread-self/schedstat);
- `client_stopped`: neither running nor waiting for a CPU: the process was stopped (SIGSTOP, a debugger,
  a frozen cgroup) or blocked in a system call or a page fault;
- `client_delay`: late, cause unknown (the kernel's run delay could not be read);
- `buffering`: not the client at all: the stream came in pieces while its loop waited idle, held upstream
  (by the server or a proxy; named only on evidence: metrics/health.py)."""

from __future__ import annotations

import operator
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from tokenbench.client.records import OUT_OF_FILES, RequestRecord
from tokenbench.lazy import lazy_module
from tokenbench.metrics import request as rm
from tokenbench.metrics.token_log import TokenLog
from tokenbench.spec.bench import SLO

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")   # imported where first used (tokenbench/lazy.py)

UNREACHABLE_AFTER = 3     # the load runner stops sending after this many consecutive `connect` failures
KEEP_BAD = 100            # requests with a wrong length kept to diagnose the cause
PIECE_CHUNKS = 2          # a read of at least this many token chunks of one request is a burst
BURSTS_KEPT = 1 << 16     # bursts kept one by one (64 bytes each: 4 MiB at most); later ones are counted
Cause = Literal["client_cpu", "host_contention", "client_stopped", "client_delay", "buffering"]
CLIENT_CAUSES: tuple[Cause, ...] = ("client_cpu", "host_contention", "client_stopped", "client_delay")
CAUSES: tuple[Cause, ...] = (*CLIENT_CAUSES, "buffering")

PROBE_RESOLUTION_NS = 2_000_000   # an idle loop's timer still wakes up this late (epoll timeouts are whole ms,
                                  # a VM's timer jitter adds about 1 ms: p99 2.1-2.4 ms on an idle 2-core VM
                                  # while calibrate's delivery error stayed under 0.4 ms); a later wake is a stall





class _Columns:
    """One int64 column per name, appended together."""

    def __init__(self, *names: str) -> None:
        self.cols = {n: array("q") for n in names}

    def add(self, *values: int) -> None:
        for col, v in zip(self.cols.values(), values, strict=True):
            col.append(v)

    def np(self, name: str) -> np.ndarray:
        return np.frombuffer(self.cols[name], dtype=np.int64) if self.cols[name] else np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(next(iter(self.cols.values())))


class CellTally:
    """Feed every measured record once (`add`, in any order); metrics/summary.py reads the figures from it.
    A sessions cell (`sessions`) also keeps its requests by turn."""

    def __init__(self, slo: SLO | None = None, slice_s: float = 10.0, sessions: bool = False) -> None:
        self.slo = slo if slo is not None and not slo.is_empty() else None
        self.slice_s = slice_s                         # width of the cell's timeslices (metrics/timeslices.py)
        self.all = _Columns("sent", "end", "intended", "wrote", "connect")
        self.ok = _Columns("sent", "end", "first", "last", "ttfc", "out", "prompt", "queue", "connect")
        self.tokens = TokenLog()                       # chunk times and counts (bounded: metrics/token_log.py)
        self.reads = Reads()                           # what each read carried: bursts, holds (metrics/health.py)
        self.outcomes = Outcomes()                     # what the verdict needs (metrics/verdict.py)
        self.turns = TurnTally() if sessions else None   # a sessions cell's requests by turn
        self.jobs = JobTally() if sessions else None     # ... and by job, every turn of each
        self.outside = 0                               # measured-phase requests sent after the window ended
        self.zero_token = 0                            # ok requests without a token-bearing chunk
        self.kinds, self.usage_source, self.count_source = Counter[str](), Counter[str](), Counter[str]()
        self.length_mismatches = self.reasoning_tokens = self.reasoning_requests = self.good = 0
        self.cache = [0, 0, 0]                         # cached tokens, their prompts' tokens, requests telling
        self.prompt_diff: list[int] = [0, 0, 0]        # disagreeing, sum of differences, largest |difference|
        self.prompt_told = 0
        self.images = [0, 0, 0, 0]                     # any sent (all requests), sent by ok, their bytes, counted
        self.images_counted = False
        self.early = array("q")                        # output lengths of the answers ended early (EarlyEnds)

    def __len__(self) -> int:
        return len(self.all)

    def add(self, r: RequestRecord, in_window: bool = True) -> None:
        """A measured record; one sent after a sessions cell's window ended (`in_window` False) counts for its
        job only."""
        if self.jobs is not None:
            self.jobs.add(r)
        if not in_window:
            self.outside += 1
            return
        self.outcomes.add(r)
        if self.turns is not None:
            self.turns.add(r)
        self.all.add(r.sent_ns, r.end_ns, r.intended_ns, r.sent_ns + (r.connect_ns if r.connect_in_ttft else 0),
                     r.connect_ns)
        self.length_mismatches += bool(r.length_error)
        self.images[0] += r.images
        if not r.ok:
            self.kinds[r.error_kind or ""] += 1
            return
        self._add_ok(r)

    def _add_ok(self, r: RequestRecord) -> None:
        first, last = (r.token_times_ns[0], r.token_times_ns[-1]) if r.token_times_ns else (-1, -1)
        self.ok.add(r.sent_ns, r.end_ns, first, last, -1 if r.first_content_ns is None else r.first_content_ns,
                    r.output_tokens, r.prompt_tokens or r.input_len, r.queue_ns, r.connect_ns)
        self.tokens.add(r.token_times_ns, r.token_counts)
        self.reads.add(r.token_times_ns, r.sent_ns)
        self.zero_token += not r.token_times_ns
        if r.output_tokens < r.output_len and not r.length_error:
            self.early.append(r.output_tokens)
        self.usage_source[r.usage_source] += 1
        self.count_source[r.count_source] += 1
        self.reasoning_tokens += r.reasoning_tokens
        self.reasoning_requests += bool(r.reasoning_tokens)
        if self.slo is not None:
            self.good += rm.meets_slo(r, self.slo)
        if r.cached_tokens is not None and r.prompt_tokens:
            self.cache[0] += r.cached_tokens
            self.cache[1] += r.prompt_tokens
            self.cache[2] += 1
        if r.prompt_tokens is not None and r.expected_prompt_tokens is not None:
            d = r.prompt_tokens - r.expected_prompt_tokens
            self.prompt_told += 1
            self.prompt_diff[0] += bool(d)
            self.prompt_diff[1] += d
            self.prompt_diff[2] = d if abs(d) > abs(self.prompt_diff[2]) else self.prompt_diff[2]
        self.images[1] += r.images
        self.images[2] += r.image_bytes
        if r.image_count is not None:
            self.images[3] += r.image_count
            self.images_counted = True

    def completed(self) -> int:
        """The ok requests (the summary's completed)."""
        return len(self.ok)

    def output_tokens(self) -> int:
        """Output tokens of the ok requests (the summary's total_output_tokens)."""
        return int(self.ok.np("out").sum())

    def send_times(self) -> SendTimes:
        """Every measured send's due, write and connect times (metrics/summary.send_rates)."""
        return SendTimes(self.all.np("intended"), self.all.np("wrote"), self.all.np("connect"))


def _reads(times: list[int]) -> list[tuple[int, int]]:
    """(stamp, chunks) of each read, in order (chunks of one read share its stamp)."""
    return [(t, sum(1 for _ in group)) for t, group in groupby(times)]


class Reads:
    """What the client saw, read by read (a read's token chunks share its stamp), kept as the cell's requests
    are tallied (docs/metrics.md, "Client health"):
    - every burst, a read that carried PIECE_CHUNKS token chunks of one request or more: its stamp, its
      `base` (the stamp two reads earlier, the request's send for its first two reads: none of the burst's
      chunks can have been in the socket before it, a piece may end inside an event), the ITL gaps it
      touches, its chunks, the stamp of the request's read before (`prev`: its send for a first read), the
      request's pace (`pace`: its mean time between token chunks, first to last; 0 with one read), its
      request (`req`: the ok request's place in the tally) and whether it was that request's first read
      (`pos` bit 1) or last (bit 2);
    - per ok request, in the tally's order: the bases of its first token's read, of its last token's read
      and of its end (the read before the last token's: the end comes with the last token or after it),
      and the largest `stamp - base` of its reads (`hold`).
    Whether a burst is the client's (a stall held the loop) or the stream's shape upstream (the loop waited
    idle) is decided once the stalls are known (metrics/health.py). At most BURSTS_KEPT bursts are kept one by
    one; later ones are counted (`more_chunks`) and taken as the kept ones were."""

    def __init__(self) -> None:
        self.stamp, self.base, self.gaps, self.chunks, self.prev, self.pace, self.req, self.pos = (
            array("q") for _ in range(8))
        self.requests = _Columns("first", "last", "end", "hold")
        self.more_chunks = 0

    def add(self, times: list[int], sent: int) -> None:
        if not times:
            self.requests.add(sent, sent, sent, 0)
            return
        if not any(map(operator.eq, times, times[1:])):          # a read per chunk: the common case, in C
            stamps = [sent, sent, *times]
            hold = max(times[min(1, len(times) - 1)] - sent, max(map(operator.sub, times[2:], times), default=0))
            self.requests.add(sent, stamps[len(times) - 1], stamps[len(times)], hold)
            return
        reads = _reads(times)
        stamps = [sent, sent, *(t for t, _ in reads)]            # stamps[g]: two reads before read g
        last = len(reads) - 1
        hold = max(t - stamps[g] for g, (t, _) in enumerate(reads))
        self.requests.add(stamps[0], stamps[last], stamps[last + 1], hold)
        self._bursts(reads, stamps, (times[-1] - times[0]) // (len(times) - 1))

    def _bursts(self, reads: list[tuple[int, int]], stamps: list[int], pace: int) -> None:
        for g, (t, n) in enumerate(reads):
            if n < PIECE_CHUNKS:
                continue
            if len(self.stamp) >= BURSTS_KEPT:
                self.more_chunks += n
                continue
            out = g + 1 < len(reads) and reads[g + 1][1] < PIECE_CHUNKS    # the gap out, unless the next owns it
            self.stamp.append(t)
            self.base.append(stamps[g])
            self.gaps.append(n - 1 + (g > 0) + out)
            self.chunks.append(n)
            self.prev.append(reads[g - 1][0] if g else stamps[0])
            self.pace.append(pace)
            self.req.append(len(self.requests) - 1)
            self.pos.append((g == 0) | (g == len(reads) - 1) << 1)

    def bursts(self) -> dict[str, np.ndarray]:
        """stamp, base, gaps, chunks, prev, pace, req, pos of every burst kept (ns and counts)."""
        def view(a: array) -> np.ndarray:
            return np.frombuffer(a, np.int64) if a else np.zeros(0, np.int64)
        return {k: view(getattr(self, k)) for k in ("stamp", "base", "gaps", "chunks", "prev", "pace", "req", "pos")}


class Outcomes:
    """What the verdict needs of a cell's requests, fed one by one as they finish (in any order):
    counts, the first request and the first failure by index, up to KEEP_BAD requests with a wrong
    length, and the last UNREACHABLE_AFTER in send order."""

    def __init__(self) -> None:
        self.n = self.mismatched = self.failed = 0
        self.kinds, self.codes = Counter[str | None](), Counter[int | None]()
        self.first: RequestRecord | None = None
        self.first_failed: RequestRecord | None = None
        self.bad: list[RequestRecord] = []
        self.tail: list[tuple[int, int, RequestRecord]] = []
        self.out_of_files: RequestRecord | None = None     # a connection the client's own file limit refused

    @classmethod
    def of(cls, recs: Sequence[RequestRecord]) -> Outcomes:
        out = cls()
        for r in recs:
            out.add(r)
        return out

    def add(self, r: RequestRecord) -> None:
        self.n += 1
        if self.first is None or r.index < self.first.index:
            self.first = r
        if r.length_error:
            self.mismatched += 1
            if len(self.bad) < KEEP_BAD:
                self.bad.append(r)
        if not r.ok:
            self.failed += 1
            self.kinds[r.error_kind] += 1
            if self.first_failed is None or r.index < self.first_failed.index:
                self.first_failed = r
            if self.out_of_files is None and r.error_kind == "connect" and OUT_OF_FILES in r.error_detail:
                self.out_of_files = r
        if r.error_kind == "http_status":
            self.codes[r.status] += 1
        self.tail = sorted([*self.tail, (r.sent_ns, r.index, r)], key=lambda e: e[:2])[-UNREACHABLE_AFTER:]


@dataclass
class Turn:
    prompt: list[int] = field(default_factory=list)
    cached: list[int] = field(default_factory=list)       # of requests that reported cached tokens
    cached_prompt: list[int] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)     # whose prompts `prompt` holds, in order


class TurnTally:
    """Completed measured requests by turn index (a few numbers each)."""

    def __init__(self) -> None:
        self.turns: dict[int, Turn] = {}

    def add(self, r: RequestRecord) -> None:
        if r.turn is None or not r.ok or r.phase != "measure":
            return
        t = self.turns.setdefault(r.turn, Turn())
        prompt = r.prompt_tokens if r.prompt_tokens is not None else r.input_len
        t.prompt.append(prompt)
        t.sessions.append(r.session_id or "")
        if r.cached_tokens is not None:
            t.cached.append(r.cached_tokens)
            t.cached_prompt.append(prompt)
        if (ttft := rm.ttft_ms(r)) is not None:
            t.ttft.append(ttft)
        if (tpot := rm.tpot_ms(r)) is not None:
            t.tpot.append(tpot)


@dataclass(frozen=True, slots=True)
class JobTurn:
    """One turn of a job (a session, a trajectory), as the job figures need it (ns; ms for TTFT and TPOT)."""

    sent: int
    last: int                 # the last token (or the end, without a token)
    ok: bool
    ttft: float | None
    tpot: float | None

    @classmethod
    def of(cls, r: RequestRecord) -> JobTurn:
        last = r.token_times_ns[-1] if r.token_times_ns else r.end_ns
        return cls(r.sent_ns, last, r.ok, rm.ttft_ms(r) if r.ok else None,
                   rm.tpot_ms(r) if r.ok else None)


class JobTally:
    """Every measured turn of a sessions cell by job (session id) and turn index, the turns sent after its
    measured window ended included (a job is measured whole: metrics/summary.job_figures)."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[int, JobTurn]] = {}

    def add(self, r: RequestRecord) -> None:
        if r.session_id is None or r.turn is None or r.phase != "measure":
            return
        self.jobs.setdefault(r.session_id, {})[r.turn] = JobTurn.of(r)


@dataclass
class SlotWaits:
    """Sends that found every `--max-concurrency` slot taken, and how long they waited for one (ns)."""

    sends: int = 0
    total_ns: int = 0

    def add(self, waited_ns: int) -> None:
        self.sends += 1
        self.total_ns += max(0, waited_ns)

    def merged(self, others: list[SlotWaits]) -> SlotWaits:
        parts = [self, *others]
        return SlotWaits(sum(p.sends for p in parts), sum(p.total_ns for p in parts))


@dataclass(frozen=True)
class SendTimes:
    """Per measured send: when it was due, when its bytes were written, and the
    connection set-up before that (0 on a kept-alive connection), all ns."""

    intended: np.ndarray
    wrote: np.ndarray
    connect: np.ndarray



class Stall(BaseModel):
    """One wake of the probe later than PROBE_RESOLUTION_NS: the loop could not run at `due_ns`; it was
    last seen running at `after_ns` (the probe's previous wake), ran again at `woke_ns`, and had caught up
    with what waited for it at `caught_ns` (the end of the first loop iteration after the wake that took
    at most PROBE_RESOLUTION_NS: every socket that had data was read by then; None: at the wake)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    after_ns: int
    due_ns: int
    woke_ns: int
    cause: Cause
    worker: int = 0
    caught_ns: int | None = None

    @property
    def lag_ns(self) -> int:
        return self.woke_ns - self.due_ns

    @property
    def caught(self) -> int:
        return self.woke_ns if self.caught_ns is None else max(self.caught_ns, self.woke_ns)


def attribute(lag_ns: int, cpu_ns: int, wait_ns: int | None, others_ns: int = 0) -> Cause:
    """The cause of a stall of `lag_ns` from what the loop's thread did since the probe's previous wake:
    `cpu_ns` on the CPU, `wait_ns` runnable but waiting for it (None: unknown), while the process's other
    threads ran `others_ns`. The rest of the stall (lag - cpu - wait) the thread was off the CPU and not
    waiting for it: blocked by the process's own work when its other threads ran for at least a quarter
    of that (one holding the GIL blocks the loop), else stopped or blocked in a system call."""
    if wait_ns is None:
        return "client_cpu" if 2 * (cpu_ns + others_ns) >= lag_ns else "client_delay"
    off = max(0, lag_ns - cpu_ns - wait_ns)
    held = 4 * others_ns >= off
    own = cpu_ns + (off if held else 0)
    best = max(wait_ns, own, 0 if held else off)
    return "host_contention" if best == wait_ns else "client_cpu" if best == own else "client_stopped"


class Stalls:
    """Every stall of a phase, compact (35 bytes each: a stall a second for an hour is 100 KB), picklable (it
    comes back from worker processes and Ray actors with their health)."""

    def __init__(self) -> None:
        self.after, self.due, self.woke, self.caught = array("q"), array("q"), array("q"), array("q")
        self.cause, self.worker = array("b"), array("h")

    @classmethod
    def of(cls, stalls: Iterable[Stall]) -> Stalls:
        out = cls()
        for s in stalls:
            out.add(s)
        return out

    def add(self, s: Stall) -> None:
        self.after.append(s.after_ns)
        self.due.append(s.due_ns)
        self.woke.append(s.woke_ns)
        self.caught.append(s.caught)
        self.cause.append(CAUSES.index(s.cause))
        self.worker.append(s.worker)

    def caught_up(self, i: int, at_ns: int) -> None:
        """Stall i's catch-up ended at `at_ns` (the probe follows it after the wake)."""
        self.caught[i] = max(self.caught[i], at_ns)

    def __len__(self) -> int:
        return len(self.due)

    def __iter__(self) -> Iterator[Stall]:
        for a, d, w, c, k, u in zip(self.after, self.due, self.woke, self.cause, self.worker, self.caught, strict=True):
            yield Stall(after_ns=a, due_ns=d, woke_ns=w, cause=CAUSES[c], worker=k, caught_ns=u)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stalls) and list(self) == list(other)

    def arrays(self) -> dict[str, np.ndarray]:
        """after, due, woke, caught (ns), cause (index into CAUSES), as int64 arrays sorted by due."""
        cols = {k: np.array(getattr(self, k), np.int64) for k in ("after", "due", "woke", "caught", "cause")}
        order = np.argsort(cols["due"], kind="stable")
        return {k: v[order] for k, v in cols.items()}

    def merged(self, others: list[Stalls]) -> Stalls:
        """Several workers' stalls as one, each tagged with its worker (this one is worker 0)."""
        out = Stalls()
        for i, part in enumerate([self, *others]):
            for name in ("after", "due", "woke", "caught", "cause"):
                getattr(out, name).extend(getattr(part, name))
            out.worker.extend([i] * len(part))
        return out

    def shifted(self, offset_ns: int) -> Stalls:
        """The same stalls on a clock `offset_ns` behind (a Ray actor's, on the driver's)."""
        out = Stalls()
        out.after, out.due, out.woke, out.caught = (array("q", [t - offset_ns for t in col])
                                                    for col in (self.after, self.due, self.woke, self.caught))
        out.cause, out.worker = array("b", self.cause), array("h", self.worker)
        return out
