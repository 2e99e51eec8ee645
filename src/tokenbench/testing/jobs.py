"""One generation request of the reference server: the body parsed into a Job, and the bytes of
its SSE events. Output ids come from a seeded LCG, so temperature 0 answers are repeatable."""

from __future__ import annotations

import json
import random
import time
import zlib
from array import array
from dataclasses import dataclass

from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.tokenizer import InvalidRequest, chat_text, token_lists, tokenize


@dataclass(slots=True, kw_only=True)
class Job:
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
    style: Style
    usage_alone: bool = False  # streamed usage on its own final chunk (`choices: []`): chat always, completions on ask
    cached: int | None = None  # prompt tokens found in the prefix cache (None: the server has none)

    @property
    def prompt_tokens(self) -> int:
        return sum(map(len, self.prompts))

    def usage_json(self, completion: int) -> str:
        p = self.prompt_tokens
        details = [f'"cached_tokens":{self.cached}'] if self.cached is not None else []
        details += [f'"image_count":{self.images}'] if self.images else []
        extra = f',"prompt_tokens_details":{{{",".join(details)}}}' if details else ""
        return (f'{{"prompt_tokens":{p},"total_tokens":{p + completion},'
                f'"completion_tokens":{completion}{extra}}}')

    def event(self, index: int, ids: list[int], finish: str | None, usage: str | None, lo: int = 0) -> bytes:
        """The event of one choice carrying output tokens lo, lo+1, ... (their ids)."""
        body = self.style.body(self.api, ids, lo)
        token_ids = f',"token_ids":[{",".join(map(str, ids))}]' if self.style.token_ids else ""
        fin = "null" if finish is None else f'"{finish}"'
        tail = "" if usage is None else f',"usage":{usage}'
        return (f'{self.head}[{{"index":{index},{body}{token_ids},'
                f'"logprobs":null,"finish_reason":{fin}}}]{tail}}}\n\n').encode()


@dataclass(slots=True, frozen=True)
class Style:
    """How streamed tokens look: reasoning first (under which field), empty-text tokens, tool calls."""

    token_ids: bool = True
    reasoning_tokens: int = 0
    reasoning_field: str = "reasoning"
    empty_every: int = 0
    tool_calls: bool = False

    @classmethod
    def of(cls, cfg: ReferenceConfig) -> Style:
        return cls(cfg.token_ids, cfg.reasoning_tokens, cfg.reasoning_field, cfg.empty_every, cfg.tool_calls)

    def word(self, pos: int, token_id: int) -> str:
        return "" if self.empty_every and pos % self.empty_every == 0 else f" w{token_id}"

    def body(self, api: str, ids: list[int], lo: int) -> str:
        words = [self.word(lo + j, t) for j, t in enumerate(ids)]
        if api != "chat":
            return f'"text":"{"".join(words)}"'
        cut = max(0, min(len(ids), self.reasoning_tokens - lo))
        fields = [self._reasoning("".join(words[:cut]))] if cut else []
        if cut < len(ids):
            fields.append(self._answer("".join(words[cut:]), first=lo + cut == self.reasoning_tokens))
        return f'"delta":{{{",".join(fields)}}}'

    def _reasoning(self, text: str) -> str:
        names = ("reasoning", "reasoning_content") if self.reasoning_field == "both" else (self.reasoning_field,)
        return ",".join(f'"{n}":"{text}"' for n in names)

    def _answer(self, text: str, first: bool) -> str:
        if not self.tool_calls:
            return f'"content":"{text}"'
        head = '"id":"call_0","type":"function","function":{"name":"lookup",' if first else '"function":{'
        return f'"tool_calls":[{{"index":0,{head}"arguments":"{text}"}}}}]'


class Sampler:
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


