"""Streaming answers of the reference server: the chunk due at each deadline, written by a callback.

Token 0 of a request is due at `t_first` (admission + ttft without the load model); each later chunk is
due `steps x step` after the one before it, where `step` is the decode step now (the fixed ITL, or the
load model's ITL for the running batch). A chunk of K tokens is written when its last token is due.
Each chunk's bytes are built right after the previous write, so at the deadline only the write runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import perf_counter_ns

from tokenbench.testing import faults as F
from tokenbench.testing.clock import Deadlines
from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.jobs import Job, Sampler

STREAM_FAULTS = ("reset_mid_stream", "stall", "malformed_sse", "invalid_json", "early_done")
DONE = b"data: [DONE]\n\n"


@dataclass(slots=True)
class Answer:
    """One generation request being answered: its plan, its fault, its send-log record."""

    job: Job
    fault: str | None
    rec: dict


@dataclass(slots=True)
class Pacing:
    """When the chunks of one answer are due: token 0 at t_first, chunk c `steps[c]` decode steps after
    chunk c-1; `step_ns()` is the decode step now (it reads the running batch under the load model)."""

    t_first: int
    sizes: list[int]           # tokens per chunk
    steps: list[int]           # decode steps between the previous chunk's last token and this one's
    step_ns: Callable[[], int]

    def due_after(self, prev_due: int, c: int) -> int:
        return prev_due + self.steps[c] * self.step_ns() if self.steps[c] else prev_due


def chunks_for(sizes: list[int], n: int) -> int:
    """How many leading chunks hold the first n tokens."""
    made = 0
    for c, size in enumerate(sizes):
        made += size
        if made >= n:
            return c + 1
    return len(sizes)


async def last_due(clock: Deadlines, pace: Pacing, n: int, varying: bool) -> int:
    """When token n-1 of a whole (non-streaming) answer is due. A step that depends on the running
    batch (`varying`) is read chunk by chunk, at the times a stream would read it."""
    due = pace.due_after(pace.t_first, 0)
    if not varying:
        return due + sum(pace.steps[1:chunks_for(pace.sizes, n)]) * pace.step_ns()
    c, made = 0, pace.sizes[0]
    while made < n:
        await clock.until(due)
        c += 1
        due, made = pace.due_after(due, c), made + pace.sizes[c]
    return due


def chunk_sizes(n_out: int, per_chunk: int) -> list[int]:
    return [min(per_chunk, n_out - lo) for lo in range(0, n_out, per_chunk)]


def steps_of(sizes: list[int], one_step_per_chunk: bool) -> list[int]:
    """Decode steps before each chunk: its tokens (the first chunk's first token is the prefill's), or
    one per chunk after the first when a step emits a chunk (speculative decoding)."""
    if one_step_per_chunk:
        return [0] + [1] * (len(sizes) - 1)
    return [sizes[0] - 1, *sizes[1:]] if sizes else []


def frame(data: bytes) -> bytes:
    """One HTTP/1.1 chunked-encoding frame (the response was prepared with chunked encoding)."""
    return b"%x\r\n%b\r\n" % (len(data), data)


def role_event(job: Job) -> bytes:
    """The chat stream's first event: the assistant role, no content."""
    u = f',"usage":{job.usage_json(0)}' if job.continuous else ""
    return (f'{job.head}[{{"index":0,"delta":{{"role":"assistant"}},'
            f'"logprobs":null,"finish_reason":null}}]{u}}}\n\n').encode()


def chunk(job: Job, samplers: list[Sampler], lo: int, hi: int, last: bool) -> bytes:
    """The token events written at one deadline: one per choice (usage on the last one if it rides there)."""
    width, out = len(samplers), []
    for i, sampler in enumerate(samplers):
        usage = None
        if job.continuous or (last and job.usage and not job.usage_alone and i == width - 1):
            usage = job.usage_json(hi * (i + 1) + lo * (width - i - 1))
        out.append(job.event(i, sampler.take(hi - lo), job.finish if last else None, usage, lo))
    return b"".join(out)


def tail(job: Job, n_out: int, done: bool = True) -> bytes:
    """What follows the last token: the usage chunk when it stands alone, then `[DONE]`."""
    usage = f'{job.head}[],"usage":{job.usage_json(n_out)}}}\n\n'.encode() if job.usage_alone else b""
    return usage + (DONE if done else b"")


class Pipe:
    """The body's way to the client: straight to the transport, or (the `proxy_buffer` fault) held and
    written in whole pieces of `piece` bytes, the rest at `flush`, as a buffering proxy delivers it."""

    def __init__(self, transport: asyncio.Transport, piece: int | None, stamps: list[int] | None) -> None:
        self.transport, self.piece, self.stamps, self.held = transport, piece or 0, stamps, b""
        if piece is None:
            self.write = transport.write   # type: ignore[method-assign]  # no proxy: no cost

    def write(self, data: bytes) -> None:
        self.held += data
        while len(self.held) >= self.piece:
            self._out(self.held[: self.piece])
            self.held = self.held[self.piece:]

    def flush(self) -> None:
        if self.held:
            self._out(self.held)
            self.held = b""

    def _out(self, data: bytes) -> None:
        self.transport.write(data)
        if self.stamps is not None:
            self.stamps.append(perf_counter_ns())


def pipe_for(cfg: ReferenceConfig, transport: asyncio.Transport, ans: Answer) -> Pipe:
    if ans.fault != "proxy_buffer":
        return Pipe(transport, None, None)
    ans.rec["pieces_ns"] = []
    return Pipe(transport, cfg.proxy_buffer_bytes, ans.rec["pieces_ns"])


