"""Streaming answers of the reference server: the chunk due at each deadline, written by a callback.

Token i of a request admitted at t_adm is due at t_adm + ttft + i*itl; a chunk of K tokens is written
when its last token is due. Each chunk's bytes are built right after the previous write, so at the
deadline only `transport.write` runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from time import perf_counter_ns

from tokenbench.testing import faults as F
from tokenbench.testing.clock import Deadlines
from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.jobs import Job, Sampler

STREAM_FAULTS = ("reset_mid_stream", "stall", "malformed_sse", "invalid_json", "early_done")


@dataclass
class Answer:
    """One request being answered: its job, the fault picked for it, its send-log record (filled as the
    answer is written) and when it was admitted."""

    job: Job
    fault: str | None
    rec: dict
    t_adm: int


def due_ns(cfg: ReferenceConfig, t_adm: int, last_token: int) -> int:
    """When token `last_token` (0-based) of a request admitted at `t_adm` is due."""
    return t_adm + int(cfg.ttft_ms * 1e6) + last_token * int(cfg.itl_ms * 1e6)


def frame(data: bytes) -> bytes:
    """One HTTP/1.1 chunked-encoding frame (the response was prepared with chunked encoding)."""
    return b"%x\r\n%b\r\n" % (len(data), data)


def role_event(job: Job) -> bytes:
    """The chat stream's first event: the assistant role, no content."""
    u = f',"usage":{job.usage_json(0)}' if job.continuous else ""
    return (f'{job.head}[{{"index":0,"delta":{{"role":"assistant"}},'
            f'"logprobs":null,"finish_reason":null}}]{u}}}\n\n').encode()


def chunk(job: Job, samplers: list[Sampler], lo: int, hi: int, last: bool) -> bytes:
    """All events written at one deadline: one per choice (+ usage chunk and [DONE] at the end)."""
    width, out = len(samplers), []
    for i, sampler in enumerate(samplers):
        usage = None
        if job.continuous or (last and job.usage and not job.usage_alone and i == width - 1):
            usage = job.usage_json(hi * (i + 1) + lo * (width - i - 1))
        out.append(job.event(i, sampler.take(hi - lo), job.finish if last else None, usage, lo))
    if last and job.usage_alone:
        out.append(f'{job.head}[],"usage":{job.usage_json(hi)}}}\n\n'.encode())
    if last:
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


async def stream_answer(cfg: ReferenceConfig, clock: Deadlines, request, resp, answer: Answer) -> None:
    """Write a prepared streaming response until its last chunk (or its fault); fills `answer.rec`."""
    job, fault, rec = answer.job, answer.fault, answer.rec
    transport = request.transport
    if transport is None or transport.is_closing():
        raise ConnectionResetError
    if job.api == "chat":
        rec["role_ns"] = perf_counter_ns()
        transport.write(frame(role_event(job)))
    done = asyncio.get_running_loop().create_future()
    Stream(cfg, clock, answer, transport, done)
    await done
    if rec["outcome"] == "client_disconnected":
        raise ConnectionResetError
    if fault != "reset_mid_stream":
        await resp.write_eof()


class Stream:
    """One streaming answer driven by the deadlines: each fire() writes one pre-built chunk."""

    def __init__(self, cfg: ReferenceConfig, clock: Deadlines, answer: Answer, transport,
                 done: asyncio.Future) -> None:
        job, fault = answer.job, answer.fault
        self.cfg, self.clock, self.job, self.fault, self.rec = cfg, clock, job, fault, answer.rec
        self.transport, self.done = transport, done
        self.k, self.c, self.t_adm, self.shift = cfg.tokens_per_chunk, 0, answer.t_adm, 0
        self.n_chunks = -(-job.n_out // self.k)
        self.strike = F.fault_point(self.n_chunks) if fault in STREAM_FAULTS else -1
        self.samplers = [Sampler(s, cfg.vocab_size) for s in job.seeds]
        self.pending = self._build()
        clock.call_at(self._due(), self.fire)

    def _span(self) -> tuple[int, int]:
        """Token indices [lo, hi) carried by the current chunk."""
        lo = self.c * self.k
        return lo, min(self.job.n_out, lo + self.k)

    def _due(self) -> int:
        if self.c == self.strike and self.fault == "stall":
            self.shift = int(self.cfg.stall_s * 1e9)
        return due_ns(self.cfg, self.t_adm, self._span()[1] - 1) + self.shift

    def _build(self) -> bytes:
        c, fault = self.c, self.fault
        if c == self.strike and fault in ("reset_mid_stream", "early_done"):
            return frame(b"data: [DONE]\n\n")
        lo, hi = self._span()
        data = chunk(self.job, self.samplers, lo, hi, hi == self.job.n_out)
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
        t = self.transport
        if self.done.done():  # the handler is gone (server shutting down)
            return None
        if t.is_closing():
            return self._end("client_disconnected")
        if self.c == self.strike and self.fault == "early_done":
            t.write(self.pending)
            return self._end("fault")
        if self.c == self.strike and self.fault == "reset_mid_stream":
            F.reset(t)
            return self._end("fault")
        lo, hi = self._span()
        self.rec["write_ns"].append(perf_counter_ns())
        t.write(self.pending)
        self.rec["tokens"].append((hi - lo) * len(self.samplers))
        return self._next()

    def _next(self) -> None:
        """After a write: end the stream, or build the next chunk and set its deadline."""
        self.c += 1
        if self.c == self.n_chunks:
            self.rec["finish_reason"] = self.job.finish
            return self._end("fault" if self.fault in STREAM_FAULTS else "ok")
        self.pending = self._build()
        self.clock.call_at(self._due(), self.fire)

    def _end(self, outcome: str) -> None:
        self.rec["outcome"] = outcome
        if not self.done.done():
            self.done.set_result(None)
