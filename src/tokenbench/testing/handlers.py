"""The reference server's aiohttp handlers: generation (admission, stream or whole answer, faults,
send log) and the rest of the surface (/v1/models, /tokenize, /detokenize, /health, /metrics,
/get_server_info)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from time import perf_counter_ns

from aiohttp import web

from tokenbench import __version__
from tokenbench.testing import faults as F
from tokenbench.testing.admission import Gate
from tokenbench.testing.clock import Deadlines, TimerFd
from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.jobs import Job, Sampler, parse_job, whole_body
from tokenbench.testing.send_log import SendLog
from tokenbench.testing.streams import due_ns, stream_answer
from tokenbench.testing.tokenizer import InvalidRequest, chat_text, detokenize, token_lists, tokenize


def _error(status: int, message: str, kind: str = "invalid_request_error", **headers: str):
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.json_response(body, status=status, headers=headers)


def _new_record(rid: str, request: web.Request, api: str, job: Job, fault, recv_ns: int) -> dict:
    """The send log's line for one request, before it is answered."""
    return {"id": rid, "x_request_id": request.headers.get("X-Request-Id"), "api": api,
            "stream": job.stream, "fault": fault, "status": 200, "recv_ns": recv_ns,
            "admitted_ns": None, "role_ns": None, "write_ns": [], "tokens": [],
            "prompt_tokens": job.prompt_tokens, "completion_tokens": 0, "finish_reason": None,
            "outcome": "ok", "end_ns": None}


class Server:
    def __init__(self, cfg: ReferenceConfig, make_timer: Callable[[], TimerFd] = TimerFd) -> None:
        self.cfg = cfg
        self.log = SendLog(cfg.send_log)
        self.clock = Deadlines(make_timer)
        self.gate = Gate(cfg.max_running, cfg.kv_capacity_tokens)
        self.faults = F.FaultPicker(cfg.faults, cfg.seed)
        self.rng = random.Random(cfg.seed)
        self.seq = 0
        self.totals = {"requests": 0, "prompt_tokens": 0, "generation_tokens": 0}
        self.answering: set[asyncio.Task] = set()    # generation handlers still running

    def application(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        if self.cfg.tokenize_endpoint:
            app.router.add_post("/tokenize", self.tokenize)
            app.router.add_post("/detokenize", self.detokenize)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/get_server_info", self.server_info)
        return app

    async def close(self) -> None:
        """Cancel the answers still running (a stalled request whose client left is no longer one
        of the HTTP server's connections, so its shutdown does not see it), so that every request
        is in the send log, then close the log."""
        for task in list(self.answering):
            task.cancel()
        await asyncio.gather(*self.answering, return_exceptions=True)
        await self.log.close()
        self.clock.close()

    # ---- generation ----

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, "completions")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, "chat")

    async def generate(self, request: web.Request, api: str) -> web.StreamResponse:
        recv_ns = perf_counter_ns()
        # Yield once, so every request of a burst stamps its arrival before any of them is parsed:
        # the parsing then runs inside each request's TTFT instead of delaying the next one's receipt.
        await asyncio.sleep(0)
        if (denied := self.check_key(request)) is not None:
            return denied
        self.seq += 1
        rid = f"{'chatcmpl' if api == 'chat' else 'cmpl'}-{self.seq}"
        try:
            job = parse_job(self.cfg, self.rng, await request.json(), api, rid)
        except (InvalidRequest, ValueError) as exc:
            return _error(400, str(exc) if isinstance(exc, InvalidRequest) else "the body is not JSON")
        need = job.prompt_tokens + len(job.prompts) * job.n_out
        if self.cfg.kv_capacity_tokens is not None and need > self.cfg.kv_capacity_tokens:
            return _error(400, f"request needs {need} KV tokens, capacity is {self.cfg.kv_capacity_tokens}")
        fault = self.faults.pick()
        if fault == "missing_usage":
            job.usage = job.continuous = job.usage_alone = False
        rec = _new_record(rid, request, api, job, fault, recv_ns)
        self.totals["requests"] += 1
        self.totals["prompt_tokens"] += job.prompt_tokens
        return await self._logged(request, job, fault, rec, need)

    async def _logged(self, request, job: Job, fault, rec: dict, need: int) -> web.StreamResponse:
        """Answer, then complete `rec` and hand it to the send log, however the answer ended."""
        task = asyncio.current_task()
        if task is not None:
            self.answering.add(task)
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
            if task is not None:
                self.answering.discard(task)

    async def _answer(self, request, job: Job, fault, rec, need) -> web.StreamResponse:
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
        arrival = None if fault == "slow_headers" else rec["recv_ns"]  # slow headers: clock after them
        rec["admitted_ns"] = t_adm = await self.gate.acquire(need, arrival)
        try:
            if resp is not None:                   # a streamed answer
                await stream_answer(self.cfg, self.clock, request, resp, job, fault, rec, t_adm)
                return resp
            return await self._whole(request, job, fault, rec, t_adm)
        finally:
            rec["end_ns"] = perf_counter_ns()
            self.gate.release(need)

    async def _whole(self, request, job: Job, fault, rec, t_adm: int) -> web.StreamResponse:
        n = job.n_out // 2 if fault == "early_done" else job.n_out
        finish = "stop" if fault == "early_done" else job.finish
        outs = [Sampler(s, self.cfg.vocab_size).take(n) for s in job.seeds]
        data = whole_body(self.cfg, job, rec["id"], outs, finish)
        if fault in ("malformed_sse", "invalid_json", "reset_mid_stream"):
            data, rec["outcome"] = data[: len(data) // 2], "fault"
        shift = int(self.cfg.stall_s * 1e9) if fault == "stall" else 0
        await self.clock.until(due_ns(self.cfg, t_adm, max(n, 1) - 1) + shift)
        rec["write_ns"].append(perf_counter_ns())
        rec["tokens"].append(n * len(outs))
        rec["finish_reason"] = finish
        if fault != "reset_mid_stream":
            return web.Response(body=data, content_type="application/json")
        return await _reset_after(request, data)

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
                (tokens,) = token_lists(body.get("prompt", body.get("content")), self.cfg.vocab_size)
        except (InvalidRequest, ValueError, AttributeError, TypeError):
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
        info = {"engine": "reference", "version": __version__, "model_path": c.model,
                "max_total_num_tokens": c.kv_capacity_tokens, "context_length": c.max_model_len,
                "max_running_requests": c.max_running, "vocab_size": c.vocab_size,
                "ttft_ms": c.ttft_ms, "itl_ms": c.itl_ms, "tokens_per_chunk": c.tokens_per_chunk}
        if not c.report_vocab:
            del info["vocab_size"]
        return web.json_response(info)


async def _reset_after(request: web.Request, data: bytes) -> web.StreamResponse:
    """The `reset_mid_stream` fault of a whole answer: half the promised body, then a TCP reset."""
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    resp.content_length = len(data) * 2
    await resp.prepare(request)
    await resp.write(data)
    if request.transport is not None:
        F.reset(request.transport)
    return resp
