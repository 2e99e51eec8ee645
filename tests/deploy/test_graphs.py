"""Captured graph sizes: derived from a profile's flags by each engine's rule (deploy/engines), read from a
server's own answers (SGLang /server_info in both shapes, vLLM's dev-mode /server_info, the reference
server), and marked `^` in a sweep's dry-run plan, where a cell's streams exceed them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.deploy.engines import graph_capture, graphs, sglang, vllm, with_graphs
from tokenbench.deploy.profiles import load_profile
from tokenbench.spec.server_facts import GraphCapture, ServerFacts

CAPTURES = Path(__file__).parent.parent / "fixtures" / "graphs"


def test_study_a_captures_up_to_128_with_sglangs_list():
    g = graph_capture(load_profile("study-a-minicpm5-sglang-flagos-910b4"))
    assert g is not None and g.max_size == 128 and g.sizes[:6] == (1, 2, 4, 8, 12, 16) and 120 in g.sizes
    assert g.eager(129) and not g.eager(128) and g.padded(100) == 104 and g.padded(129) is None
    assert "--cuda-graph-max-bs 128" in g.source and "0.5.20" in g.note        # newer SGLang refuses the flag


@pytest.mark.parametrize("sets,max_size,first", [
    (["args.cuda-graph-max-bs=null", "args.cuda-graph-max-bs-decode=600"], 600, (1, 2, 4)),
    (["args.cuda-graph-max-bs=null", "args.cuda-graph-bs=1 2 4 32"], 32, (1, 2, 4, 32)),
    (["args.disable-cuda-graph=true"], 0, ()),
    (["args.cuda-graph-max-bs=null", "args.cuda-graph-backend-decode=disabled"], 0, ()),
    (["args.disable-cuda-graph-padding=true"], 128, (1, 2, 3)),
    (["args.cuda-graph-max-bs=null"], None, ()),                                    # SGLang picks it at launch
])
def test_sglang_rule(sets, max_size, first):
    g = graph_capture(load_profile("study-a-minicpm5-sglang-flagos-910b4", sets))
    assert g is not None and g.max_size == max_size and g.sizes[:len(first)] == first
    if max_size == 600:
        assert g.sizes[-3:] == (544, 576, 600) and g.note == ""


@pytest.mark.parametrize("sets,max_size,has", [
    (["args.max-num-seqs=64"], 64, 64),                        # vLLM-Ascend: min(max_num_seqs, 512), no x 2
    (["accelerator=nvidia", "args.max-num-seqs=64"], 128, 120),   # vLLM: min(2 x max_num_seqs, 512)
    (["args.max-num-seqs=512", "args.max-num-batched-tokens=300"], 300, 300),    # capped by the batched tokens
    (["args.enforce-eager=true"], 0, None),
    (["args.compilation-config='{\"cudagraph_capture_sizes\": [1, 2, 4, 8]}'"], 8, 8),
    (["args.max-cudagraph-capture-size=40"], 40, 40),
    (["args.compilation-config='{\"cudagraph_mode\": \"NONE\"}'"], 0, None),
    ([], None, None),                                          # max_num_seqs chosen at launch
])
def test_vllm_rule(sets, max_size, has):
    g = graph_capture(load_profile("study-b-vllm-ascend-910b", sets))
    assert g is not None and g.max_size == max_size
    assert has is None or has in g.sizes


def test_llamacpp_has_no_rule_and_the_server_wins_over_the_profile():
    assert graph_capture(load_profile("cpu-smollm2-llamacpp")) is None
    told = ServerFacts(engine="sglang")
    told.with_graphs(GraphCapture((1, 2, 4), 4, "/server_info"))
    assert with_graphs(told, load_profile("study-a-minicpm5-sglang-flagos-910b4")).graphs.max_size == 4
    silent = with_graphs(ServerFacts(engine="sglang"), load_profile("study-a-minicpm5-sglang-flagos-910b4"))
    assert silent.graphs is not None and silent.graphs.max_size == 128 and "graphs" in silent.to_dict()
    assert ServerFacts.from_dict(silent.to_dict()).graphs == silent.graphs


def test_server_info_in_each_shape():
    new = {"cuda_graph_config": {"decode": {"backend": "full", "max_bs": 32, "bs": [1, 2, 4, 8, 16, 32]}}}
    assert graphs.from_server_info(new, "/server_info").sizes == (1, 2, 4, 8, 16, 32)
    off = {"cuda_graph_config": {"decode": {"backend": "disabled", "max_bs": 32, "bs": [1, 2]}}}
    assert graphs.from_server_info(off, "/server_info").max_size == 0
    old = {"cuda_graph_bs": [1, 2, 4, 8], "cuda_graph_max_bs": 8, "disable_cuda_graph": False}
    assert graphs.from_server_info(old, "/get_server_info").max_size == 8
    assert graphs.from_server_info({"cuda_graph_max_bs": 160}, "/x") == GraphCapture((), 160, "/x cuda_graph_max_bs")
    assert graphs.from_server_info({}, "/x") is None


def test_the_captured_sglang_and_vllm_answers():
    """SGLang 0.5.23 on the CPU: graphs off (backend disabled); vLLM 0.32.0's compilation config with
    --enforce-eager: no sizes, mode 0 (answers recorded from the real servers)."""
    sgl = json.loads((CAPTURES / "sglang-0.5.23-server-info.json").read_text())
    assert graphs.from_server_info(sgl, "/server_info") == GraphCapture(
        (), 0, "/server_info cuda_graph_config.decode.backend=disabled")
    info = json.loads((CAPTURES / "vllm-0.32.0-server-info.json").read_text())
    assert vllm.server_info_graphs(info) == GraphCapture((), 0, "/server_info compilation_config cudagraph_mode NONE")
    listed = {"vllm_config": {"compilation_config": {"cudagraph_mode": 2, "cudagraph_capture_sizes": [4, 1, 2]}}}
    assert vllm.server_info_graphs(listed) == GraphCapture((1, 2, 4), 4, "/server_info compilation_config")
    assert vllm.server_info_graphs({"detail": "Not Found"}) is None
    assert vllm.default_sizes(256)[-3:] == [240, 248, 256] and sglang.default_sizes(8) == [1, 2, 4, 8]


def test_the_dry_run_marks_the_256_stream_cell_of_study_a(capsys):
    assert main(["sweep", "--set", "target.profile=study-a-minicpm5-sglang-flagos-910b4", "--pairs", "512:512",
                 "--concurrency", "64,128,256", "--dry-run"]) == 0
    out = capsys.readouterr().out
    marked = [line for line in out.splitlines() if "512:512/c=" in line and line.rstrip(" │").endswith("^")]
    assert len(marked) == 1 and "c=256" in marked[0]
    assert "decode batches up to 128 run as captured graphs" in out
