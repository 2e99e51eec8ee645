"""The reference server's aiohttp handlers: generation (admission, prefix cache, prefill, stream or
whole answer, faults, send log) and the rest of the surface (/v1/models, /tokenize, /detokenize,
/health, /metrics, /get_server_info, /arrivals)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from time import perf_counter_ns

from aiohttp import web

from tokenbench.testing import faults as F
from tokenbench.testing import surface
from tokenbench.testing.admission import Gate, PrefillStage
from tokenbench.testing.clock import Deadlines, TimerFd
from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.jobs import Job, Sampler, parse_job, whole_body
from tokenbench.testing.load_model import ramp_ns, step_ns
from tokenbench.testing.prefix_cache import PrefixCache
from tokenbench.testing.send_log import Arrival, ArrivalLog, SendLog
from tokenbench.testing.spans import SpanExporter, times_of
from tokenbench.testing.speculative import SpecPlan, plan_steps, text_like
from tokenbench.testing.streams import Answer, Pacing, chunk_sizes, chunks_for, last_due, steps_of, stream_answer
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
            "outcome": "ok", "end_ns": None, "done_ns": None,
            "session_id": request.headers.get(SESSION_HEADER), "cached_tokens": None,
            "due_ns": None, "prefill_ns": None, "spec_drafts": None, "spec_accepted": None, "pieces_ns": None,
            "traceparent": request.headers.get("traceparent")}


SESSION_HEADER = "X-Session-ID"


class Server:
    def __init__(self, cfg: ReferenceConfig, make_timer: Callable[[], TimerFd] = TimerFd) -> None:
        self.cfg = cfg
        self.log = SendLog(cfg.send_log)
        self.clock = Deadlines(make_timer)
        self.gate = Gate(cfg.max_running, cfg.kv_capacity_tokens)
        self.prefill = PrefillStage(self.clock)
        self.cache = None if cfg.prefix_cache_blocks is None else PrefixCache(cfg.prefix_cache_blocks, cfg.block_size)
        self.faults = F.FaultPicker(cfg.faults, cfg.seed)
        self.rng = random.Random(cfg.seed)
        self.seq = 0
        self.totals = surface.Totals()
        self.arrivals = ArrivalLog()
        self.answering: set[asyncio.Task] = set()    # generation handlers still running
        self.plans: dict[str, SpecPlan] = {}         # speculative decoding: the steps of each answer
        self.spans = SpanExporter(cfg) if cfg.otlp_endpoint else None
        self.first_ns: int | None = None             # the first generation request's arrival (the ITL ramp)

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
        app.router.add_get("/arrivals", self.arrival_log)
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
        if self.spans is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.spans.close)

    # ---- generation ----

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, "completions")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, "chat")

    async def generate(self, request: web.Request, api: str) -> web.StreamResponse:
        recv_ns = perf_counter_ns()
        self.first_ns = self.first_ns or recv_ns
        self.arrivals.add(Arrival(recv_ns, request.path, request.headers.get("X-Request-Id"),
                                  request.headers.get(SESSION_HEADER)))
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
        if (self.cfg.load_model or self.cfg.spec_tokens or self.cfg.itl_end_ms is not None or self.cfg.otlp_endpoint
                or self.cfg.vllm_metrics):
            rec["due_ns"] = []                       # the deadlines the server computed (its timings use them)
        if self.cfg.spec_tokens:
            self.plans[rid] = self._spec_plan(job)
        self.totals.requests += 1
        self.totals.prompt_tokens += job.prompt_tokens
        return await self._logged(request, Answer(job, fault, rec), need)

    def _spec_plan(self, job: Job) -> SpecPlan:
        """Seeded per request (server seed, request number): the same arrivals give the same steps."""
        ids = [t for p in job.prompts for t in p]
        p = self.cfg.spec_accept_text if text_like(ids) else self.cfg.spec_accept_random
        return plan_steps(job.n_out, self.cfg.spec_tokens, p, random.Random(f"{self.cfg.seed}:{self.seq}"))

    async def _logged(self, request, ans: Answer, need: int) -> web.StreamResponse:
        """Answer, then complete the record and hand it to the send log, however the answer ended."""
        task, rec = asyncio.current_task(), ans.rec
        if task is not None:
            self.answering.add(task)
        try:
            return await self._answer(request, ans, need)
        except ConnectionError:
            rec["outcome"] = "client_disconnected"
            return web.Response()
        except asyncio.CancelledError:
            rec["outcome"] = "cancelled"
            raise
        finally:
            rec["completion_tokens"] = sum(rec["tokens"])
            self.totals.generation_tokens += rec["completion_tokens"]
            rec["end_ns"] = rec["end_ns"] or perf_counter_ns()
            self._remember(ans)
            self._timed(rec)
            self.log.add(rec)
            if task is not None:
                self.answering.discard(task)

    async def _answer(self, request, ans: Answer, need: int) -> web.StreamResponse:
        job, fault, rec = ans.job, ans.fault, ans.rec
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
        self._look_up(ans)
        try:
            if resp is not None:                   # a streamed answer
                await stream_answer(self.cfg, self.clock, request, resp, ans, lambda: self._pacing(ans, t_adm))
                return resp
            return await self._whole(request, ans, await self._pacing(ans, t_adm, per_token=True))
        finally:
            rec["end_ns"] = perf_counter_ns()
            self.gate.release(need)

    async def _whole(self, request, ans: Answer, pace: Pacing) -> web.StreamResponse:
        job, fault, rec = ans.job, ans.fault, ans.rec
        n = job.n_out // 2 if fault == "early_done" else job.n_out
        finish = "stop" if fault == "early_done" else job.finish
        outs = [Sampler(s, self.cfg.vocab_size).take(n) for s in job.seeds]
        data = whole_body(self.cfg, job, rec["id"], outs, finish)
        if fault in ("malformed_sse", "invalid_json", "reset_mid_stream"):
            data, rec["outcome"] = data[: len(data) // 2], "fault"
        shift = int(self.cfg.stall_s * 1e9) if fault == "stall" else 0
        varying = bool(self.cfg.itl_per_running_ms or self.cfg.captured_batch_sizes or self.cfg.itl_end_ms is not None)
        due = await last_due(self.clock, pace, max(n, 1), varying) + shift
        await self.clock.until(due)
        rec["write_ns"].append(perf_counter_ns())
        if rec["due_ns"] is not None:
            rec["due_ns"].append(due)
        rec["tokens"].append(n * len(outs))
        rec["finish_reason"] = finish
        if fault != "reset_mid_stream":
            return web.Response(body=data, content_type="application/json")
        return await _reset_after(request, data)

    # ---- load model, prefix cache, speculative decoding ----

    async def _pacing(self, ans: Answer, t_adm: int, per_token: bool = False) -> Pacing:
        """After the prefill (queued, under the load model): when token 0 is due and how the rest follow."""
        cfg, job = self.cfg, ans.job
        uncached = job.prompt_tokens - (job.cached or 0)
        t_pre = t_adm
        if cfg.prefill_ms_per_token and uncached:
            ans.rec["prefill_ns"] = await self.prefill.run(t_adm, uncached * cfg.prefill_ms_per_token * 1e6)
            t_pre = ans.rec["prefill_ns"][1]
        if self.cache is not None:
            for prompt in job.prompts:
                self.cache.store(prompt)
        plan = self.plans.get(ans.rec["id"])
        sizes = plan.sizes if plan else chunk_sizes(job.n_out, 1 if per_token else cfg.tokens_per_chunk)
        return Pacing(t_pre + int(cfg.ttft_ms * 1e6), sizes, steps_of(sizes, plan is not None), self._step())

    def _step(self) -> Callable[[], int]:
        """The decode step now (ns): fixed, the load model's for the running batch, or on the ITL ramp."""
        cfg = self.cfg
        if cfg.itl_end_ms is not None:
            return lambda: ramp_ns(cfg, self.first_ns or 0, perf_counter_ns())
        fixed = step_ns(cfg, 1)
        varying = cfg.itl_per_running_ms or cfg.captured_batch_sizes
        return (lambda: step_ns(cfg, self.gate.running)) if varying else (lambda: fixed)

    def _look_up(self, ans: Answer) -> None:
        if self.cache is None:
            return
        ans.job.cached = ans.rec["cached_tokens"] = sum(self.cache.lookup(p) for p in ans.job.prompts)
        self.totals.prefix_queries += ans.job.prompt_tokens
        self.totals.prefix_hits += ans.job.cached

    def _remember(self, ans: Answer) -> None:
        """At the end: the prompt + output blocks into the prefix cache; the speculative counters."""
        job, rec = ans.job, ans.rec
        width, plan = len(job.seeds), self.plans.pop(rec["id"], None)
        made = rec["completion_tokens"] // width
        if self.cache is not None and rec["admitted_ns"] is not None and made:
            for prompt, seed in zip(job.prompts, job.seeds, strict=False):
                self.cache.store(prompt + Sampler(seed, self.cfg.vocab_size).take(made)[:-1])
        if plan is not None and rec["admitted_ns"] is not None:
            steps = [t // width for t in rec["tokens"]] if job.stream else plan.sizes[:chunks_for(plan.sizes, made)]
            accepted = [s - 1 for s in steps[1:]]
            rec["spec_drafts"], rec["spec_accepted"] = len(accepted), sum(accepted)
            self.totals.add_spec(self.cfg.spec_tokens, accepted)

    def _timed(self, rec: dict) -> None:
        """An answered request's own timings: into the request-time histograms, and its span to the exporter."""
        t = times_of(rec)
        if t is None:
            return
        self.totals.times.add(t)
        if self.spans is not None:
            self.spans.add(rec, t)

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
        return web.json_response({"object": "list", "data": [surface.model_entry(self.cfg)]})

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
        load = surface.Load(g.running, len(g.waiting), g.kv_used / g.kv_capacity if g.kv_capacity else 0.0)
        return web.Response(text=surface.metrics_text(self.cfg, load, self.totals), content_type="text/plain")

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response(surface.server_info(self.cfg))

    async def arrival_log(self, request: web.Request) -> web.Response:
        """GET /arrivals?since=N: the arrivals from the Nth on (0-based, arrival order) and their gaps."""
        try:
            first = int(request.query.get("since", "0"))
        except ValueError:
            return _error(400, "since is an arrival index (an integer >= 0)")
        return web.json_response(self.arrivals.since(first))


async def _reset_after(request: web.Request, data: bytes) -> web.StreamResponse:
    """The `reset_mid_stream` fault of a whole answer: half the promised body, then a TCP reset."""
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    resp.content_length = len(data) * 2
    await resp.prepare(request)
    await resp.write(data)
    if request.transport is not None:
        F.reset(request.transport)
    return resp
