"""The reference server replaying a recorded server (testing/recordings.py): the recorded model list,
/tokenize answer and refusals as they came, and every generation answered with the recorded stream, its
events paced `ttft_ms` then `itl_ms` apart. One thing is not replayed byte for byte: usage's prompt_tokens
(and total_tokens) is recounted from the prompt sent, by the reference tokenizer, so a replay can be run at
any input length; everything else, completion_tokens and the stream's end ([DONE] or not) included, is as
recorded."""

from __future__ import annotations

import asyncio
import re

from aiohttp import web

from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.recordings import Answer, Recording
from tokenbench.testing.tokenizer import chat_text, detokenize, tokenize

_PROMPT = re.compile(r'"prompt_tokens"\s*:\s*\d+')
_TOTAL = re.compile(r'"total_tokens"\s*:\s*\d+')
_COMPLETION = re.compile(r'"completion_tokens"\s*:\s*(\d+)')


def prompt_tokens(body: dict, api: str, vocab_size: int) -> int:
    """The reference tokenizer's count of the prompt (chat: with its template)."""
    if api == "chat":
        return len(tokenize(chat_text(body.get("messages") or [])[0], vocab_size))
    prompt = body.get("prompt")
    return len(prompt) if isinstance(prompt, list) else len(tokenize(str(prompt or ""), vocab_size))


def recount(text: str, prompt: int) -> str:
    """The text with usage's prompt_tokens (and total_tokens) set to `prompt`."""
    if not _PROMPT.search(text):
        return text
    m = _COMPLETION.search(text)
    text = _PROMPT.sub(f'"prompt_tokens":{prompt}', text)
    return _TOTAL.sub(f'"total_tokens":{prompt + int(m.group(1))}', text) if m else text


def _plain(a: Answer, body: str | None = None) -> web.Response:
    headers = {k: v for k, v in a.headers.items() if k != "content-type"}
    kind = a.headers.get("content-type", "application/json").split(";")[0]
    return web.Response(status=a.status, text=a.body if body is None else body, content_type=kind, headers=headers)


class Replay:
    """The aiohttp app of one recording."""

    def __init__(self, cfg: ReferenceConfig, rec: Recording) -> None:
        self.cfg, self.rec = cfg, rec

    def application(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", lambda r: self._answer(self.rec.models))
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_post("/detokenize", self.detokenize)
        app.router.add_get("/health", lambda r: self._answer(Answer(200, {}, "")))
        return app

    async def _answer(self, a: Answer) -> web.Response:
        return _plain(a)

    async def tokenize(self, request: web.Request) -> web.Response:
        if self.rec.tokenize.status != 200:
            return _plain(self.rec.tokenize)
        body = await request.json()
        ids = tokenize(str(body.get("prompt", "")), self.cfg.vocab_size)
        return web.json_response({"tokens": ids, "count": len(ids), "max_model_len": self.cfg.max_model_len})

    async def detokenize(self, request: web.Request) -> web.Response:
        if self.rec.tokenize.status != 200:
            return _plain(self.rec.tokenize)
        return web.json_response({"prompt": detokenize(list((await request.json()).get("tokens", [])))})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, "completions")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, "chat")

    async def generate(self, request: web.Request, api: str) -> web.StreamResponse:
        t0 = asyncio.get_running_loop().time()
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": {"message": "the body is not JSON"}}, status=400)
        if api not in self.rec.streams:
            return web.json_response({"detail": "Not Found"}, status=404)
        refused = self.rec.refusal(body)
        if refused is not None:
            return _plain(refused)
        n = prompt_tokens(body, api, self.cfg.vocab_size)
        if not body.get("stream"):
            whole = self.rec.whole[api]
            return _plain(whole, recount(whole.body, n))
        return await self._stream(request, self.rec.streams[api], n, t0)

    async def _stream(self, request: web.Request, a: Answer, n: int, t0: float) -> web.StreamResponse:
        resp = web.StreamResponse(status=a.status, headers=a.headers)
        await resp.prepare(request)
        loop = asyncio.get_running_loop()
        for i, event in enumerate(a.events):
            due = t0 + (self.cfg.ttft_ms + i * self.cfg.itl_ms) / 1000
            await asyncio.sleep(max(0.0, due - loop.time()))
            await resp.write(recount(event, n).encode())
        await resp.write_eof()
        return resp


def replay_app(cfg: ReferenceConfig) -> web.Application:
    """The app replaying `cfg.recording`."""
    return Replay(cfg, Recording.load(str(cfg.recording))).application()