async def stream_answer(cfg: ReferenceConfig, clock: Deadlines, request, resp, ans: Answer,
                        pacing: Callable[[], Awaitable[Pacing]]) -> None:
    """Write a prepared streaming response until its last chunk (or its fault); fills `ans.rec`.
    The chat role chunk goes out at once; the tokens once `pacing()` (the prefill) has answered."""
    transport = request.transport
    if transport is None or transport.is_closing():
        raise ConnectionResetError
    pipe = pipe_for(cfg, transport, ans)
    if ans.job.api == "chat":
        ans.rec["role_ns"] = perf_counter_ns()
        pipe.write(frame(role_event(ans.job)))
    pace = await pacing()
    done = asyncio.get_running_loop().create_future()
    Stream(cfg, clock, ans, pipe, pace, done)
    await done
    if ans.rec["outcome"] == "client_disconnected":
        raise ConnectionResetError
    if ans.fault != "reset_mid_stream":
        pipe.flush()
        ans.rec["eof_ns"] = perf_counter_ns()          # the body's end goes out now (the client's end)
        await resp.write_eof()


class Stream:
    """One streaming answer driven by the deadlines: each fire() writes one pre-built chunk."""

    def __init__(self, cfg: ReferenceConfig, clock: Deadlines, ans: Answer, pipe: Pipe, pace: Pacing,
                 done: asyncio.Future) -> None:
        self.cfg, self.clock, self.job, self.fault, self.rec = cfg, clock, ans.job, ans.fault, ans.rec
        self.pipe, self.pace, self.done = pipe, pace, done
        self.c, self.lo, self.shift = 0, 0, 0
        self.n_chunks = len(pace.sizes)
        self.held, self.held_tokens = b"", list[int]()    # chunks due, not written yet (chunks_per_write): bytes, tokens
        self.strike = F.fault_point(self.n_chunks) if self.fault in STREAM_FAULTS else -1
        self.samplers = [Sampler(s, cfg.vocab_size) for s in self.job.seeds]
        self.due = pace.due_after(pace.t_first, 0)
        self.pending = self._build()
        clock.call_at(self._due(), self.fire)

    def _hi(self) -> int:
        return self.lo + self.pace.sizes[self.c]

    def _due(self) -> int:
        if self.c == self.strike and self.fault == "stall":
            self.shift = int(self.cfg.stall_s * 1e9)
        return self.due + self.shift

    def _build(self) -> bytes:
        c, fault = self.c, self.fault
        if c == self.strike and fault in ("reset_mid_stream", "early_done"):
            return frame(DONE)
        hi = self._hi()
        last = hi == self.job.n_out
        data = chunk(self.job, self.samplers, self.lo, hi, last)
        if last and fault != "slow_end":
            data += tail(self.job, hi, done=fault != "no_done")
        if c == self.strike and fault == "invalid_json":
            data = F.corrupt(data)
        elif c == self.strike and fault == "malformed_sse":
            data = F.MALFORMED_LINE + data
        return frame(data)

    def fire(self) -> None:
        try:
            self._fire()
        except Exception as exc:  # not swallowed: it surfaces in this request's handler
            if not self.done.done():
                self.done.set_exception(exc)

    def _fire(self) -> None:
        if self.done.done():  # the handler is gone (server shutting down)
            return None
        if self.pipe.transport.is_closing():
            return self._end("client_disconnected")
        if self.c == self.strike and self.fault in ("early_done", "reset_mid_stream"):
            return self._strike()
        hi = self._hi()
        if self.rec["due_ns"] is not None:
            self.rec["due_ns"].append(self.due + self.shift)
        self.held += self.pending
        self.held_tokens.append((hi - self.lo) * len(self.samplers))
        if self._writes_now():
            now = perf_counter_ns()
            self.rec["write_ns"].extend([now] * len(self.held_tokens))      # one stamp per chunk: the write's
            self.rec["tokens"].extend(self.held_tokens)
            self.pipe.write(self.held)
            self.held, self.held_tokens = b"", []
            if hi == self.job.n_out and self.fault not in ("slow_end", "no_done"):
                self.rec["done_ns"] = now
        return self._next(hi)

    def _writes_now(self) -> bool:
        """Whether the chunks held go out with this one: every `chunks_per_write`-th chunk, the last, and
        the one before a fault strikes."""
        c = self.c + 1
        return c % self.cfg.chunks_per_write == 0 or c == self.n_chunks or c == self.strike

    def _strike(self) -> None:
        if self.fault == "early_done":
            self.rec["done_ns"] = perf_counter_ns()
            self.pipe.write(self.pending)
        else:
            F.reset(self.pipe.transport)
        return self._end("fault")

    def _next(self, hi: int) -> None:
        """After a write: end the stream (its tail later under `slow_end`), or build the next chunk."""
        self.c, self.lo = self.c + 1, hi
        if self.c == self.n_chunks:
            self.rec["finish_reason"] = self.job.finish
            if self.fault == "slow_end":
                return self.clock.call_at(self._due() + int(self.cfg.slow_end_s * 1e9), self._slow_tail)
            return self._end("fault" if self.fault in STREAM_FAULTS else "ok")
        self.due = self.pace.due_after(self.due, self.c)
        self.pending = self._build()
        self.clock.call_at(self._due(), self.fire)

    def _slow_tail(self) -> None:
        if self.done.done():
            return None
        if self.pipe.transport.is_closing():
            return self._end("client_disconnected")
        self.rec["done_ns"] = perf_counter_ns()
        self.pipe.write(frame(tail(self.job, self.job.n_out)))
        return self._end("ok")

    def _end(self, outcome: str) -> None:
        self.rec["outcome"] = outcome
        if not self.done.done():
            self.done.set_result(None)
