"""The capability probe: a few small requests, once per target, before any cell, that find what the server
accepts (spec/server_kinds.Capabilities), so that every cell keeps its lengths exact where the server
allows it and says how where it does not.

1. The request a cell sends, with a PROBE_OUT-token answer: token-id prompt (completions), ignore_eos,
   min_tokens, stream_options with continuous usage. A refusal (HTTP 4xx) drops the field the error names
   (else the next in DROP_ORDER: a guess) and tries again, each drop one line in `refused`; once a request is
   accepted, each guessed drop but the last is put back and tried once more (a refusal that names nothing
   must not cost a field the server accepts).
2. Its stream tells whether usage came (on every chunk or at the end) and whether `data: [DONE]` ends it.
3. The other API (chat or completions) with a 1-token answer, GET /v1/responses (405 or 400: served), and
   POST /tokenize.
The model list was read by load/target.resolve. A request the probe cannot read anything from leaves every
field in (the cells record the answers), except where the answers tell the cells cannot succeed: the API
asked is not served (HTTP 404) while the other is (use the other), or neither serves the model and the list
names others (use one of those): then one line says so before any cell."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any

from tokenbench.client import api
from tokenbench.client.api import first_line
from tokenbench.errors import UsageError
from tokenbench.load.target import Endpoint, ModelList, not_served, unlisted_note
from tokenbench.spec.server_kinds import KINDS, Capabilities
from tokenbench.spec.study import Target

PROBE_OUT = 4              # output tokens of the probe's streamed request
PROBE_TIMEOUT_S = 30.0     # one probe request at most
PROBE_IDS = [1000, 1001, 1002, 1003]
PROBE_TEXT = "Say hello"
FIELDS = ("ignore_eos", "min_tokens", "continuous_usage_stats", "stream_options")
DROP_ORDER = ("min_tokens", "ignore_eos", "continuous_usage_stats", "stream_options", "prompt")
WORTH = ("ignore_eos", "min_tokens", "prompt", "stream_options", "continuous_usage_stats")   # put back in this order
MAX_TRIES = len(DROP_ORDER) + 1


@dataclass
class _Ask:
    """The body being tried: which optional parts it still carries."""

    api: str
    model: str
    token_ids: bool
    parts: set[str] = field(default_factory=lambda: set(FIELDS))

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "max_tokens": PROBE_OUT, "temperature": 0, "stream": True}
        if self.api == "chat":
            out["messages"] = [{"role": "user", "content": PROBE_TEXT}]
        else:
            out["prompt"] = PROBE_IDS if self.token_ids else PROBE_TEXT
        if "ignore_eos" in self.parts:
            out["ignore_eos"] = True
        if "min_tokens" in self.parts:
            out["min_tokens"] = PROBE_OUT
        if "stream_options" in self.parts:
            usage = {"include_usage": True}
            out["stream_options"] = {**usage, "continuous_usage_stats": True} if (
                "continuous_usage_stats" in self.parts) else usage
        return out

    def named(self, text: str) -> list[str]:
        """The optional parts a refusal's text names ("prompt": the token-id prompt)."""
        named = [f for f in FIELDS if f in self.parts and f in text]
        return named or (["prompt"] if self.token_ids and "prompt" in text.lower() else [])

    def optional(self) -> list[str]:
        """The optional parts still carried, in DROP_ORDER."""
        return [f for f in DROP_ORDER if self.has(f)]

    def has(self, part: str) -> bool:
        return self.token_ids if part == "prompt" else part in self.parts

    def put(self, part: str, present: bool) -> None:
        """Carry `part` (a FIELDS key, or "prompt": token ids) or leave it out."""
        if part == "prompt":
            self.token_ids = present
        elif present:
            self.parts.add(part)
        else:
            self.parts.discard(part)
            if part == "stream_options":
                self.parts.discard("continuous_usage_stats")

    def dropped(self) -> list[str]:
        return sorted(set(FIELDS) - self.parts) + ([] if self.token_ids or self.api == "chat" else ["prompt"])


def _notice(parts: list[str], status: int, text: str) -> str:
    shown = " and ".join("token-id prompts" if f == "prompt" else f for f in parts)
    return f"{shown} refused (HTTP {status}: {text}): left out"


@dataclass
class _Stream:
    """What the probe's stream showed."""

    events: list[dict] = field(default_factory=list)
    done: bool = False

    @classmethod
    def of(cls, body: bytes) -> _Stream:
        out = cls()
        for line in body.decode("utf-8", "replace").splitlines():
            data = line[5:].strip() if line.startswith("data:") else None
            if data == "[DONE]":
                out.done = True
            elif data:
                try:
                    out.events.append(json.loads(data))
                except ValueError:
                    continue
        return out

    def usage_chunks(self) -> tuple[int, int]:
        """(chunks with usage, of them those that also carry a choice)."""
        with_usage = [e for e in self.events if isinstance(e, dict) and isinstance(e.get("usage"), dict)]
        return len(with_usage), sum(1 for e in with_usage if e.get("choices"))


