"""The capability probe against a strict server over real HTTP (a small server written here, on a free
loopback port): whatever set of fields it refuses, whether or not its refusal names them, the probe leaves
out exactly those and keeps every field it accepts; a stream ended by a finish_reason without `[DONE]` is
complete; the probe stops with one line (the fix included) only where its answers say every cell would fail:
the API asked is not served and the other is, or neither serves a model the list does not name."""

from __future__ import annotations

import itertools
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tokenbench.errors import UsageError
from tokenbench.load import probe
from tokenbench.load.probe import DROP_ORDER, Probe, probed
from tokenbench.load.target import Endpoint, ModelList
from tokenbench.spec.study import StudySpec
from tokenbench.workload.vocab import Vocab

PARTS = ("ignore_eos", "min_tokens", "stream_options", "prompt")


def _present(body: dict) -> set[str]:
    got = {f for f in PARTS[:3] if f in body}
    return got | ({"prompt"} if isinstance(body.get("prompt"), list) else set())


def _stream(done: bool) -> bytes:
    events = [{"choices": [{"index": 0, "text": f" w{i}"}]} for i in range(3)]
    events.append({"choices": [{"index": 0, "text": " w3", "finish_reason": "length"}],
                   "usage": {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8}})
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + (b"data: [DONE]\n\n" if done else b"")


@contextmanager
def strict(refuses: set[str], named: bool, apis: tuple[str, ...] = ("completions", "chat"), done: bool = True
           ) -> Iterator[str]:
    """A server that answers 400 to a generation request carrying any part in `refuses` (naming them, or
    saying only "bad request"), serves `apis`, and ends its streams with or without `[DONE]`."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send(404, b'{"detail":"Not Found"}')

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            api = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}.get(self.path)
            if api not in apis:
                return self._send(404, b'{"detail":"Not Found"}')
            bad = _present(body) & refuses
            if bad:
                said = f"Unexpected fields: {sorted(bad)}" if named else "bad request"
                return self._send(400, json.dumps({"error": {"message": said}}).encode())
            if body.get("stream"):
                return self._send(200, _stream(done), "text/event-stream")
            return self._send(200, json.dumps({"choices": [{"index": 0, "text": "x"}]}).encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


REFUSALS = [set(c) for n in range(len(PARTS) + 1) for c in itertools.combinations(PARTS, n)]


@pytest.mark.parametrize("named", [True, False], ids=["named", "unnamed"])
@pytest.mark.parametrize("refuses", REFUSALS, ids=["+".join(sorted(r)) or "none" for r in REFUSALS])
def test_the_probe_leaves_out_exactly_what_the_server_refuses(refuses, named):
    with strict(refuses, named) as url:
        caps = Probe(url, "m", None, "completions").run()
    left_out = {"stream_options" if f == "continuous_usage_stats" else f for f in caps.dropped}
    assert left_out == refuses, caps.refused
    assert caps.ignore_eos == ("ignore_eos" not in refuses) and caps.min_tokens == ("min_tokens" not in refuses)
    assert caps.token_ids == ("prompt" not in refuses) and caps.stream_options == ("stream_options" not in refuses)
    assert bool(caps.refused) == bool(refuses) and all(" refused (HTTP 400: " in line for line in caps.refused)
    assert caps.requests <= 2 * len(DROP_ORDER) + 5         # 1 + each part alone + all + each back + 3 others


def test_a_stream_ended_by_its_finish_reason_without_done_is_complete():
    with strict(set(), True, done=False) as url:
        caps = Probe(url, "m", None, "completions").run()
    assert caps.done_marker is False and caps.stream_usage and caps.exact


def spec(**target) -> StudySpec:
    return StudySpec.model_validate({"target": {"base_url": "http://h:1", **target}, "pairs": [[8, 4]],
                                     "concurrency": [1]})


def endpoint(url: str, model: str = "m", listed: tuple[str, ...] = ()) -> Endpoint:
    models = ModelList(200, [{"id": m} for m in listed], "{}")
    return Endpoint(base_url=url, model=model, api_key=None, vocab=Vocab.with_margins(32000, "test"),
                    max_model_len=None, models=models)


@pytest.mark.parametrize("api,other", [("completions", "chat"), ("chat", "completions")])
def test_an_api_the_server_does_not_serve_stops_with_the_one_it_does(api, other):
    with strict(set(), True, apis=(other,)) as url, pytest.raises(UsageError) as err:
        probed(endpoint(url), spec().target, api)
    assert f"does not serve the {api} API, it serves {other}" in err.value.message
    assert err.value.hint == f"pass --api {other}"


def test_a_model_neither_api_serves_and_the_list_does_not_name_stops_with_the_names():
    with strict(set(), True, apis=()) as url, pytest.raises(UsageError) as err:
        probed(endpoint(url, "typo", ("real-model",)), spec().target, "completions")
    assert "model 'typo' is not served" in err.value.message and "HTTP 404" in err.value.message
    assert err.value.hint == "use one of: real-model"


def test_an_unlisted_model_a_server_answers_for_is_measured():
    with strict(set(), True) as url:
        e = probed(endpoint(url, "served-anyway", ("other",)), spec().target, "completions")
    assert e.caps.exact and e.caps.endpoints["completions"]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "llamacpp", "reference"])
def test_an_engine_whose_list_names_every_model_it_serves_refuses_an_unlisted_one(engine):
    with pytest.raises(UsageError) as err:
        probed(endpoint("http://127.0.0.1:9", "typo", ("served",)), spec().target, "completions", engine)
    assert err.value.hint == "use one of: served"


def test_a_server_that_never_answers_costs_the_probe_two_requests_not_one_per_question(monkeypatch):
    monkeypatch.setattr(probe, "PROBE_TIMEOUT_S", 0.3)
    with socket.socket() as silent:                    # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        caps = Probe(f"http://127.0.0.1:{silent.getsockname()[1]}", "m", None, "completions").run()
    assert caps.requests == 2 and caps.exact                       # nothing left out: the cells record what comes
    assert "no answer" in caps.refused[-1]