def parse_job(cfg: ReferenceConfig, rng: random.Random, body: object, api: str, rid: str) -> Job:
    """Validate a request body (raises InvalidRequest) and plan its answer."""
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    prompts, images = _prompt_ids(body, api, cfg.vocab_size)
    n_out, finish = _lengths(cfg, body, api, prompts)
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise InvalidRequest("stream_options must be an object")
    stream = bool(body.get("stream"))
    usage = cfg.send_usage and (not stream or bool(opts.get("include_usage")))
    return Job(api=api, head=_head(cfg, api, rid), prompts=prompts, n_out=n_out, finish=finish, stream=stream,
               usage=usage,
               continuous=usage and stream and cfg.continuous_usage and bool(opts.get("continuous_usage_stats")),
               seeds=_seeds(body, prompts, rng), images=images, style=Style.of(cfg),
               usage_alone=usage and stream and (api == "chat" or cfg.usage_chunk))


def _prompt_ids(body: dict, api: str, vocab_size: int) -> tuple[list[list[int]], int]:
    if api != "chat":
        return token_lists(body.get("prompt"), vocab_size), 0
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise InvalidRequest("messages must be a non-empty list")
    text, images = chat_text(body["messages"])
    return [tokenize(text, vocab_size)], images


def _lengths(cfg: ReferenceConfig, body: dict, api: str, prompts: list[list[int]]) -> tuple[int, str]:
    names = ("max_completion_tokens", "max_tokens") if api == "chat" else ("max_tokens",)
    max_tokens, min_tokens = _int(body, *names, default=16), _int(body, "min_tokens", default=0)
    if max_tokens < 1 or not 0 <= min_tokens <= max_tokens or body.get("n", 1) != 1:
        raise InvalidRequest("need max_tokens >= 1, 0 <= min_tokens <= max_tokens, n == 1")
    if max(map(len, prompts)) + max_tokens > cfg.max_model_len:
        raise InvalidRequest(f"prompt + max_tokens exceeds max_model_len {cfg.max_model_len}")
    return output_length(cfg, max_tokens, min_tokens, bool(body.get("ignore_eos")))


def _int(body: dict, *names: str, default: int) -> int:
    value = next((body[n] for n in names if body.get(n) is not None), default)
    if type(value) is not int:
        raise InvalidRequest(f"{names[0]} must be an integer")
    return value


def output_length(cfg: ReferenceConfig, max_tokens: int, min_tokens: int, ignore_eos: bool):
    """(tokens, finish_reason). The simulated model wants to stop (EOS) after half of max_tokens."""
    natural = (max_tokens + 1) // 2
    if not cfg.honor_ignore_eos:
        n = natural
    elif ignore_eos:
        n = max_tokens
    else:
        n = max(natural, min_tokens)
    return n, ("length" if n == max_tokens else "stop")


def _seeds(body: dict, prompts: list[list[int]], rng: random.Random) -> list[int]:
    """One sampler seed per prompt: from the prompt at temperature 0, else the body's seed or a draw."""
    if body.get("temperature", 1.0) == 0:
        return [zlib.crc32(array("q", p).tobytes()) for p in prompts]
    base = body["seed"] if type(body.get("seed")) is int else rng.getrandbits(31)
    return [base + i for i in range(len(prompts))]


def _head(cfg: ReferenceConfig, api: str, rid: str) -> str:
    kind = "chat.completion.chunk" if api == "chat" else "text_completion"
    return (f'data: {{"id":"{rid}","object":"{kind}","created":{int(time.time())},'
            f'"model":{json.dumps(cfg.model)},"choices":')


def whole_body(cfg: ReferenceConfig, job: Job, rid: str, outs: list[list[int]], finish: str) -> bytes:
    """The JSON answer of a non-streaming request whose choices produced `outs`."""
    texts = ["".join(f" w{i}" for i in ids) for ids in outs]
    if job.api == "chat":
        choices = [{"index": 0, "message": {"role": "assistant", "content": texts[0]},
                    "token_ids": outs[0], "logprobs": None, "finish_reason": finish}]
    else:
        choices = [{"index": i, "text": t, "token_ids": ids, "logprobs": None, "finish_reason": finish}
                   for i, (t, ids) in enumerate(zip(texts, outs, strict=False))]
    body = {"id": rid, "object": "chat.completion" if job.api == "chat" else "text_completion",
            "created": int(time.time()), "model": cfg.model, "choices": choices}
    if job.usage:
        body["usage"] = json.loads(job.usage_json(sum(map(len, outs))))
    return json.dumps(body).encode()
