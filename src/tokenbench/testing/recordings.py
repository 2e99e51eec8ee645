"""Recordings of real OpenAI-compatible servers, replayed by the reference server (testing/replay.py): what
each named server kind (spec/server_kinds.py) answers to the requests tokenbench sends, headers and SSE
bytes as they came. A recording is captured from a running server:

    python -m tokenbench.testing.recordings --base-url URL --model M --kind KIND --source TEXT > FILE.json

or written by hand from a server's documentation (its `source` says which). Its `expect` is the documented
result of `bench` replaying it (tests/testing/test_recordings.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

KEPT_HEADERS = ("content-type", "server", "cache-control", "x-accel-buffering", "x-litellm-model-id")
CAPTURE_OUT = 16                # output tokens of the captured streams
CAPTURE_IDS = list(range(1000, 1032))
CAPTURE_TEXT = "Tell me a long story about a lighthouse keeper and the sea."
FIELDS = ("ignore_eos", "min_tokens", "stream_options")


@dataclass
class Answer:
    """One recorded answer: status, the headers kept (KEPT_HEADERS), the body (a stream: its SSE events,
    each with its own blank-line framing, in `events`)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    events: list[str] = field(default_factory=list)


@dataclass
class Refusal:
    """A request carrying any of `fields` ("prompt": token ids) was refused with this answer."""

    fields: list[str]
    answer: Answer


@dataclass(kw_only=True)
class Recording:
    kind: str
    source: str                               # "captured from ..." or "built from the documentation: ..."
    model: str
    models: Answer                            # GET /v1/models
    tokenize: Answer                          # POST /tokenize
    refusals: list[Refusal] = field(default_factory=list)
    streams: dict[str, Answer] = field(default_factory=dict)     # api -> the streamed answer (CAPTURE_OUT tokens)
    whole: dict[str, Answer] = field(default_factory=dict)       # api -> a 1-token answer without streaming
    expect: dict[str, Any] = field(default_factory=dict)         # the documented result of replaying it

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def load(cls, path: str | Path) -> Recording:
        d = json.loads(Path(path).read_text())
        answer = lambda a: Answer(**a)        # noqa: E731
        return cls(kind=d["kind"], source=d["source"], model=d["model"], models=answer(d["models"]),
                   tokenize=answer(d["tokenize"]),
                   refusals=[Refusal(r["fields"], answer(r["answer"])) for r in d.get("refusals", [])],
                   streams={k: answer(v) for k, v in d.get("streams", {}).items()},
                   whole={k: answer(v) for k, v in d.get("whole", {}).items()}, expect=d.get("expect", {}))

    def refusal(self, body: dict) -> Answer | None:
        """The answer to a generation request carrying a field this server refuses, else None."""
        present = {f for f in FIELDS if f in body}
        if isinstance(body.get("prompt"), list):
            present.add("prompt")
        return next((r.answer for r in self.refusals if present & set(r.fields)), None)


# ---- capture ----

def _exchange(base_url: str, path: str, body: dict | None, key: str | None) -> Answer:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base_url.rstrip("/") + path, data=data, method="POST" if data else "GET")
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return _answer(resp.status, resp.headers, resp.read())
    except urllib.error.HTTPError as exc:
        return _answer(exc.code, exc.headers, exc.read())


def _answer(status: int, headers, raw: bytes) -> Answer:
    kept = {k.lower(): v for k, v in headers.items() if k.lower() in KEPT_HEADERS}
    text = raw.decode("utf-8", "replace")
    if "text/event-stream" not in kept.get("content-type", ""):
        return Answer(status, kept, text)
    events = [e + "\n\n" for e in text.replace("\r\n", "\n").split("\n\n") if e.strip()]
    return Answer(status, kept, "", events)


def _stream_body(api: str, model: str, parts: set[str], token_ids: bool) -> dict:
    body: dict[str, Any] = {"model": model, "max_tokens": CAPTURE_OUT, "temperature": 0, "stream": True}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": CAPTURE_TEXT}]
    else:
        body["prompt"] = CAPTURE_IDS if token_ids else CAPTURE_TEXT
    body.update({"ignore_eos": True} if "ignore_eos" in parts else {})
    body.update({"min_tokens": CAPTURE_OUT} if "min_tokens" in parts else {})
    body.update({"stream_options": {"include_usage": True, "continuous_usage_stats": True}}
                if "stream_options" in parts else {})
    return body


def _named(text: str, parts: set[str], token_ids: bool) -> list[str]:
    """The fields a refusal names (else the next to leave out, as the probe does)."""
    named = [f for f in FIELDS if f in parts and f in text]
    if not named and token_ids and "prompt" in text.lower():
        named = ["prompt"]
    order = [f for f in ("min_tokens", "ignore_eos", "stream_options") if f in parts] + (["prompt"] if token_ids else [])
    return named or order[:1]


def capture_stream(rec: Recording, base_url: str, api: str, key: str | None) -> None:
    """The API's stream as tokenbench's body asks it, leaving out (and recording) each refused field."""
    parts, token_ids = set(FIELDS), api != "chat"
    path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
    for _ in range(len(FIELDS) + 2):
        got = _exchange(base_url, path, _stream_body(api, rec.model, parts, token_ids), key)
        if got.status == 200 or not 400 <= got.status < 500:
            rec.streams[api] = got
            return
        named = _named(got.body, parts, token_ids)
        if not named:
            rec.streams[api] = got
            return
        if all(r.fields != named for r in rec.refusals):
            rec.refusals.append(Refusal(named, got))
        parts -= set(named)
        token_ids = token_ids and "prompt" not in named


def capture(base_url: str, model: str, kind: str, source: str, key: str | None = None,
            apis: tuple[str, ...] = ("completions", "chat")) -> Recording:
    rec = Recording(kind=kind, source=source, model=model, models=_exchange(base_url, "/v1/models", None, key),
                    tokenize=_exchange(base_url, "/tokenize", {"model": model, "prompt": CAPTURE_TEXT}, key))
    for api in apis:
        capture_stream(rec, base_url, api, key)
        one = {"model": model, "max_tokens": 1, "temperature": 0}
        one.update({"messages": [{"role": "user", "content": CAPTURE_TEXT}]} if api == "chat"
                   else {"prompt": CAPTURE_TEXT})
        rec.whole[api] = _exchange(base_url, "/v1/chat/completions" if api == "chat" else "/v1/completions", one, key)
    return rec


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tokenbench.testing.recordings")
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--kind", required=True)
    p.add_argument("--source", required=True, help="what was captured: server, version, how it was started")
    p.add_argument("--api", action="append", choices=("completions", "chat"))
    p.add_argument("--api-key-env", help="environment variable holding the server's API key")
    args = p.parse_args(argv)
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    rec = capture(args.base_url, args.model, args.kind, args.source, key, tuple(args.api or ("completions", "chat")))
    sys.stdout.write(rec.to_json())


if __name__ == "__main__":
    main()