class Probe:
    """One target's probe; `run()` gives its Capabilities."""

    def __init__(self, base_url: str, model: str, key: str | None, api_name: str, kind: str | None = None) -> None:
        self.base_url, self.model, self.key, self.api = base_url, model, key, api_name
        self.caps = Capabilities(kind=kind, probed=True, api="chat" if api_name == "chat" else "completions")
        self.started = time.perf_counter()
        self.unanswered: tuple[int, str] | None = None    # the main request's status and body when nothing was read

    def post(self, path: str, body: dict) -> tuple[int, bytes]:
        self.caps.requests += 1
        return api.call(self.base_url, path, body, self.key, timeout=PROBE_TIMEOUT_S, quiet=True)

    def run(self, models: ModelList | None = None) -> Capabilities:
        if models is not None:
            self.caps.models_status, self.caps.models_listed = models.status, len(models.entries)
        self.generation()
        if self.unanswered is None or self.unanswered[0] != 0:      # a server that did not answer twice: no more
            self.endpoints()
            self.served(models)
            self.tokenize()
        self.known_ignored()
        self.caps.seconds = round(time.perf_counter() - self.started, 3)
        return self.caps

    def generation(self) -> None:
        ask = _Ask(self.api, self.model, token_ids=self.api != "chat")
        waited = False
        for _ in range(MAX_TRIES + 1):
            status, body = self.post(self.path, ask.body())
            if status == 200:
                return self._accepted(ask, _Stream.of(body))
            if status == 0 and not waited:
                waited = True                  # a server's first answer may be lost (transformers serve 5.17)
                self.caps.refused.append(f"no answer within {PROBE_TIMEOUT_S:.0f} s: asked again")
                continue
            if not (400 <= status < 500 and status not in (401, 403, 404, 429)) or not ask.optional():
                return self._undecided(self.path, status, body)
            named = ask.named(self.said(body))
            if not named:
                return self._search(ask, status, self.said(body))
            for part in named:
                ask.put(part, False)
            self.caps.refused.append(_notice(named, status, self.said(body)))
        return self._undecided(self.path, 0, b"every form of a small request was refused")

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"

    def _search(self, ask: _Ask, status: int, text: str) -> None:
        """A refusal that names no field: leave out one optional part at a time (DROP_ORDER); where no one
        alone is enough, all of them, then put each back (most valuable first) where the server accepts it.
        A field is left out only when a request carrying it was refused."""
        parts, carried = ask.optional(), (set(ask.parts), ask.token_ids)
        for part in parts:
            ask.put(part, False)
            got, body = self.post(self.path, ask.body())
            if got == 200:
                self.caps.refused.append(_notice([part], status, text))
                return self._accepted(ask, _Stream.of(body))
            ask.parts, ask.token_ids = set(carried[0]), carried[1]
        for part in parts:
            ask.put(part, False)
        got, body = self.post(self.path, ask.body())
        if got != 200:
            return self._undecided(self.path, got, body)
        stream = _Stream.of(body)
        for part in sorted(parts, key=WORTH.index):
            ask.put(part, True)
            got, body = self.post(self.path, ask.body())
            if got == 200:
                stream = _Stream.of(body)
            else:
                ask.put(part, False)
        self.caps.refused.append(_notice([p for p in parts if not ask.has(p)], status, text))
        return self._accepted(ask, stream)

    def said(self, body: bytes) -> str:
        """A body's first line with the API key masked (some servers quote the Authorization header)."""
        line = first_line(body)
        return line.replace(self.key, "***") if self.key else line

    def _undecided(self, path: str, status: int, body: bytes) -> None:
        """No answer tells what the server accepts (no answer, the key refused, no such model, a server error):
        tokenbench's full body is kept, and the cells record what the server answers (failures are data)."""
        what = f"HTTP {status} ({self.said(body)})" if status else "no answer"
        self.unanswered = (status, what)
        self.caps.refused.append(f"{path} gave {what} to a {PROBE_OUT}-token request: nothing left out, every "
                                 "field assumed")
        self.caps.token_ids, self.caps.ignore_eos, self.caps.min_tokens = self.api != "chat" or None, True, True

    def _accepted(self, ask: _Ask, stream: _Stream) -> None:
        c = self.caps
        c.endpoints[self.api] = True
        c.dropped = ask.dropped()
        c.token_ids = ask.token_ids if self.api != "chat" else None
        c.ignore_eos, c.min_tokens = "ignore_eos" in ask.parts, "min_tokens" in ask.parts
        c.stream_options = "stream_options" in ask.parts
        usage, with_choice = stream.usage_chunks()
        c.stream_usage = usage > 0
        c.continuous_usage = with_choice > 1
        c.done_marker = stream.done

    def endpoints(self) -> None:
        other = "completions" if self.api == "chat" else "chat"
        body: dict[str, Any] = {"model": self.model, "max_tokens": 1, "temperature": 0}
        if other == "chat":
            body["messages"] = [{"role": "user", "content": PROBE_TEXT}]
        else:
            body["prompt"] = PROBE_TEXT
        status, _ = self.post("/v1/chat/completions" if other == "chat" else "/v1/completions", body)
        self.caps.endpoints[other] = status == 200
        self.caps.requests += 1
        status, _ = api.call(self.base_url, "/v1/responses", None, self.key, timeout=PROBE_TIMEOUT_S, quiet=True)
        self.caps.endpoints["responses"] = status in (200, 400, 405, 422)

    def served(self, models: ModelList | None) -> None:
        """Stop before any cell where the probe's answers say every request would be refused: the API asked
        answers 404 and the other API serves the model, or both answer 404 and the list names other models."""
        if self.unanswered is None or self.unanswered[0] != 404:
            return
        other = "completions" if self.api == "chat" else "chat"
        if self.caps.endpoints.get(other):
            raise UsageError(f"{self.base_url}{self.path} answered {self.unanswered[1]}: the server does not serve the "
                             f"{self.caps.api} API, it serves {other}", f"pass --api {other}")
        if models is not None and models.entries and self.model not in models.ids():
            raise not_served(self.base_url, self.model, models, answer=self.unanswered[1])

    def known_ignored(self) -> None:
        """Fields the named kind accepts without honouring them (a probe cannot tell): not counted on."""
        c = self.caps
        for name in KINDS[c.kind].ignored if c.kind else ():
            if getattr(c, name):
                setattr(c, name, False)
                c.refused.append(f"{name} accepted but not honoured by {c.kind} servers (docs/compatibility.md): "
                                 "left out")
                c.dropped = sorted({*c.dropped, name})

    def tokenize(self) -> None:
        status, body = self.post("/tokenize", {"model": self.model, "prompt": PROBE_TEXT})
        try:
            data = json.loads(body) if status == 200 else None
        except ValueError:
            data = None
        self.caps.tokenize = isinstance(data, dict) and isinstance(data.get("tokens"), list)


