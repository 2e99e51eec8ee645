"""The reference OpenAI-compatible streaming server: ground-truth timing for tokenbench's client.

Token i of a request admitted at t_adm is due at t_adm + ttft + i*itl (absolute perf_counter_ns
deadlines); a chunk of K tokens is written when its last token is due, and every write is stamped in
the send log. See docs/reference-server.md for the full contract (tokenizer, template, usage, faults).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from time import perf_counter_ns

from aiohttp import web

from tokenbench import __version__
from tokenbench.errors import DeployError, UsageError
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
        for part in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
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
                self.release(need)
            else:
                self.waiting.remove((need, fut))
            raise

    def release(self, need: int) -> None:
        self.running, self.kv_used = self.running - 1, self.kv_used - need
        while self.waiting and self._fits(self.waiting[0][0]):
            need, fut = self.waiting.popleft()
            self.running, self.kv_used = self.running + 1, self.kv_used + need
            fut.set_result(perf_counter_ns())


# ---- send log: one JSON line per request, written one per loop turn so a burst never blocks ----

class _SendLog:
    def __init__(self, path: str | None) -> None:
        self._file = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
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


class _Deadlines:
    """Wakes tasks at absolute perf_counter_ns deadlines, within tens of microseconds.

    asyncio's timers wake up to ~1 ms late (epoll waits in whole ms). So one shared ticker sleeps on
    an asyncio timer until SPIN_NS before the earliest deadline, then re-queues itself on every loop
    turn (I/O keeps flowing) until deadlines pass, waking their tasks in deadline order.
    """

    SPIN_NS = int(os.environ.get("SPIN", 2_000_000))

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, asyncio.Future]] = []
        self._seq = 0
        self._timer: asyncio.TimerHandle | None = None
        self._spinning = False

    async def until(self, due_ns: int) -> None:
        if due_ns <= perf_counter_ns():
            return
        fut = asyncio.get_running_loop().create_future()
        self._seq += 1
        heapq.heappush(self._heap, (due_ns, self._seq, fut))
        if self._heap[0][2] is fut and not self._spinning:
            self._arm()
        await fut

    def _arm(self) -> None:
        loop = asyncio.get_running_loop()
        if self._timer is not None:
            self._timer.cancel()
        delay = (self._heap[0][0] - self.SPIN_NS - perf_counter_ns()) / 1e9
        self._timer = loop.call_later(delay, self._tick) if delay > 0 else None
        if delay <= 0:
            self._tick()

    def _tick(self) -> None:
        self._timer, now, heap = None, perf_counter_ns(), self._heap
        while heap and heap[0][0] <= now:
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_result(None)
        self._spinning = bool(heap) and heap[0][0] - now <= self.SPIN_NS
        if self._spinning:
            asyncio.get_running_loop().call_soon(self._tick)
        elif heap:
            self._arm()


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
        return f'{{"prompt_tokens":{p},"total_tokens":{p + completion},"completion_tokens":{completion}{extra}}}'

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
    if isinstance(prompt, str):
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


class _Server:
    def __init__(self, cfg: ReferenceConfig) -> None:
        self.cfg = cfg
        self.clock = _Deadlines()
        self.gate = _Gate(cfg.max_running, cfg.kv_capacity_tokens)
        self.log = _SendLog(cfg.send_log)
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
        stream = bool(body.get("stream"))
        usage = cfg.send_usage and (not stream or bool(opts.get("include_usage")))
        if body.get("temperature", 1.0) == 0:
            seeds = [zlib.crc32(json.dumps(p).encode()) for p in prompts]
        else:
            base = body["seed"] if type(body.get("seed")) is int else self.rng.getrandbits(31)
            seeds = [base + i for i in range(len(prompts))]
        kind = "chat.completion.chunk" if api == "chat" else "text_completion"
        head = (f'data: {{"id":"{rid}","object":"{kind}","created":{int(time.time())},'
                f'"model":{json.dumps(cfg.model)},"choices":')
        return _Job(api, head, prompts, n_out, finish, stream, usage,
                    usage and stream and bool(opts.get("continuous_usage_stats")), seeds, images)

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
        finally:
            rec["completion_tokens"] = sum(rec["tokens"])
            self.totals["generation_tokens"] += rec["completion_tokens"]
            rec["end_ns"] = perf_counter_ns()
            self.log.add(rec)

    async def _answer(self, request, job: _Job, fault, rec, need) -> web.StreamResponse:
        if fault == "slow_headers":
            await asyncio.sleep(self.cfg.slow_headers_s)
        if fault in F.HTTP_FAULTS:
            rec["status"], rec["outcome"] = F.HTTP_FAULTS[fault], "fault"
            return _error(rec["status"], f"injected fault {fault}", "server_error", **{"Retry-After": "1"})
        resp = None
        if job.stream:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await resp.prepare(request)
        rec["admitted_ns"] = t_adm = await self.gate.acquire(need)
        try:
            if job.stream:
                await self._stream(request, resp, job, fault, rec, t_adm)
                return resp
            return await self._whole(request, job, fault, rec, t_adm)
        finally:
            self.gate.release(need)

    def _due(self, t_adm: int, last_token: int) -> int:
        return t_adm + int(self.cfg.ttft_ms * 1e6) + last_token * int(self.cfg.itl_ms * 1e6)

    async def _stream(self, request, resp, job: _Job, fault, rec, t_adm: int) -> None:
        k, n, width = self.cfg.tokens_per_chunk, job.n_out, len(job.prompts)
        samplers = [_Sampler(s, self.cfg.vocab_size) for s in job.seeds]
        n_chunks = -(-n // k)
        strike = F.fault_point(n_chunks) if fault in _STREAM_FAULTS else -1
        shift = 0
        if job.api == "chat":
            u = f',"usage":{job.usage_json(0)}' if job.continuous else ""
            rec["role_ns"] = perf_counter_ns()
            await resp.write(f'{job.head}[{{"index":0,"delta":{{"role":"assistant"}},'
                             f'"logprobs":null,"finish_reason":null}}]{u}}}\n\n'.encode())
        for c in range(n_chunks):
            lo, hi = c * k, min(n, c * k + k)
            if c == strike and fault == "stall":
                shift = int(self.cfg.stall_s * 1e9)
            if c == strike and fault in ("reset_mid_stream", "early_done"):
                await self.clock.until(self._due(t_adm, hi - 1) + shift)
                rec["outcome"] = "fault"
                if fault == "early_done":
                    await resp.write_eof(b"data: [DONE]\n\n")
                else:
                    F.reset(request.transport)
                return
            data = self._chunk(job, samplers, lo, hi, c == n_chunks - 1)
            if c == strike and fault == "invalid_json":
                data = F.corrupt(data)
            elif c == strike and fault == "malformed_sse":
                data = F.MALFORMED_LINE + data
            await self.clock.until(self._due(t_adm, hi - 1) + shift)
            rec["write_ns"].append(perf_counter_ns())
            rec["tokens"].append((hi - lo) * width)
            await (resp.write_eof(data) if hi == n else resp.write(data))
        rec["finish_reason"] = job.finish

    def _chunk(self, job: _Job, samplers: list[_Sampler], lo: int, hi: int, last: bool) -> bytes:
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
        await self.clock.until(self._due(t_adm, max(n, 1) - 1) + shift)
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
                 ("request_success_total", "counter", self.totals["requests"]),
                 ("prompt_tokens_total", "counter", self.totals["prompt_tokens"]),
                 ("generation_tokens_total", "counter", self.totals["generation_tokens"])]
        text = "".join(f"# TYPE reference:{name} {kind}\nreference:{name}{{model_name=\"{self.cfg.model}\"}} {v}\n"
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


async def start(config: ReferenceConfig, host: str = "127.0.0.1", port: int = 0) -> RunningReference:
    """Listen on host:port (0 = a free port) in the running loop; `await ref.close()` stops it."""
    srv = _Server(config)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/completions", lambda r: srv.generate(r, "completions"))
    app.router.add_post("/v1/chat/completions", lambda r: srv.generate(r, "chat"))
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
        raise
    bound = runner.addresses[0][1]
    return RunningReference(f"http://{host}:{bound}", bound, runner, srv)


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
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(config, host, port, on_ready))


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
        if self.config.send_log is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tokenbench-ref-")
            self.config = replace(self.config, send_log=str(Path(self._tmp.name) / "send_log.jsonl"))
        argv = [sys.executable, "-m", "tokenbench.testing.reference_server", "--host", self.host]
        if self.cpus:
            argv += ["--cpu", ",".join(map(str, sorted(self.cpus)))]
        env = {**os.environ, _CONFIG_ENV: self.config.to_json()}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, text=True)
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def _wait_ready(self) -> None:
        line = self.proc.stdout.readline()  # the child prints this line or exits (EOF)
        if not line.startswith(READY_PREFIX):
            raise DeployError(f"reference server did not start (exit {self.proc.wait(5)})",
                              hint="see its stderr above")
        self.port = int(line[len(READY_PREFIX):])
        self.url = f"http://{self.host}:{self.port}"
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise DeployError("reference server never became healthy") from None
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
    config = ReferenceConfig.from_json(os.environ[_CONFIG_ENV])

    def ready(ref: RunningReference) -> None:
        print(f"{READY_PREFIX}{ref.port}", flush=True)

    run_blocking(config, args.host, args.port, ready)


if __name__ == "__main__":
    _child_main()
