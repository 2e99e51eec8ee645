"""The reference OpenAI-compatible streaming server: ground-truth timing for tokenbench's client.

Token i of a request admitted at t_adm is due at t_adm + ttft + i*itl (absolute perf_counter_ns
deadlines); a chunk of K tokens is written when its last token is due, and every write is stamped in
the send log. See docs/reference-server.md for the full contract (tokenizer, template, usage, faults).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import heapq
import json
import os
import random
import re
import resource
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib
from array import array
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from time import perf_counter_ns

from aiohttp import web

from tokenbench import __version__
from tokenbench.errors import DeployError, TokenbenchError, UsageError
from tokenbench.testing import faults as F

SPECIAL = ("<unk>", "<s>", "</s>")
_SPECIAL_IDS = {w: i for i, w in enumerate(SPECIAL)}
_LITERAL = re.compile(r"w([1-9][0-9]{0,8})")
_STREAM_FAULTS = ("reset_mid_stream", "stall", "malformed_sse", "invalid_json", "early_done")
_CONFIG_ENV = "TOKENBENCH_REFERENCE_CONFIG"
READY_PREFIX = "REFERENCE_READY port="


@dataclass
class ReferenceConfig:
    """How the reference server behaves. Times in ms; every field is documented for the CLI."""

    ttft_ms: float = field(metadata={"help": "time to first token, from admission"})
    itl_ms: float = field(metadata={"help": "time between consecutive tokens"})
    tokens_per_chunk: int = field(default=1, metadata={"help": "tokens carried by each SSE chunk"})
    vocab_size: int = field(default=32000, metadata={"help": "token ids are in [0, vocab_size)"})
    model: str = field(default="reference-model", metadata={"help": "model name served"})
    max_model_len: int = field(default=131072, metadata={"help": "context length (prompt + output)"})
    kv_capacity_tokens: int | None = field(
        default=None, metadata={"help": "KV tokens: running requests' prompt+max_tokens must fit"})
    max_running: int | None = field(
        default=None, metadata={"help": "requests decoding at once; the rest wait in a FIFO"})
    honor_ignore_eos: bool = field(
        default=True, metadata={"help": "if off, ignore ignore_eos/min_tokens and stop early"})
    send_usage: bool = field(default=True, metadata={"help": "report usage when asked"})
    send_log: str | None = field(default=None, metadata={"help": "JSONL send log path"})
    api_key: str | None = None
    faults: dict[str, float] = field(default_factory=dict)
    seed: int = field(default=0, metadata={"help": "seed for fault draws and sampling"})
    stall_s: float = field(default=5.0, metadata={"help": "length of the `stall` fault"})
    slow_headers_s: float = field(default=5.0, metadata={"help": "delay of the `slow_headers` fault"})

    def __post_init__(self) -> None:
        if self.ttft_ms < 0 or self.itl_ms < 0 or self.stall_s < 0 or self.slow_headers_s < 0:
            raise UsageError("negative time in reference config", hint="times are >= 0")
        if self.tokens_per_chunk < 1 or self.vocab_size < 4 or self.max_model_len < 2:
            raise UsageError("tokens_per_chunk >= 1, vocab_size >= 4, max_model_len >= 2 required")
        if (self.max_running or 1) < 1 or (self.kv_capacity_tokens or 1) < 1:
            raise UsageError("max_running and kv_capacity_tokens must be >= 1 when set")
        self.faults = F.validate_faults(self.faults)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ReferenceConfig:
        return cls(**json.loads(text))


# ---- tokenizer: whitespace words; `w<N>` is literally token N, so detokenize round-trips ----

def word_id(word: str, vocab_size: int) -> int:
    if word in _SPECIAL_IDS:
        return _SPECIAL_IDS[word]
    m = _LITERAL.fullmatch(word)
    if m and 3 <= int(m.group(1)) < vocab_size:
        return int(m.group(1))
    return 3 + zlib.crc32(word.encode()) % (vocab_size - 3)


def tokenize(text: str, vocab_size: int) -> list[int]:
    return [word_id(w, vocab_size) for w in text.split()]


def detokenize(ids: list[int]) -> str:
    return " ".join(SPECIAL[i] if i < 3 else f"w{i}" for i in ids)


def chat_text(messages: list, add_generation_prompt: bool = True) -> tuple[str, int]:
    """The chat template: `<|role|> content` per message (+ `<|image|>` per image), `<|assistant|>`."""
    parts, images = [], 0
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _Invalid("each message needs a string role")
        parts.append(f"<|{m['role']}|>")
        content = m.get("content")
        if not isinstance(content, (str, list, type(None))):
            raise _Invalid("content is a string or a list of parts")
        for part in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
            if not isinstance(part, dict):
                raise _Invalid("each content part is an object")
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif part.get("type") == "image_url" and str(
                    (part.get("image_url") or {}).get("url", "")).startswith("data:"):
                parts.append("<|image|>")
                images += 1
            else:
                raise _Invalid("content parts are text or image_url with a data: URI")
    if add_generation_prompt:
        parts.append("<|assistant|>")
    return " ".join(parts), images


class _Invalid(Exception):
    """A request the server refuses with HTTP 400."""


def _error(status: int, message: str, kind: str = "invalid_request_error", **headers: str):
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.json_response(body, status=status, headers=headers)


# ---- admission: FIFO queue in front of max_running / KV capacity ----

class _Gate:
    def __init__(self, max_running: int | None, kv_capacity: int | None) -> None:
        self.max_running, self.kv_capacity = max_running, kv_capacity
        self.running = self.kv_used = 0
        self.waiting: deque[tuple[int, asyncio.Future]] = deque()

    def _fits(self, need: int) -> bool:
        return ((self.max_running is None or self.running < self.max_running)
                and (self.kv_capacity is None or self.kv_used + need <= self.kv_capacity))

    async def acquire(self, need: int) -> int:
        """Wait for a slot in arrival order; returns the admission time (perf_counter_ns)."""
        if not self.waiting and self._fits(need):
            self.running, self.kv_used = self.running + 1, self.kv_used + need
            return perf_counter_ns()
        fut = asyncio.get_running_loop().create_future()
        self.waiting.append((need, fut))
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(need)  # admitted, then cancelled before it could run
            else:
                with contextlib.suppress(ValueError):
                    self.waiting.remove((need, fut))
                self._admit()  # it may have been the head that blocked the others
            raise

    def release(self, need: int) -> None:
        self.running, self.kv_used = self.running - 1, self.kv_used - need
        self._admit()

    def _admit(self) -> None:
        while self.waiting and self._fits(self.waiting[0][0]):
            need, fut = self.waiting.popleft()
            if not fut.done():
                self.running, self.kv_used = self.running + 1, self.kv_used + need
                fut.set_result(perf_counter_ns())


# ---- send log: one JSON line per request, written one per loop turn so a burst never blocks ----

class _SendLog:
    def __init__(self, path: str | None) -> None:
        try:
            self._file = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
        except OSError as exc:
            raise UsageError(f"cannot write the send log {path}: {exc.strerror}",
                             hint="pass a path in a writable folder") from None
        self._pending: deque[dict] = deque()
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._drain()) if path else None

    def add(self, record: dict) -> None:
        if self._file is not None:
            self._pending.append(record)
            self._wake.set()

    async def _drain(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                self._file.write(json.dumps(self._pending.popleft(), separators=(",", ":")) + "\n")
                await asyncio.sleep(0)
            self._file.flush()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            while self._pending:
                self._file.write(json.dumps(self._pending.popleft(), separators=(",", ":")) + "\n")
            self._file.close()


class _TimerFd:
    """A Linux timerfd on CLOCK_MONOTONIC (perf_counter_ns's clock), set to absolute nanoseconds.

    asyncio's own timers wait in epoll with whole-millisecond timeouts (up to ~1 ms late); a timerfd
    in the same epoll set wakes the loop at the exact nanosecond, with no busy waiting.
    """

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.timerfd_create(time.CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._spec = (ctypes.c_long * 4)()  # struct itimerspec: interval (0, 0), value (sec, nsec)

    def set(self, due_ns: int) -> None:
        self._spec[2], self._spec[3] = divmod(max(due_ns, 1), 1_000_000_000)
        if self.libc.timerfd_settime(self.fd, 1, self._spec, None) < 0:  # 1 = TFD_TIMER_ABSTIME
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def clear(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self.fd, 8)

    def close(self) -> None:
        os.close(self.fd)


class _Deadlines:
    """Runs callbacks at absolute perf_counter_ns deadlines, in deadline order.

    One timer (a timerfd; asyncio's ms-resolution timer where there is none) is set to the earliest
    deadline. Callbacks are plain functions, so a stream's chunk write costs no task switch; a tick
    runs at most BATCH of them, then lets the loop do I/O before the next batch.
    """

    BATCH = 256

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, object]] = []
        self._seq = 0
        self._armed: int | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        try:
            self._tfd: _TimerFd | None = _TimerFd()
            self._loop.add_reader(self._tfd.fd, self._tick)
        except (OSError, AttributeError, NotImplementedError):
            self._tfd = None

    def call_at(self, due_ns: int, fn) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due_ns, self._seq, fn))
        if self._armed is None or due_ns < self._armed:
            self._arm(due_ns)

    async def until(self, due_ns: int) -> None:
        if due_ns > perf_counter_ns():
            fut = self._loop.create_future()
            self.call_at(due_ns, lambda: fut.done() or fut.set_result(None))
            await fut

    def _arm(self, due_ns: int) -> None:
        self._armed = due_ns
        if self._tfd is not None:
            self._tfd.set(due_ns)
            return
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self._loop.call_later(max(due_ns - perf_counter_ns(), 0) / 1e9, self._tick)

    def _tick(self) -> None:
        if self._tfd is not None:
            self._tfd.clear()
        self._armed = self._handle = None
        heap, now = self._heap, perf_counter_ns()
        for _ in range(self.BATCH):
            if not heap or heap[0][0] > now:
                break
            heapq.heappop(heap)[2]()
        if heap and heap[0][0] <= perf_counter_ns():
            self._armed = heap[0][0]
            self._loop.call_soon(self._tick)  # more is due: next batch after a turn of I/O
        elif heap:
            self._arm(heap[0][0])

    def close(self) -> None:
        if self._tfd is not None:
            self._loop.remove_reader(self._tfd.fd)
            self._tfd.close()


def _frame(data: bytes) -> bytes:
    """One HTTP/1.1 chunked-encoding frame (the response was prepared with chunked encoding)."""
    return b"%x\r\n%b\r\n" % (len(data), data)


# ---- one generation request ----

@dataclass(slots=True)
class _Job:
    api: str
    head: str                  # `data: {"id":...,"choices":` shared by every event of this request
    prompts: list[list[int]]
    n_out: int
    finish: str
    stream: bool
    usage: bool                # usage in the answer at all (non-stream) / include_usage (stream)
    continuous: bool
    seeds: list[int]
    images: int

    @property
    def prompt_tokens(self) -> int:
        return sum(map(len, self.prompts))

    def usage_json(self, completion: int) -> str:
        p = self.prompt_tokens
        extra = f',"prompt_tokens_details":{{"image_count":{self.images}}}' if self.images else ""
        return (f'{{"prompt_tokens":{p},"total_tokens":{p + completion},'
                f'"completion_tokens":{completion}{extra}}}')

    def event(self, index: int, ids: list[int], finish: str | None, usage: str | None) -> bytes:
        text = "".join([f" w{i}" for i in ids])
        body = (f'"delta":{{"content":"{text}"}}' if self.api == "chat" else f'"text":"{text}"')
        fin = "null" if finish is None else f'"{finish}"'
        tail = "" if usage is None else f',"usage":{usage}'
        return (f'{self.head}[{{"index":{index},{body},"token_ids":[{",".join(map(str, ids))}],'
                f'"logprobs":null,"finish_reason":{fin}}}]{tail}}}\n\n').encode()


class _Sampler:
    """Deterministic output ids (an LCG): cheap enough to run per chunk, never ids < 3."""

    __slots__ = ("x", "span")

    def __init__(self, seed: int, vocab_size: int) -> None:
        self.x, self.span = seed & 0x7FFFFFFF, vocab_size - 3

    def take(self, k: int) -> list[int]:
        out, x = [], self.x
        for _ in range(k):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
            out.append(3 + (x >> 4) % self.span)
        self.x = x
        return out


def _output_length(cfg: ReferenceConfig, max_tokens: int, min_tokens: int, ignore_eos: bool):
    """(tokens, finish_reason). The simulated model wants to stop (EOS) after half of max_tokens."""
    natural = (max_tokens + 1) // 2
    if not cfg.honor_ignore_eos:
        n = natural
    elif ignore_eos:
        n = max_tokens
    else:
        n = max(natural, min_tokens)
    return n, ("length" if n == max_tokens else "stop")


def _prompts(prompt: object, vocab_size: int) -> list[list[int]]:
    """A string, a list of token ids, or a list of either -> token id lists."""
    if isinstance(prompt, str) and prompt.split():
        return [tokenize(prompt, vocab_size)]
    if isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
        if min(prompt) < 0 or max(prompt) >= vocab_size:
            raise _Invalid(f"token id out of vocabulary [0, {vocab_size})")
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
        return [q for p in prompt for q in _prompts(p, vocab_size)]
    raise _Invalid("prompt must be a string, a list of token ids, or a list of those")


def _int(body: dict, *names: str, default: int) -> int:
    value = next((body[n] for n in names if body.get(n) is not None), default)
    if type(value) is not int:
        raise _Invalid(f"{names[0]} must be an integer")
    return value


class _Stream:
    """One streaming answer driven by the ticker: each fire() writes one pre-built chunk."""

    def __init__(self, srv: _Server, job: _Job, fault, rec: dict, transport, t_adm: int, done) -> None:
        self.srv, self.job, self.fault, self.rec = srv, job, fault, rec
        self.transport, self.done = transport, done
        self.k, self.c, self.t_adm, self.shift = srv.cfg.tokens_per_chunk, 0, t_adm, 0
        self.n_chunks = -(-job.n_out // self.k)
        self.strike = F.fault_point(self.n_chunks) if fault in _STREAM_FAULTS else -1
        self.samplers = [_Sampler(s, srv.cfg.vocab_size) for s in job.seeds]
        self.pending = self._build()
        srv.clock.call_at(self._due(), self.fire)

    def _span(self) -> tuple[int, int]:
        """Token indices [lo, hi) carried by the current chunk."""
        lo = self.c * self.k
        return lo, min(self.job.n_out, lo + self.k)

    def _due(self) -> int:
        if self.c == self.strike and self.fault == "stall":
            self.shift = int(self.srv.cfg.stall_s * 1e9)
        return self.srv.due(self.t_adm, self._span()[1] - 1) + self.shift

    def _build(self) -> bytes:
        c, fault = self.c, self.fault
        if c == self.strike and fault in ("reset_mid_stream", "early_done"):
            return _frame(b"data: [DONE]\n\n")
        lo, hi = self._span()
        data = self.srv.chunk(self.job, self.samplers, lo, hi, hi == self.job.n_out)
        if c == self.strike and fault == "invalid_json":
            data = F.corrupt(data)
        elif c == self.strike and fault == "malformed_sse":
            data = F.MALFORMED_LINE + data
        return _frame(data)

    def fire(self) -> None:
        try:
            self._fire()
        except Exception as exc:  # not swallowed: it surfaces in this request's handler
            if not self.done.done():
                self.done.set_exception(exc)

    def _fire(self) -> None:
        t, rec = self.transport, self.rec
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
        rec["write_ns"].append(perf_counter_ns())
        t.write(self.pending)
        rec["tokens"].append((hi - lo) * len(self.samplers))
        self.c += 1
        if self.c == self.n_chunks:
            rec["finish_reason"] = self.job.finish
            return self._end("fault" if self.fault in _STREAM_FAULTS else "ok")
        self.pending = self._build()
        self.srv.clock.call_at(self._due(), self.fire)

    def _end(self, outcome: str) -> None:
        self.rec["outcome"] = outcome
        if not self.done.done():
            self.done.set_result(None)


class _Server:
    def __init__(self, cfg: ReferenceConfig) -> None:
        self.cfg = cfg
        self.log = _SendLog(cfg.send_log)
        self.clock = _Deadlines()
        self.gate = _Gate(cfg.max_running, cfg.kv_capacity_tokens)
        self.faults = F.FaultPicker(cfg.faults, cfg.seed)
        self.rng = random.Random(cfg.seed)
        self.seq = 0
        self.totals = {"requests": 0, "prompt_tokens": 0, "generation_tokens": 0}

    def _parse(self, body: object, api: str, rid: str) -> _Job:
        cfg = self.cfg
        if not isinstance(body, dict):
            raise _Invalid("the body must be a JSON object")
        images = 0
        if api == "chat":
            if not isinstance(body.get("messages"), list) or not body["messages"]:
                raise _Invalid("messages must be a non-empty list")
            text, images = chat_text(body["messages"])
            prompts = [tokenize(text, cfg.vocab_size)]
        else:
            prompts = _prompts(body.get("prompt"), cfg.vocab_size)
        names = ("max_completion_tokens", "max_tokens") if api == "chat" else ("max_tokens",)
        max_tokens, min_tokens = _int(body, *names, default=16), _int(body, "min_tokens", default=0)
        if max_tokens < 1 or not 0 <= min_tokens <= max_tokens or body.get("n", 1) != 1:
            raise _Invalid("need max_tokens >= 1, 0 <= min_tokens <= max_tokens, n == 1")
        if max(map(len, prompts)) + max_tokens > cfg.max_model_len:
            raise _Invalid(f"prompt + max_tokens exceeds max_model_len {cfg.max_model_len}")
        n_out, finish = _output_length(cfg, max_tokens, min_tokens, bool(body.get("ignore_eos")))
        opts = body.get("stream_options") or {}
        if not isinstance(opts, dict):
            raise _Invalid("stream_options must be an object")
        stream = bool(body.get("stream"))
        usage = cfg.send_usage and (not stream or bool(opts.get("include_usage")))
        if body.get("temperature", 1.0) == 0:
            seeds = [zlib.crc32(array("q", p).tobytes()) for p in prompts]
        else:
            base = body["seed"] if type(body.get("seed")) is int else self.rng.getrandbits(31)
            seeds = [base + i for i in range(len(prompts))]
        kind = "chat.completion.chunk" if api == "chat" else "text_completion"
        head = (f'data: {{"id":"{rid}","object":"{kind}","created":{int(time.time())},'
                f'"model":{json.dumps(cfg.model)},"choices":')
        return _Job(api, head, prompts, n_out, finish, stream, usage,
                    usage and stream and bool(opts.get("continuous_usage_stats")), seeds, images)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, "completions")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, "chat")

    async def generate(self, request: web.Request, api: str) -> web.StreamResponse:
        recv_ns = perf_counter_ns()
        if (denied := self.check_key(request)) is not None:
            return denied
        self.seq += 1
        rid = f"{'chatcmpl' if api == 'chat' else 'cmpl'}-{self.seq}"
        try:
            job = self._parse(await request.json(), api, rid)
        except (_Invalid, ValueError) as exc:
            return _error(400, str(exc) if isinstance(exc, _Invalid) else "the body is not JSON")
        need = job.prompt_tokens + len(job.prompts) * job.n_out
        if self.cfg.kv_capacity_tokens is not None and need > self.cfg.kv_capacity_tokens:
            return _error(400, f"request needs {need} KV tokens, capacity is {self.cfg.kv_capacity_tokens}")
        fault = self.faults.pick()
        if fault == "missing_usage":
            job.usage = job.continuous = False
        rec = {"id": rid, "x_request_id": request.headers.get("X-Request-Id"), "api": api,
               "stream": job.stream, "fault": fault, "status": 200, "recv_ns": recv_ns,
               "admitted_ns": None, "role_ns": None, "write_ns": [], "tokens": [],
               "prompt_tokens": job.prompt_tokens, "completion_tokens": 0, "finish_reason": None,
               "outcome": "ok", "end_ns": None}
        self.totals["requests"] += 1
        self.totals["prompt_tokens"] += job.prompt_tokens
        try:
            return await self._answer(request, job, fault, rec, need)
        except ConnectionError:
            rec["outcome"] = "client_disconnected"
            return web.Response()
        except asyncio.CancelledError:
            rec["outcome"] = "cancelled"
            raise
        finally:
            rec["completion_tokens"] = sum(rec["tokens"])
            self.totals["generation_tokens"] += rec["completion_tokens"]
            rec["end_ns"] = rec["end_ns"] or perf_counter_ns()
            self.log.add(rec)

    async def _answer(self, request, job: _Job, fault, rec, need) -> web.StreamResponse:
        if fault == "slow_headers":
            await asyncio.sleep(self.cfg.slow_headers_s)
        if fault in F.HTTP_FAULTS:
            rec["status"], rec["outcome"] = F.HTTP_FAULTS[fault], "fault"
            retry = {"Retry-After": "1"} if rec["status"] in (429, 503) else {}
            return _error(rec["status"], f"injected fault {fault}", "server_error", **retry)
        resp = None
        if job.stream:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
        rec["admitted_ns"] = t_adm = await self.gate.acquire(need)
        try:
            if job.stream:
                await self._stream(request, resp, job, fault, rec, t_adm)
                return resp
            return await self._whole(request, job, fault, rec, t_adm)
        finally:
            rec["end_ns"] = perf_counter_ns()
            self.gate.release(need)

    def due(self, t_adm: int, last_token: int) -> int:
        return t_adm + int(self.cfg.ttft_ms * 1e6) + last_token * int(self.cfg.itl_ms * 1e6)

    async def _stream(self, request, resp, job: _Job, fault, rec, t_adm: int) -> None:
        transport = request.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError
        if job.api == "chat":
            u = f',"usage":{job.usage_json(0)}' if job.continuous else ""
            rec["role_ns"] = perf_counter_ns()
            transport.write(_frame(f'{job.head}[{{"index":0,"delta":{{"role":"assistant"}},'
                                           f'"logprobs":null,"finish_reason":null}}]{u}}}\n\n'.encode()))
        done = asyncio.get_running_loop().create_future()
        _Stream(self, job, fault, rec, transport, t_adm, done)
        await done
        if rec["outcome"] == "client_disconnected":
            raise ConnectionResetError
        if fault != "reset_mid_stream":
            await resp.write_eof()

    def chunk(self, job: _Job, samplers: list[_Sampler], lo: int, hi: int, last: bool) -> bytes:
        """All events written at one deadline: one per choice (+ usage chunk and [DONE] at the end)."""
        width, out = len(samplers), []
        for i, sampler in enumerate(samplers):
            usage = None
            if job.continuous or (last and job.usage and job.api == "completions" and i == width - 1):
                usage = job.usage_json(hi * (i + 1) + lo * (width - i - 1))
            out.append(job.event(i, sampler.take(hi - lo), job.finish if last else None, usage))
        if last and job.usage and job.api == "chat":
            out.append(f'{job.head}[],"usage":{job.usage_json(hi)}}}\n\n'.encode())
        if last:
            out.append(b"data: [DONE]\n\n")
        return b"".join(out)

    async def _whole(self, request, job: _Job, fault, rec, t_adm: int) -> web.StreamResponse:
        n = job.n_out // 2 if fault == "early_done" else job.n_out
        finish = "stop" if fault == "early_done" else job.finish
        outs = [_Sampler(s, self.cfg.vocab_size).take(n) for s in job.seeds]
        texts = ["".join(f" w{i}" for i in ids) for ids in outs]
        if job.api == "chat":
            choices = [{"index": 0, "message": {"role": "assistant", "content": texts[0]},
                        "token_ids": outs[0], "logprobs": None, "finish_reason": finish}]
        else:
            choices = [{"index": i, "text": t, "token_ids": ids, "logprobs": None, "finish_reason": finish}
                       for i, (t, ids) in enumerate(zip(texts, outs))]
        body = {"id": rec["id"], "object": "chat.completion" if job.api == "chat" else "text_completion",
                "created": int(time.time()), "model": self.cfg.model, "choices": choices}
        if job.usage:
            body["usage"] = json.loads(job.usage_json(n * len(outs)))
        data = json.dumps(body).encode()
        if fault in ("malformed_sse", "invalid_json", "reset_mid_stream"):
            data, rec["outcome"] = data[: len(data) // 2], "fault"
        shift = int(self.cfg.stall_s * 1e9) if fault == "stall" else 0
        await self.clock.until(self.due(t_adm, max(n, 1) - 1) + shift)
        rec["write_ns"].append(perf_counter_ns())
        rec["tokens"].append(n * len(outs))
        rec["finish_reason"] = finish
        if fault != "reset_mid_stream":
            return web.Response(body=data, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.content_length = len(data) * 2
        await resp.prepare(request)
        await resp.write(data)
        F.reset(request.transport)
        return resp

    def check_key(self, request: web.Request) -> web.Response | None:
        key = self.cfg.api_key
        if key is None or request.headers.get("Authorization") == f"Bearer {key}":
            return None
        return _error(401, "missing or wrong API key (send `Authorization: Bearer <key>`)",
                      "invalid_request_error")

    # ---- everything that is not generation ----

    async def models(self, request: web.Request) -> web.Response:
        if (denied := self.check_key(request)) is not None:
            return denied
        return web.json_response({"object": "list", "data": [
            {"id": self.cfg.model, "object": "model", "created": 0, "owned_by": "tokenbench",
             "max_model_len": self.cfg.max_model_len}]})

    async def tokenize(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            if isinstance(body.get("messages"), list):
                text, _ = chat_text(body["messages"], body.get("add_generation_prompt", True) is not False)
                tokens = tokenize(text, self.cfg.vocab_size)
            else:
                (tokens,) = _prompts(body.get("prompt", body.get("content")), self.cfg.vocab_size)
        except (_Invalid, ValueError, AttributeError, TypeError):
            return _error(400, "send {prompt: str}, {content: str} or {messages: [...]}")
        return web.json_response({"tokens": tokens, "count": len(tokens),
                                  "max_model_len": self.cfg.max_model_len})

    async def detokenize(self, request: web.Request) -> web.Response:
        try:
            ids = (await request.json())["tokens"]
            if not all(type(t) is int and 0 <= t < self.cfg.vocab_size for t in ids):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return _error(400, "send {tokens: [ids in the vocabulary]}")
        return web.json_response({"prompt": detokenize(ids)})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response()

    async def metrics(self, request: web.Request) -> web.Response:
        g = self.gate
        kv = g.kv_used / g.kv_capacity if g.kv_capacity else 0.0
        lines = [("num_requests_running", "gauge", g.running),
                 ("num_requests_waiting", "gauge", len(g.waiting)),
                 ("kv_cache_usage_perc", "gauge", kv),
                 ("requests_total", "counter", self.totals["requests"]),
                 ("prompt_tokens_total", "counter", self.totals["prompt_tokens"]),
                 ("generation_tokens_total", "counter", self.totals["generation_tokens"])]
        label = f"{{model_name={json.dumps(self.cfg.model)}}}"
        text = "".join(f"# TYPE reference:{name} {kind}\nreference:{name}{label} {v}\n"
                       for name, kind, v in lines)
        return web.Response(text=text, content_type="text/plain")

    async def server_info(self, request: web.Request) -> web.Response:
        c = self.cfg
        return web.json_response({
            "engine": "reference", "version": __version__, "model_path": c.model,
            "max_total_num_tokens": c.kv_capacity_tokens, "context_length": c.max_model_len,
            "max_running_requests": c.max_running, "vocab_size": c.vocab_size,
            "ttft_ms": c.ttft_ms, "itl_ms": c.itl_ms, "tokens_per_chunk": c.tokens_per_chunk})


# ---- running it: in this loop, until a signal, or as a child process ----

@dataclass
class RunningReference:
    """A server started by `start()` in the current event loop."""

    url: str
    port: int
    _runner: web.AppRunner
    _server: _Server

    async def close(self) -> None:
        await self._runner.cleanup()
        await self._server.log.close()
        self._server.clock.close()


async def start(config: ReferenceConfig, host: str = "127.0.0.1", port: int = 0) -> RunningReference:
    """Listen on host:port (0 = a free port) in the running loop; `await ref.close()` stops it."""
    srv = _Server(config)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/completions", srv.completions)
    app.router.add_post("/v1/chat/completions", srv.chat)
    app.router.add_get("/v1/models", srv.models)
    app.router.add_post("/tokenize", srv.tokenize)
    app.router.add_post("/detokenize", srv.detokenize)
    app.router.add_get("/health", srv.health)
    app.router.add_get("/metrics", srv.metrics)
    app.router.add_get("/get_server_info", srv.server_info)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, backlog=4096).start()
    except OSError:
        await runner.cleanup()
        await srv.log.close()
        srv.clock.close()
        raise
    bound = runner.addresses[0][1]
    return RunningReference(f"http://{f'[{host}]' if ':' in host else host}:{bound}", bound, runner, srv)


async def serve(config: ReferenceConfig, host: str, port: int, on_ready=None) -> None:
    """Run until SIGINT or SIGTERM, then close cleanly (the send log is complete on return)."""
    ref = await start(config, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if on_ready is not None:
        on_ready(ref)
    try:
        await stop.wait()
    finally:
        await ref.close()


def run_blocking(config: ReferenceConfig, host: str, port: int, on_ready=None) -> None:
    """`serve` in a fresh loop: uvloop when it is importable (it is not a dependency)."""
    try:
        import uvloop
        factory = uvloop.new_event_loop
    except ImportError:
        factory = None

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else hard
    if soft < want:  # 1024 streams need more than the common soft limit of 1024 descriptors
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    def ready(ref: RunningReference) -> None:
        gc.collect()
        gc.freeze()  # what startup built is never collected again: shorter GC pauses while serving
        if on_ready is not None:
            on_ready(ref)

    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(config, host, port, ready))


class ReferenceProcess:
    """The server in a child process (optionally pinned to CPUs); a context manager.

    The config travels in an environment variable (never argv, which other users can read); the
    child binds a free port and prints `REFERENCE_READY port=N`. On exit the child gets SIGTERM and
    the send log is loaded: `.send_log()` -> list of per-request dicts.
    """

    def __init__(self, config: ReferenceConfig, cpu: int | set[int] | None = None,
                 host: str = "127.0.0.1", startup_timeout_s: float = 30.0) -> None:
        self.config, self.host, self.timeout = config, host, startup_timeout_s
        self.cpus = None if cpu is None else ({cpu} if isinstance(cpu, int) else set(cpu))
        self.proc: subprocess.Popen | None = None
        self.port, self.url = 0, ""
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._records: list[dict] | None = None

    def __enter__(self) -> ReferenceProcess:
        self._tmp = tempfile.TemporaryDirectory(prefix="tokenbench-ref-")
        if self.config.send_log is None:
            self.config = replace(self.config, send_log=str(Path(self._tmp.name) / "send_log.jsonl"))
        argv = [sys.executable, "-m", "tokenbench.testing.reference_server", "--host", self.host]
        if self.cpus:
            argv += ["--cpu", ",".join(map(str, sorted(self.cpus)))]
        env = {**os.environ, _CONFIG_ENV: self.config.to_json()}
        self._stderr = Path(self._tmp.name) / "stderr.txt"
        with self._stderr.open("w") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env, text=True)
        try:
            self._wait_ready(time.monotonic() + self.timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _fail(self, what: str) -> DeployError:
        tail = self._stderr.read_text(errors="replace").strip().splitlines()[-1:] or ["(no stderr)"]
        return DeployError(f"reference server {what}: {tail[0]}")

    def _wait_ready(self, deadline: float) -> None:
        with selectors.DefaultSelector() as sel:  # the child prints the ready line, or exits (EOF)
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(max(deadline - time.monotonic(), 0)):
                raise self._fail("printed no ready line in time")
        line = self.proc.stdout.readline()
        if not line.startswith(READY_PREFIX):
            self.proc.wait(5)
            raise self._fail(f"did not start (exit {self.proc.returncode})")
        self.port = int(line[len(READY_PREFIX):])
        self.url = f"http://{f'[{self.host}]' if ':' in self.host else self.host}:{self.port}"
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise self._fail("never became healthy") from None
                time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        if self._records is None and self.config.send_log and Path(self.config.send_log).exists():
            self._records = self.send_log()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def send_log(self) -> list[dict]:
        """Records written so far (complete after exit)."""
        if self._records is not None:
            return self._records
        text = Path(self.config.send_log).read_text(encoding="utf-8") if self.config.send_log else ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _child_main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tokenbench.testing.reference_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cpu", default="", help="comma-separated CPUs to pin to")
    args = parser.parse_args(argv)
    if args.cpu:
        os.sched_setaffinity(0, {int(c) for c in args.cpu.split(",")})

    def ready(ref: RunningReference) -> None:
        print(f"{READY_PREFIX}{ref.port}", flush=True)

    try:
        run_blocking(ReferenceConfig.from_json(os.environ[_CONFIG_ENV]), args.host, args.port, ready)
    except (TokenbenchError, OSError) as exc:
        print(f"error: {exc.one_line() if isinstance(exc, TokenbenchError) else exc}", file=sys.stderr)
        sys.exit(getattr(exc, "exit_code", 1))


if __name__ == "__main__":
    _child_main()