# engines tokenbench has adapters for (deploy/engines): their servers accept every field it sends (tested on
# each), so a server detected as one is not probed
KNOWN_ENGINES = ("vllm", "sglang", "llamacpp", "reference")


def assumed(target: Target, api_name: str, engine: str | None = None) -> Capabilities:
    """Not probed: the named kind's known behaviour, else every field accepted (tokenbench's default body)."""
    api_ = "chat" if api_name == "chat" else "completions"
    if target.backend is not None and engine not in KNOWN_ENGINES:
        return KINDS[target.backend].known.model_copy(update={"api": api_})
    return Capabilities(kind=engine if engine in KNOWN_ENGINES else target.backend, api=api_, token_ids=True,
                        ignore_eos=True, min_tokens=True, stream_options=True)


def probed(e: Endpoint, target: Target, api_name: str, engine: str | None = None) -> Endpoint:
    """The endpoint with its capabilities: probed, or assumed (--no-probe, or an engine tokenbench knows)."""
    if target.no_probe or engine in KNOWN_ENGINES:
        if e.models is not None and e.models.entries and e.model not in e.models.ids():
            raise not_served(e.base_url, e.model, e.models)       # their lists name every model they serve
        return dataclasses.replace(e, caps=assumed(target, api_name, engine))
    return dataclasses.replace(e, caps=Probe(e.base_url, e.model, e.api_key, api_name, target.backend).run(e.models))


def method_line(e: Endpoint, target: Target) -> str:
    """How this target's requests keep their lengths, and how prompts travel."""
    return e.caps.method_line(not target.no_min_tokens, not target.no_ignore_eos)


def _skipped(c: Capabilities, target: Target) -> str:
    if not target.no_probe:
        return f"probe skipped: a {c.kind} server (tokenbench reads its facts) accepts every field"
    return f"probe skipped (--no-probe): {'the ' + c.kind + ' kind' if c.kind else 'every field'} assumed"


def probe_lines(e: Endpoint, target: Target) -> list[str]:
    """The console's lines: the model-list note, each field left out, and the method used."""
    c = e.caps
    head = f"probe: {c.requests} requests in {c.seconds:.1f} s" if c.probed else _skipped(c, target)
    note = unlisted_note(e)
    return [*([note] if note else []), *(f"probe: {line}" for line in c.refused), f"{head}; {method_line(e, target)}"]
