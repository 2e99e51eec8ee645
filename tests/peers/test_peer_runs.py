"""Peer command lines run through `tokenbench translate --run` against the reference server (a child
process, real loopback HTTP), with tiny counts: every request asks its own exact lengths (drawn from the
line's distribution) and is verified against the server's usage; SGLang's JSONL result file is written in
SGLang's key order and reads back through `tokenbench import`; GuideLLM's sweep chains its two benches."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tokenbench.cli.main import main
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow

# `sglang.bench_serving --output-file` (SGLang 0.5.23): the keys of one line, in order (without goodput/details)
SGLANG_KEYS = ["tag", "backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len",
               "random_input_len", "random_output_len", "random_range_ratio", "server_info", "duration", "completed",
               "total_input_tokens", "total_input_text_tokens", "total_input_vision_tokens", "total_output_tokens",
               "total_output_tokens_retokenized", "request_throughput", "input_throughput", "output_throughput",
               "total_throughput",
               *[f"{s}_{m}_ms" for m in ("e2e_latency", "ttft", "tpot", "itl")
                 for s in ("mean", "median", "std", "p90", "p95", "p99")],
               "concurrency", "accept_length", "max_output_tokens_per_s", "max_concurrent_requests"]


@pytest.fixture(scope="module")
def ref():
    with ReferenceProcess(ReferenceConfig(ttft_ms=2, itl_ms=2)) as server:
        yield server.url


def run(line: str, db, capsys) -> str:
    code = main(["translate", "--run", "--db", str(db), "--", line])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def measured(db) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT c.key, c.status, r.input_len, r.output_len, r.prompt_tokens, r.completion_tokens, "
                           "r.length_error FROM requests r JOIN cells c ON r.cell_id = c.id WHERE r.phase = 'measure' "
                           "ORDER BY c.id, r.idx").fetchall()
    finally:
        con.close()


def test_vllm_burst_of_exact_lengths(ref, tmp_path, capsys):
    host, port = ref.removeprefix("http://").split(":")
    run(f"vllm bench serve --model reference-model --host {host} --port {port} --random-input-len 32 "
        "--random-output-len 4 --num-prompts 5", tmp_path / "r.db", capsys)
    rows = measured(tmp_path / "r.db")
    assert {(k, s) for k, s, *_ in rows} == {("32:4/c=5", "ok")} and len(rows) == 5
    assert all((i, o, p, c) == (32, 4, 32, 4) and not e for _, _, i, o, p, c, e in rows)


def test_sglang_default_ratio_draws_one_to_l_and_writes_sglangs_jsonl(ref, tmp_path, capsys):
    out = tmp_path / "sglang.jsonl"
    run(f"python3 -m sglang.bench_serving --backend vllm --base-url {ref} --max-concurrency 4 --num-prompts 40 "
        f"--random-input-len 64 --random-output-len 8 --dataset-name random --output-file {out} --output-details",
        tmp_path / "r.db", capsys)
    rows = measured(tmp_path / "r.db")
    assert {(k, s) for k, s, *_ in rows} == {("64:8(sglang-r0)/c=4", "ok")} and len(rows) == 40
    assert all(1 <= i <= 64 and 1 <= o <= 8 and (p, c) == (i, o) and not e for _, _, i, o, p, c, e in rows)
    assert len({i for _, _, i, *_ in rows}) > 10                       # drawn per request, 1..L
    (line,) = out.read_text().splitlines()
    doc = json.loads(line)
    assert list(doc)[:len(SGLANG_KEYS)] == SGLANG_KEYS and doc["completed"] == 40 and doc["backend"] == "vllm"
    assert doc["input_lens"] == [i for _, _, i, *_ in rows] and doc["random_range_ratio"] == 0.0
    assert main(["import", str(out), "--db", str(tmp_path / "i.db")]) == 0
    con = sqlite3.connect(tmp_path / "i.db")
    (summary,) = [json.loads(s) for (s,) in con.execute("SELECT summary_json FROM cells")]
    con.close()
    assert summary["completed"] == 40 and summary["output_throughput"] == pytest.approx(doc["output_throughput"])


def test_aiperf_rate_with_a_cap_is_one_gated_cell_and_stddev_lengths_verify(ref, tmp_path, capsys):
    run(f"aiperf profile --model reference-model --url {ref} --endpoint-type completions --streaming "
        "--concurrency 2 --request-rate 50 --request-count 12 --synthetic-input-tokens-mean 30 "
        "--synthetic-input-tokens-stddev 6 --output-tokens-mean 4", tmp_path / "r.db", capsys)
    rows = measured(tmp_path / "r.db")
    assert {(k, s) for k, s, *_ in rows} == {("30:4(sd6,0)/rate=50/s,gate=2", "ok")} and len(rows) == 12
    assert len({i for _, _, i, *_ in rows}) > 3 and all((p, c) == (i, 4) and not e for _, _, i, _, p, c, e in rows)


def test_aiperf_sequence_distribution_on_the_chat_api(ref, tmp_path, capsys):
    run(f"aiperf profile --model reference-model --url {ref} --endpoint-type chat --streaming --request-count 12 "
        "--concurrency 3 --sequence-distribution '12,4:50;40,8:50'", tmp_path / "r.db", capsys)
    rows = measured(tmp_path / "r.db")
    assert len(rows) == 12 and {s for _, s, *_ in rows} == {"ok"} and not any(e for *_, e in rows)
    assert {(i, o) for _, _, i, o, *_ in rows} == {(12, 4), (40, 8)}     # each request one bucket's lengths


def test_guidellm_sweep_runs_as_two_chained_benches(ref, tmp_path, capsys):
    out = run(f"guidellm benchmark --target {ref} --profile sweep --rate 4 --max-seconds 0.5 "
              "--data prompt_tokens=16,output_tokens=4", tmp_path / "r.db", capsys)
    con = sqlite3.connect(tmp_path / "r.db")
    cells = con.execute("SELECT run_id, concurrency, request_rate, summary_json FROM cells ORDER BY id").fetchall()
    con.close()
    first, second = cells[:2], cells[2:]
    assert [c for _, c, _, _ in first] == [1, 512] and len({r for r, *_ in cells}) == 2
    sync, peak = (json.loads(s)["request_throughput"] for *_, s in first)
    rates = [r for _, _, r, _ in second]
    assert rates == pytest.approx([sync + (peak - sync) / 2, peak], rel=1e-3)   # linspace(sync, peak, 3)[1:]
    commands = [line for line in out.splitlines() if line.startswith("tokenbench bench")]
    assert len(commands) == 3 and "--request-rate" in commands[-1]      # printed: both steps, then the rates
