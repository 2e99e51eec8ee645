"""`tokenbench agree` without servers: the two command lines ask for the same workload, and the table
compares means over runs with the per-run spread. Facts parsing on a real vLLM CPU /metrics capture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenbench.agreement import agree
from tokenbench.agreement import peers as agree_peers
from tokenbench.agreement import variants as agree_variants
from tokenbench.deploy.engines import vllm
from tokenbench.errors import MeasurementError

FIXTURES = Path(__file__).parent / "fixtures"
CELL = agree_peers.Cell(base_url="http://127.0.0.1:9", model="gemma3-270m", tokenizer="/models/g", input_len=128,
                        output_len=32, concurrency=4, num_prompts=16, seed=7, run=1)


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_both_clients_get_the_same_workload(tmp_path):
    theirs = agree_peers.vllm_argv("/venv/bin/python", CELL, tmp_path)
    ours = agree_variants.tokenbench_args(CELL, str(tmp_path / "tb.json"))
    assert theirs[:5] == ["/venv/bin/python", "-m", "vllm.entrypoints.cli.main", "bench", "serve"]
    same = {"--random-input-len": "--input-len", "--random-output-len": "--output-len",
            "--max-concurrency": "--concurrency", "--num-warmups": "--warmup-requests",
            "--num-prompts": "--num-prompts", "--model": "--model", "--tokenizer": "--tokenizer",
            "--base-url": "--base-url", "--seed": "--seed"}
    for their_flag, our_flag in same.items():
        assert _flag(theirs, their_flag) == _flag(ours, our_flag), their_flag
    assert {"--ignore-eos", "--save-result"} <= set(theirs)        # tokenbench always asks for exact lengths
    assert (_flag(theirs, "--dataset-name"), _flag(theirs, "--random-range-ratio")) == ("random", "0")
    assert (_flag(theirs, "--temperature"), _flag(theirs, "--request-rate")) == ("0", "inf")
    assert _flag(theirs, "--result-filename") == "vllm-c4-r2.json" and "--no-store" in ours


def test_rows_are_means_over_runs_with_per_run_differences():
    ours = [{"mean_ttft_ms": 100.0, "mean_tpot_ms": 50.0, "output_throughput": 20.0},
            {"mean_ttft_ms": 110.0, "mean_tpot_ms": 52.0, "output_throughput": 19.0}]
    theirs = [{"mean_ttft_ms": 100.0, "mean_tpot_ms": 50.0, "output_throughput": 20.0},
              {"mean_ttft_ms": 100.0, "mean_tpot_ms": 52.0, "output_throughput": None}]
    ttft, tpot, itl, thr, e2el = agree.compare(4, ours, theirs)
    assert itl.tokenbench is None and e2el.peer is None              # figures neither side reported
    assert (ttft.tokenbench, ttft.peer, ttft.runs) == (105.0, 100.0, (0.0, 0.1))
    assert (ttft.tokenbench_runs, ttft.peer_runs) == ((100.0, 110.0), (100.0, 100.0))
    assert ttft.rel_diff == pytest.approx(0.05) and tpot.rel_diff == 0.0
    assert thr.peer is None and thr.rel_diff is None                  # a missing value is never a match
    md = agree.markdown(agree_peers.PEERS["vllm"], [ttft, tpot, thr], tolerance=0.02)
    assert "| tokenbench | spread | vllm bench serve | spread |" in md
    assert "| 4 | mean TTFT ms | 105.00 | 9.5% | 100.00 | 0.0% | +5.00% (!) | +0.0% +10.0% |" in md
    assert "| 4 | output tok/s | 19.50 | 5.1% | - |  | - (!) |" in md


def test_spread_is_range_over_mean_and_needs_two_rounds():
    assert agree.spread((9.0, 11.0, 10.0)) == pytest.approx(0.2)
    assert agree.spread((10.0,)) is None and agree.spread(()) is None


def test_kv_capacity_is_what_vllm_says_not_blocks_times_block_size():
    """Gemma 3 mixes sliding-window and full layers: the blocks are shared by the layer groups."""
    series = vllm.cache_config((FIXTURES / "metrics-gemma3-vllm-cpu.txt").read_text())
    assert len(series) == 1
    labels = series[0]
    assert (labels["num_gpu_blocks"], labels["block_size"], labels["kv_cache_size_tokens"]) == ("5461", "128", "110733")
    assert vllm.kv_tokens(series) == 110733
    assert vllm.kv_tokens([{k: v for k, v in labels.items() if k != "kv_cache_size_tokens"}]) == 5461 * 128


def test_the_library_writes_the_agreement_and_judges_it(tmp_path):
    """agreement/agree.py holds the comparison (cli/agree.py only parses, calls and prints): the files and the
    --check verdict come from an Agreement, a missing value counting as a disagreement."""
    ok = agree.Row(concurrency=1, metric="mean TTFT ms", tokenbench=101.0, peer=100.0, runs=(0.01,),
                   tokenbench_runs=(101.0,), peer_runs=(100.0,))
    off = agree.Row(concurrency=4, metric="output tok/s", tokenbench=19.0, peer=None, runs=(), tokenbench_runs=(19.0,),
                    peer_runs=())
    peer = agree_peers.PEERS["sglang"]
    counts = {1: {"tokenbench": {"completed": 16, "total_input_tokens": 2048, "total_output_tokens": 512},
                  "sglang": {"completed": 16, "total_input_tokens": 2050, "total_output_tokens": 512}}}
    assert agree.Agreement(peer=peer, rows=[ok], counts=counts, tolerance=0.02, out=tmp_path).error() is None
    both = agree.Agreement(peer=peer, rows=[ok, off], counts=counts, tolerance=0.02, out=tmp_path)
    with pytest.raises(MeasurementError, match=r"1 of 2 numbers differ from sglang.bench_serving .* output tok/s "
                                               r"at concurrency 4"):
        raise both.error()
    agree.write(both)
    doc = json.loads((tmp_path / "agreement.json").read_text())
    assert doc["peer"] == "sglang" and [r["rel_diff"] for r in doc["rows"]] == [pytest.approx(0.01), None]
    assert doc["counts"]["1"]["sglang"]["total_input_tokens"] == 2050
    assert "| 4 | output tok/s | 19.00 |  | - |  | - (!) |" in (tmp_path / "agreement.md").read_text()


def test_the_command_prints_the_library_table():
    from rich.console import Console

    from tokenbench.cli import agree as command
    row = agree.Row(concurrency=2, metric="mean TPOT ms", tokenbench=1234.5, peer=1200.0, runs=(0.02875, 0.0),
                    tokenbench_runs=(1234.5,), peer_runs=(1200.0,))
    counts = {2: {"tokenbench": {"completed": 8, "total_input_tokens": 1024, "total_output_tokens": 256},
                  "vllm": {"completed": 8, "total_input_tokens": 1024, "total_output_tokens": 256}}}
    result = agree.Agreement(peer=agree_peers.PEERS["vllm"], rows=[row], counts=counts, tolerance=0.02, out=Path("."))
    console = Console(width=200, record=True)
    console.print(command.table(result))
    text = console.export_text()
    assert "1,234" in text and "+2.88%" in text and "outside" in text and "8 / 1024 / 256" in text
