"""Every workload kind end to end against the reference server (a child process, real loopback HTTP):
lengths verified against its usage, images counted by it, trace arrivals on the schedule."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.contention import Waited
from tokenbench.client.parse import parse_exchange
from tokenbench.client.records import RawExchange
from tokenbench.client.request import Prompt, prepare
from tokenbench.spec.study import StudySpec
from tokenbench.study.run import measure
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess
from tokenbench.workload import images, trace_replay
from tokenbench.workload.sharegpt import read_sharegpt

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def ref():
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=20)) as server:
        yield server


ONE_CELL = {"concurrency": [2], "requests": {"num_prompts": 6}, "warmup_requests": 1}


def run_cell(url: str, study: dict, load: dict | None = None):
    """One cell of the study keys in `study` (workload, api, pairs), under `load` (study keys), through
    the study path `bench` takes."""
    spec = StudySpec.model_validate({"target": {"base_url": url}, **study, **(ONE_CELL if load is None else load)})
    [result] = measure(spec).results
    # lengths are checked first: a mismatch is "failed"; "invalid" only says this shared test machine was
    # too busy for the client's own timing checks, which these functional tests do not test
    assert result.status in ("ok", "invalid"), result.message
    for r in result.records:
        assert r.usage_source == "server" and not r.length_error, r
    return result


def words(text: str) -> int:
    return len(text.split())          # the reference tokenizer: one token per whitespace word


def test_sharegpt_completions_take_output_lengths_from_the_replies(ref):
    cell = run_cell(ref.url, {"workload": {"kind": "sharegpt", "dataset_path": str(EXAMPLES / "sharegpt-mini.json")}})
    pairs = {(words(e.prompt), words(e.completion)) for e in read_sharegpt(EXAMPLES / "sharegpt-mini.json")}
    for r in cell.records:
        assert r.prompt_tokens == r.input_len and r.completion_tokens == r.output_len
        assert (r.input_len, r.output_len) in pairs
    s = cell.summary.to_dict()
    assert s["workload"] == "sharegpt" and s["dataset_entries"] == 12 and s["dataset_reused"] == 0
    assert s["input_len"] == round(s["input_len_mean"]) and cell.input_len == s["input_len"]


def test_sharegpt_chat_with_forced_output_states_the_template_overhead(ref):
    cell = run_cell(ref.url, {"workload": {"kind": "sharegpt", "dataset_path": str(EXAMPLES / "sharegpt-mini.json"),
                                           "output_len": 5, "max_input_len": 12}, "api": "chat"})
    assert cell.summary.to_dict()["chat_template_overhead_tokens"] == 2          # `<|user|>` and `<|assistant|>`
    for r in cell.records:
        assert r.prompt_tokens == r.input_len + 2 and r.input_len <= 12 and r.completion_tokens == 5


def test_jsonl_output_lengths_from_the_file(ref):
    cell = run_cell(ref.url, {"workload": {"kind": "jsonl", "dataset_path": str(EXAMPLES / "prompts.jsonl"),
                                           "max_output_len": 24}})
    assert {r.output_len for r in cell.records} <= {24, 16, 12, 20, 8}
    assert all(r.completion_tokens == r.output_len for r in cell.records)


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_prefix_prompts_are_exact(ref, api):
    cell = run_cell(ref.url, {"workload": {"kind": "prefix", "prefix_len": 16, "num_groups": 2}, "api": api,
                              "pairs": [[24, 3]]})
    overhead = 2 if api == "chat" else 0
    assert all(r.prompt_tokens == 24 + overhead for r in cell.records)
    assert cell.summary.to_dict()["prefix_share"] == pytest.approx(16 / 24)
    assert "cache_hit_rate" not in cell.summary.to_dict()                       # the reference server reports none


def test_synthetic_images_are_counted_by_the_server(ref):
    cell = run_cell(ref.url, {"workload": {"kind": "image", "image_count": 2, "image_width": 64, "image_height": 48},
                              "api": "chat", "pairs": [[8, 3]]})
    s = cell.summary.to_dict()
    assert s["image_tokens_per_image"] == 1 and s["chat_template_overhead_tokens"] == 2
    assert s["total_images"] == s["server_counted_images"] == 12
    for r in cell.records:
        assert (r.images, r.image_count) == (2, 2) and r.prompt_tokens == 8 + 2 + 2
        assert r.image_bytes > 2 * 64 * 48 // 100
    assert s["total_image_bytes"] == sum(r.image_bytes for r in cell.records)


def test_local_image_files_are_probed_and_counted(ref, tmp_path):
    for i, size in enumerate([(32, 32), (80, 20)]):
        (tmp_path / f"page{i}.png").write_bytes(images.synthetic(random.Random(i), *size, "png").data)
    cell = run_cell(ref.url, {"workload": {"kind": "image", "dataset_path": str(tmp_path)}, "api": "chat",
                              "pairs": [[6, 2]]})
    sizes = {(tmp_path / f"page{i}.png").stat().st_size for i in range(2)}
    assert {r.image_bytes for r in cell.records} == sizes
    assert all(r.image_count == 1 and r.prompt_tokens == 6 + 2 + 1 for r in cell.records)


def test_an_image_count_the_server_disagrees_with_is_a_length_error():
    req = prepare("http://h:1/", "chat", "m", Prompt(token_ids=None, text="a", input_len=1, output_len=1,
                                                     expected_prompt_tokens=5, images=("data:,", "data:,")), None)
    chunk = (b'data: {"choices":[{"index":0,"delta":{"content":" w5"},"token_ids":[5],"finish_reason":"length"}],'
             b'"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{"image_count":1}}}\n\n'
             b'data: [DONE]\n\n')
    rec = parse_exchange(RawExchange(intended_ns=0, sent_ns=1, end_ns=9, status=200, chunks=[(5, chunk)]),
                         req, 0, "measure")
    assert rec.image_count == 1 and rec.images == 2 and "server counted 1 images, 2 sent" in rec.length_error


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_text_prompts_are_corpus_text_of_exact_length(ref, api):
    cell = run_cell(ref.url, {"workload": {"kind": "text"}, "api": api, "pairs": [[97, 3]]})
    facts = cell.summary.facts
    overhead = facts.chat_template_overhead_tokens or 0
    assert all(r.prompt_tokens == 97 + overhead for r in cell.records)          # verified by the server
    assert facts.workload == "text" and facts.text_corpus_tokens > 60_000
    assert cell.key == "text:97:3/c=2"


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_text_prompts_take_each_requests_drawn_length(ref, api):
    """text is a fixed-length kind like random: a length distribution cuts each request's corpus window to
    its own drawn length, which the server then counts exactly."""
    cell = run_cell(ref.url, {"workload": {"kind": "text", "range_ratio": 0.5}, "api": api, "pairs": [[40, 6]]},
                    {**ONE_CELL, "requests": {"num_prompts": 12}})
    facts = cell.summary.facts
    overhead = facts.chat_template_overhead_tokens or 0
    assert all(r.prompt_tokens == r.input_len + overhead and 20 <= r.input_len <= 60 for r in cell.records)
    assert all(r.completion_tokens == r.output_len and 3 <= r.output_len <= 9 for r in cell.records)
    assert len({r.input_len for r in cell.records}) > 3                    # drawn per request
    assert facts.workload == "text" and facts.length_draws == "r0.5"
    assert facts.length_distribution == "vLLM range ratio 0.5: input uniform 20..60, output uniform 3..9"
    assert facts.input_len_mean == sum(r.input_len for r in cell.records) / 12
    assert cell.key == "text:40:6(r0.5)/c=2"


def test_a_text_histogram_draws_its_buckets(ref):
    cell = run_cell(ref.url, {"workload": {"kind": "text", "length_histogram": "10,2:1;30,4:1"}},
                    {**ONE_CELL, "requests": {"num_prompts": 12}})
    assert {(r.prompt_tokens, r.completion_tokens) for r in cell.records} <= {(10, 2), (30, 4)}
    assert cell.key.startswith("text:hist=") and cell.summary.facts.length_distribution.startswith("histogram: ")


def test_trace_replay_keeps_the_scaled_schedule(ref):
    path = str(EXAMPLES / "trace-mini.jsonl")
    cell = run_cell(ref.url, {"workload": {"kind": "trace", "dataset_path": path, "time_scale": 0.25, "output_len": 4,
                                           "trace_block_size": 16}},
                    {"warmup_requests": 1})
    expected = trace_replay.offsets_ns(trace_replay.read_trace(path), 0.25)
    t0 = min(r.intended_ns for r in cell.records)
    assert [r.intended_ns - t0 for r in cell.records] == expected      # absolute times, exactly the trace
    assert all(r.sent_ns >= r.intended_ns for r in cell.records)       # never early
    assert cell.summary.to_dict()["arrival"] == "trace" and cell.summary.to_dict()["trace_rows"] == 40
    assert [r.input_len for r in cell.records] == [r.input_len for r in trace_replay.read_trace(path)]


@pytest.mark.engine
def test_trace_send_lateness_p99_is_within_20_ms(tmp_path):
    """The documented tolerance: over a bursty 400-request trace replayed in 4 s (with the server pinned
    to another core where there is one), sends leave at most 20 ms (p99) after their trace time, plus
    what the client waited for a CPU meanwhile (tests/contention.py)."""
    rng = random.Random(11)
    t, lines = 0.0, []
    for _ in range(400):
        lines.append(f'{{"timestamp": {t:.3f}, "input_length": {rng.randint(8, 64)}, "output_length": 4}}\n')
        last = t
        t += 0 if rng.random() < 0.3 else rng.expovariate(1 / 14)
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(lines))
    cpus = sorted(os.sched_getaffinity(0))
    with ReferenceProcess(ReferenceConfig(ttft_ms=20, itl_ms=10), cpu=cpus[-1] if len(cpus) > 1 else None) as server:
        with Waited() as waited:
            cell = run_cell(server.url, {"workload": {"kind": "trace", "dataset_path": str(path),
                                                      "time_scale": 4000 / float(f"{last:.3f}")}},
                            {"warmup_requests": 2})
    assert cell.status == "ok", cell.message
    assert len(cell.records) == 400
    assert cell.summary.p99_queue_ms <= 20 + waited.ms, (cell.summary.p99_queue_ms, waited.ms)
    assert cell.summary.to_dict()["trace_span_s"] == pytest.approx(4.0, rel=1e-6)
