"""`tokenbench agree`'s capture and variants against the reference server over real HTTP: tokenbench runs
through the recording proxy, once with its default request and once as a stand-in "peer" that sends the
way vllm bench serve and sglang.bench_serving do (text prompts, no min_tokens, final usage only, extra
sampling fields, the first prompt repeated as warmup, a new connection per request, no /metrics scrapes).
The comparison must
find exactly those differences, and the variants they name, all together, must send what the peer sent."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from tokenbench.agreement import agree
from tokenbench.agreement.capture import (
    ClientCapture,
    compare,
    generation,
    metrics_reads,
    monitor_interval,
    monitor_row,
    variants,
)
from tokenbench.agreement.peers import Cell
from tokenbench.agreement.variants import DEFAULT, Variant, combined
from tokenbench.deploy import local, state
from tokenbench.errors import UsageError
from tokenbench.testing.recording_proxy import ProxyThread
from tokenbench.testing.reference_server import ReferenceConfig, start

PEER_LIKE = Variant("stand-in", "stand-in peer", {
    "workload.prompt_as_text": True, "target.no_min_tokens": True, "target.final_usage_only": True,
    "target.extra_body": {"top_p": 1, "repetition_penalty": 1.0}, "warmup_first_prompt": True,
    "target.new_connection_per_request": True, "monitor_interval_s": 0}, warmup_extra=1)


@contextmanager
def reference(**cfg) -> Iterator[str]:
    """The reference server on an event loop of its own (a thread), so tokenbench's own loop can run here."""
    loop = asyncio.new_event_loop()
    ref = loop.run_until_complete(start(ReferenceConfig(**{"ttft_ms": 5.0, "itl_ms": 1.0, **cfg})))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield ref.url
    finally:
        asyncio.run_coroutine_threadsafe(ref.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def captured(cell: Cell, variant: Variant, out: Path) -> ClientCapture:
    """tokenbench's requests for one variant, run in this process through the proxy."""
    with ProxyThread(cell.base_url) as proxy:
        summary = agree.run_tokenbench(replace(cell, base_url=proxy.url), out, variant)
        return ClientCapture(variant.label, generation(proxy.captured), cell.num_prompts, summary,
                             metrics_reads(proxy.captured), monitor_interval(cell, variant))


def body_rows(rows):
    return [r for r in rows if not r.what.startswith("client ")]     # the measured overheads are no request


@pytest.mark.slow
def test_the_differences_name_the_variants_and_together_they_send_what_the_peer_sent(tmp_path):
    with reference() as url:
        cell = Cell(base_url=url, model="reference-model", tokenizer=str(tmp_path), input_len=24, output_len=6,
                    concurrency=1, num_prompts=3, seed=0, kind="capture")
        peer = captured(cell, PEER_LIKE, tmp_path)
        ours = captured(cell, DEFAULT, tmp_path)
        rows = compare(ours, peer, cell)
        found = variants(rows)
        after = compare(captured(cell, combined(found), tmp_path), peer, cell)
    body = peer.body()
    assert isinstance(body["prompt"], str) and "min_tokens" not in body and body["top_p"] == 1
    assert body["stream_options"] == {"include_usage": True}
    assert all(r.usage["prompt_tokens"] == 24 for r in peer.measured_requests)     # text of 24 tokens, exactly
    assert peer.summary["prompt_as_text_special_tokens"] == 0      # the reference server adds no BOS
    assert peer.connections() == len(peer.requests) and ours.connections() == 1
    assert peer.metrics == () and ours.metrics != ()    # monitor_interval_s 0: not one GET /metrics
    assert ours.scrapes == 0        # ~50 ms of requests: the monitor read the counters only around them,
    assert ours.monitor_s == 1.0 and peer.monitor_s == 0        # yet it is on, as in a measured round
    first = peer.measured_requests[0].json()["prompt"]
    assert [r.json()["prompt"] for r in peer.pre if r.json()["max_tokens"] > 1] == [first, first]
    assert sorted(v.name for v in found) == ["connection", "final-usage", "no-min-tokens", "no-monitor", "sampling",
                                             "text", "warmup"]
    by_name = {v.name: v for v in found}
    assert by_name["sampling"].changes == {"target.extra_body": {"top_p": 1, "repetition_penalty": 1.0}}
    assert by_name["warmup"].warmup_extra == 1 and by_name["text"].input_len is None
    assert [r.what for r in body_rows(rows) if r.differs] == ["prompt", "min_tokens", "stream_options", "top_p",
                                                              "repetition_penalty", "before the measured requests",
                                                              "connections", "GET /metrics while measured requests run"]
    assert [r.what for r in body_rows(after) if r.differs] == []


@pytest.mark.slow
def test_a_peer_prompt_of_another_length_is_sent_at_that_length(tmp_path):
    """The text variant takes the peer's prompt length by the server's count (bench_serving's re-tokenized
    random ids are not input_len tokens)."""
    with reference() as url:
        cell = Cell(base_url=url, model="reference-model", tokenizer=str(tmp_path), input_len=24, output_len=4,
                    concurrency=1, num_prompts=2, seed=0, kind="capture")
        shorter = Variant("short", "short", {"workload.prompt_as_text": True}, input_len=19)
        rows = compare(captured(cell, DEFAULT, tmp_path), captured(cell, shorter, tmp_path), cell)
    [text] = [v for v in variants(rows) if v.name == "text"]
    assert text.input_len == 19
    assert [r.theirs for r in rows if r.what == "prompt"] == ["text, 19 tokens by the server"]


def test_the_same_request_shows_no_difference(tmp_path):
    with reference() as url:
        cell = Cell(base_url=url, model="reference-model", tokenizer=str(tmp_path), input_len=16, output_len=4,
                    concurrency=2, num_prompts=4, seed=0, kind="capture")
        rows = compare(captured(cell, DEFAULT, tmp_path), captured(cell, DEFAULT, tmp_path), cell)
    assert [r.what for r in body_rows(rows) if r.differs] == [] and variants(rows) == []


@pytest.mark.parametrize("body", [{"stream": False}, {"model": "x", "top_k": 1}])
def test_extra_body_may_not_change_what_tokenbench_must_send(body):
    from tokenbench.agreement.variants import study_spec
    from tokenbench.errors import UsageError
    cell = Cell(base_url="http://127.0.0.1:9", model="m", tokenizer="/tok", input_len=16, output_len=4, concurrency=1,
                num_prompts=2, seed=0)
    with pytest.raises(Exception, match="extra_body may not set") as err:
        study_spec(cell, Variant("x", "x", {"target.extra_body": body}))
    assert not isinstance(err.value, UsageError)        # a spec error; the CLI names the flag


def stand_in_peer():
    """A peer client run as agree runs one (a command line, a result file): tokenbench's CLI sending PEER_LIKE."""
    import sys

    from tokenbench.agreement.capture import read_summary
    from tokenbench.agreement.peers import Peer
    from tokenbench.agreement.variants import tokenbench_args

    def argv(python: str, cell: Cell, out: Path) -> list[str]:
        return [python, "-m", "tokenbench.cli.main", "bench",
                *tokenbench_args(cell, str(out / f"stand-in-{cell.tag}.json"), PEER_LIKE)]
    return Peer(name="stand-in", label="stand-in peer", argv=argv,
                result=lambda cell, out: out / f"stand-in-{cell.tag}.json", read=read_summary,
                default_python=lambda: Path(sys.executable), hint="")


@pytest.mark.slow
def test_agree_explain_end_to_end(tmp_path, monkeypatch):
    """Capture, variants, rounds and files: every arm runs in every round; agree's own comparison is with
    the peer-like arm; the explanation covers every figure."""
    import json

    from tokenbench.agreement import peers as agree_peers
    monkeypatch.setitem(agree_peers.PEERS, "stand-in", stand_in_peer())
    with reference() as url:
        spec = agree.AgreeSpec(base_url=url, peer="stand-in", tokenizer=str(tmp_path), input_len=16, output_len=4,
                               concurrency=(1,), num_prompts=3, repeat=2, explain=True,
                               variants=("text", "final-usage"))
        result = agree.run(spec, tmp_path / "out", lambda m: None)
    assert sorted(v.name for v in result.bodies.variants) == ["connection", "final-usage", "no-min-tokens",
                                                              "no-monitor", "sampling", "text", "warmup"]
    ran = sorted(p.name for p in (tmp_path / "out").glob("tokenbench-*-c1-r*.json"))
    assert ran == [f"tokenbench-{n}-c1-r{r}.json" for n in ("default", "final-usage", "peer-workload", "text")
                   for r in (1, 2)]
    assert [e.figure for e in result.explained] == ["mean TTFT ms", "mean TPOT ms", "mean ITL ms", "output tok/s",
                                                    "mean E2EL ms"]
    assert [c.variant.name for c in result.explained[0].closed] == ["text", "final-usage", "peer-workload"]
    counts = result.counts[1]
    assert counts["tokenbench"] == counts["stand-in"] == {"completed": 6, "total_input_tokens": 96,
                                                          "total_output_tokens": 24}
    doc = json.loads((tmp_path / "out" / "agreement.json").read_text())
    assert len(doc["explained"]) == 5 and doc["bodies"]["peer_like"]["name"] == "peer-workload"
    md = (tmp_path / "out" / "agreement.md").read_text()
    assert "### What each client sent (captured)" in md and "#### concurrency 1" in md


def test_equal_values_written_differently_are_the_same_field():
    """AISBench writes `temperature: 0`, tokenbench `0.0`: shown as sent, not a difference."""
    from tokenbench.agreement.capture import field_rows
    from tokenbench.testing.recording_proxy import Captured

    def cap(body: dict) -> ClientCapture:
        import json
        return ClientCapture("x", (Captured(seq=1, arrived_ns=0, connection=1, method="POST", path="/v1/completions",
                                            headers=(), body=json.dumps(body).encode()),), 1)
    [temp, top] = field_rows(cap({"temperature": 0.0, "top_p": 1}), cap({"temperature": 0, "top_p": 0.9}))
    assert (temp.ours, temp.theirs, temp.differs, temp.variant) == ("0.0", "0", False, None)
    assert top.differs and top.variant.changes == {"target.extra_body": {"top_p": 0.9}}


def warmup_peer():
    """A stand-in peer whose one difference in what it sends is its warmup: the first measured prompt, as vllm
    bench serve's (and, as vllm bench serve, it reads no /metrics while its requests run)."""
    peer = stand_in_peer()
    only = Variant("stand-in", "stand-in peer", {"warmup_first_prompt": True, "monitor_interval_s": 0})

    def argv(python: str, cell: Cell, out: Path) -> list[str]:
        from tokenbench.agreement.variants import tokenbench_args
        return [python, "-m", "tokenbench.cli.main", "bench",
                *tokenbench_args(cell, str(out / f"stand-in-{cell.tag}.json"), only)]
    return replace(peer, argv=argv)


@pytest.mark.slow
def test_a_cached_warmup_prompt_is_the_cause_explain_names(tmp_path, monkeypatch):
    """A server with a prefix cache and a prefill cost: the peer's warmup sends its first measured prompt, so
    that request finds its prompt cached and the peer's mean TTFT is lower. `--explain` must give the whole
    difference to the warmup variant and leave no remainder; it can only if no run finds another run's
    prompts in the cache (every arm, round and capture has its own seed)."""
    from tokenbench.agreement import peers as agree_peers
    monkeypatch.setitem(agree_peers.PEERS, "stand-in", warmup_peer())
    with reference(prefill_ms_per_token=4.0, prefix_cache_blocks=4096, block_size=16, itl_ms=1.0) as url:
        spec = agree.AgreeSpec(base_url=url, peer="stand-in", tokenizer=str(tmp_path), input_len=65, output_len=4,
                               concurrency=(1,), num_prompts=3, repeat=2, explain=True)
        result = agree.run(spec, tmp_path / "out", lambda m: None)
    assert [v.name for v in result.bodies.variants] == ["warmup", "no-monitor"]
    [ttft] = [e for e in result.explained if e.figure == "mean TTFT ms"]
    # every uncached prompt waits its prefill, 65 x 4 ms (a sleep: never shorter, however busy the machine);
    # the peer's first measured prompt is cached (64 of its 65 tokens), so its mean is above 2/3 of that
    assert ttft.default >= 260 and ttft.peer >= 2 * 260 / 3
    assert ttft.difference.value > 0.2
    warmup, monitor, _ = ttft.closed
    assert warmup.variant.name == "warmup" and 0.7 <= warmup.share <= 1.3
    assert monitor.variant.name == "no-monitor" and abs(monitor.share) <= 0.5      # a sleep-bound server
    assert ttft.accounted


def test_the_tokenizer_is_the_model_directory_of_the_deployment_serving_the_url(tmp_path, monkeypatch):
    """SGLang lists its served name as the model's root; `agree` then takes the model directory that the
    running deployment at that URL was launched with, so `deploy up` + `agree` needs no --tokenizer. A stale
    record (its process gone) is not taken: another server may hold the port now."""
    monkeypatch.setenv(state.STATE_ENV, str(tmp_path / "deployments"))
    model_dir, other = tmp_path / "model", tmp_path / "other"
    model_dir.mkdir()
    other.mkdir()

    def record(pid: int, created: float) -> None:
        state.save(tmp_path / "deployments", state.DeploymentState(
            id="p-1", profile="p", engine="sglang", pid=pid, pgid=pid, create_time=created, host="127.0.0.1",
            port=1, base_url=url + "/", log_path="", started_at="", argv=["python", "--model-path", str(model_dir)]))

    with reference() as url:
        with pytest.raises(UsageError, match="no local tokenizer directory"):
            agree.model_and_tokenizer(url, None, None)
        record(os.getpid(), local.create_time(os.getpid()) - 1.0)      # this pid, but not this process: stale
        with pytest.raises(UsageError, match="no local tokenizer directory"):
            agree.model_and_tokenizer(url, None, None)
        record(os.getpid(), local.create_time(os.getpid()))
        assert agree.model_and_tokenizer(url, None, None) == ("reference-model", str(model_dir))
        assert agree.model_and_tokenizer(url, None, str(other))[1] == str(other)


def test_only_scrapes_among_the_measured_requests_count():
    """vllm bench serve reads /metrics before and after its measured requests (speculative counters); only
    a read while they run is a difference the no-monitor variant removes."""
    from tokenbench.testing.recording_proxy import Captured

    def req(seq: int, method: str, path: str, at: int, end: int | None = None) -> Captured:
        return Captured(seq=seq, arrived_ns=at, connection=1, method=method, path=path, headers=(), body=b"{}",
                        status=200, usage=None, first_chunk_ns=at, last_chunk_ns=end)
    gen = (req(1, "POST", "/v1/completions", 10, 50), req(3, "POST", "/v1/completions", 60, 100))
    around = ClientCapture("peer", gen, 2, metrics=(req(0, "GET", "/metrics", 5), req(9, "GET", "/metrics", 101)))
    among = ClientCapture("tb", gen, 2, metrics=(req(0, "GET", "/metrics", 5), req(2, "GET", "/metrics", 55)))
    assert around.scrapes == 0 and among.scrapes == 1
    assert monitor_row(among, around).variant.changes == {"monitor_interval_s": 0}
    assert monitor_row(around, around).variant is None and not monitor_row(around, around).differs
    # tokenbench's monitor on, but none of its throttled scrapes inside this capture: still the difference
    quiet = replace(around, tool="tb", monitor_s=1.0)
    assert quiet.scrapes == 0 and monitor_row(quiet, around).variant.changes == {"monitor_interval_s": 0}
    assert monitor_row(quiet, around).ours == "monitor every 1 s (none in this capture)"
    assert not monitor_row(replace(quiet, monitor_s=0.0), around).differs


@pytest.mark.slow
def test_every_arm_sends_no_traceparent_to_a_deployment_that_exports_spans(tmp_path, monkeypatch):
    """A server deployed with `deploy up --otlp-listen` makes `bench --base-url` trace its requests; agree's arms
    do not (no peer sends a traceparent: it would be a header only tokenbench sends, and spans the server exports
    for tokenbench's requests alone)."""
    import socket

    from tokenbench.agreement.variants import study_spec
    from tokenbench.deploy import engines, lifecycle, profiles
    from tokenbench.spec.study import StudySpec
    from tokenbench.study.run import measure

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    profile = engines.traced(profiles.load_profile("reference-sglang"), f"127.0.0.1:{port}")
    assert profile is not None
    monkeypatch.setenv("TOKENBENCH_STATE", str(tmp_path / "state"))
    with lifecycle.deployed(profile, state_dir=tmp_path / "state") as dep:
        cell = Cell(base_url=dep.base_url, model="reference-model", tokenizer=str(tmp_path), input_len=16,
                    output_len=4, concurrency=1, num_prompts=2, seed=0)
        bench = StudySpec.model_validate({"target": {"base_url": dep.base_url}, "pairs": [[16, 4]],
                                          "concurrency": [1], "requests": {"num_prompts": 2}})
        traced = measure(bench).results[0].records
        assert traced and all(r.trace_id for r in traced)               # the deployment is found exporting
        for variant in (DEFAULT, combined([PEER_LIKE])):
            arm = measure(study_spec(cell, variant))
            assert arm.cells[0].summary.phases is None and not any(r.trace_id for r in arm.results[0].records)
