"""Workload specs: each kind's required knobs and clear errors, cell keys, the bench flags, sweep specs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tokenbench.cli.main import main
from tokenbench.errors import SpecError
from tokenbench.spec.bench import Load, Workload
from tokenbench.spec.loader import load_model
from tokenbench.spec.study import StudySpec
from tokenbench.study.plan import kv_demand, plan

TARGET = {"base_url": "http://127.0.0.1:1"}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def error(**kw) -> str:
    with pytest.raises(ValidationError) as exc:
        Workload(**kw)
    return exc.value.errors()[0]["msg"]


@pytest.mark.parametrize("kw,msg", [
    ({"input_len": 8}, "random workload needs input_len and output_len"),
    ({"kind": "sharegpt"}, "needs dataset_path"),
    ({"kind": "jsonl", "dataset_path": "p.jsonl", "input_len": 8}, "input_len does not apply to jsonl"),
    ({"kind": "prefix", "input_len": 8, "output_len": 2}, "0 < prefix_len < input_len"),
    ({"kind": "prefix", "input_len": 8, "output_len": 2, "prefix_len": 8}, "0 < prefix_len < input_len"),
    ({"input_len": 8, "output_len": 2, "prefix_len": 4}, "prefix_len applies to prefix workloads only"),
    ({"kind": "image", "input_len": 8, "output_len": 2}, "image workloads use the chat API"),
    ({"input_len": 8, "output_len": 2, "time_scale": 2}, "time_scale applies to trace workloads only"),
    ({"kind": "text", "input_len": 8, "output_len": 2, "trace_block_size": 16},
     "trace_block_size applies to trace workloads"),
    ({"kind": "text", "input_len": 8}, "text workload needs input_len and output_len"),
    ({"kind": "text", "input_len": 8, "output_len": 2, "dataset_path": "x"}, "dataset_path does not apply to text"),
    ({"input_len": 8, "output_len": 2, "dataset_path": "x"}, "dataset_path does not apply to random"),
    ({"input_len": 8, "output_len": 2, "max_input_len": 9}, "draw input lengths uniformly between them: give both"),
    ({"kind": "trace", "dataset_path": "t", "min_output_len": 9, "max_output_len": 3}, "no entry could pass"),
    ({"input_len": 8, "output_len": 2, "image_format": "gif"}, "Input should be 'png' or 'bmp'"),
])
def test_each_kind_says_what_is_missing(kw, msg):
    assert msg in error(**kw)


def test_labels_name_kind_and_knobs_without_brackets():
    assert Workload(input_len=512, output_len=128).label == "512:128"           # unchanged for random
    assert Workload(kind="prefix", input_len=64, output_len=4, prefix_len=48, num_groups=2).label == \
        "prefix(2x48):64:4"
    assert Workload(kind="image", api="chat", input_len=16, output_len=4, image_count=2).label == \
        "image(512x512.png*2):16:4"
    assert Workload(kind="sharegpt", dataset_path="/d/sg.json").label == "sharegpt(sg.json)"
    assert Workload(kind="jsonl", dataset_path="p.jsonl", output_len=8).label == "jsonl(p.jsonl):8"
    assert Workload(kind="trace", dataset_path="t.jsonl", time_scale=0.5).label == "trace(t.jsonl,x0.5)"
    assert Workload(kind="trace", dataset_path="t.jsonl", trace_block_size=16).label == "trace(t.jsonl,x1,b16)"
    assert Workload(kind="text", input_len=512, output_len=128).label == "text:512:128"
    assert Load(arrival="trace", max_concurrency=4).label == "replay,max=4"


def test_trace_loads_and_trace_workloads_go_together():
    assert Load(arrival="trace").num_prompts is None
    with pytest.raises(ValidationError, match="takes its arrivals from the trace"):
        Load(arrival="trace", request_rate=2)
    with pytest.raises(ValidationError, match="a trace replays its own arrival times: drop 'concurrency'"):
        StudySpec(target=TARGET, workload={"kind": "trace", "dataset_path": "t"}, concurrency=[1],
                  requests={"num_prompts": 2})
    with pytest.raises(ValidationError, match="'poisson' or 'constant'"):      # a study's own arrivals: never trace
        StudySpec(target=TARGET, pairs=[(2, 2)], rates=[1.0], arrival="trace")
    traced = plan(StudySpec(target=TARGET, workload={"kind": "trace", "dataset_path": "t"}))
    assert [c.load.arrival for c in traced.cells] == ["trace"]


@pytest.mark.parametrize("args,msg", [
    (["--dataset-name", "sharegpt", "--concurrency", "1"], "needs dataset_path"),
    (["--dataset-name", "prefix", "--input-len", "8", "--output-len", "2", "--concurrency", "1"],
     "0 < prefix_len < input_len"),
    (["--dataset-name", "image", "--api", "completions", "--input-len", "8", "--output-len", "2",
      "--concurrency", "1"], "chat API"),
    (["--dataset-name", "trace", "--dataset-path", str(EXAMPLES / "trace-mini.jsonl"), "--concurrency", "2"],
     "--concurrency and --request-rate do not apply"),
    (["--dataset-name", "jsonl", "--dataset-path", str(EXAMPLES / "prompts.jsonl"), "--input-len", "8", "--concurrency", "1"],
     "input_len does not apply"),
    (["--input-len", "8", "--concurrency", "1"], "--input-len and --output-len are required"),
    (["--dataset-name", "trace", "--dataset-path", str(EXAMPLES / "trace-mini.jsonl"), "--workers", "2"],
     "a trace replay runs in one client process"),
])
def test_bench_flags_fail_before_contacting_the_server(capsys, args, msg):
    code = main(["bench", "--base-url", "http://127.0.0.1:1", "--no-store", *args])
    err = capsys.readouterr().err
    assert code == 2 and msg in err, err


# ---- sweep specs ----

def sweep(**kw) -> StudySpec:
    return load_model(StudySpec, {"target": TARGET, **kw}, "sweep.yaml")


def test_sweep_random_pairs_are_unchanged():
    p = plan(sweep(pairs=[[16, 4], [32, 8]], concurrency=[1, 2]))
    assert [c.key for c in p.cells] == ["16:4/c=1", "16:4/c=2", "32:8/c=1", "32:8/c=2"]
    assert kv_demand(p.cells[1]) == 2 * 20


def test_sweep_accepts_every_kind():
    prefix = plan(sweep(workload={"kind": "prefix", "prefix_len": 8, "num_groups": 2}, pairs=[[16, 4]],
                        concurrency=[2]))
    assert [c.key for c in prefix.cells] == ["prefix(2x8):16:4/c=2"] and prefix.cells[0].workload.prefix_len == 8
    image = plan(sweep(workload={"kind": "image", "image_count": 3}, api="chat", pairs=[[16, 4]], rates=[1.0]))
    assert image.cells[0].workload.image_count == 3 and image.cells[0].key.startswith("image(512x512.png*3)")
    data = plan(sweep(workload={"kind": "sharegpt", "dataset_path": "examples/sharegpt-mini.json",
                                "output_len": 16}, concurrency=[1, 4]))
    assert [c.key for c in data.cells] == ["sharegpt(sharegpt-mini.json):16/c=1", "sharegpt(sharegpt-mini.json):16/c=4"]
    assert kv_demand(data.cells[0]) is None                        # lengths vary: no fixed demand
    replay = plan(sweep(workload={"kind": "trace", "dataset_path": "t.jsonl", "time_scale": 0.5}, max_concurrency=8))
    [cell] = replay.cells
    assert cell.load.arrival == "trace" and cell.load.max_concurrency == 8 and cell.key == "trace(t.jsonl,x0.5)/replay,max=8"


@pytest.mark.parametrize("kw,msg", [
    ({"workload": {"kind": "prefix", "prefix_len": 8}, "concurrency": [1]}, "'pairs' is empty"),
    ({"workload": {"kind": "jsonl", "dataset_path": "p"}, "pairs": [[8, 8]], "concurrency": [1]}, "drop 'pairs'"),
    ({"workload": {"output_len": 8}, "pairs": [[8, 8]], "concurrency": [1]}, "output lengths in 'pairs'"),
    ({"workload": {"kind": "trace", "dataset_path": "t"}, "concurrency": [1]}, "drop 'concurrency'"),
    ({"workload": {"kind": "image"}, "api": "completions", "pairs": [[8, 8]], "concurrency": [1]}, "chat API"),
    ({"workload": {"kind": "prefix", "prefix_len": 8}, "pairs": [[8, 8]], "concurrency": [1]}, "prefix_len < input"),
    ({"workload": {"kind": "sharegpt"}, "concurrency": [1]}, "needs dataset_path"),
])
def test_sweep_workload_errors_are_spec_errors(kw, msg):
    with pytest.raises(SpecError, match=msg):
        sweep(**kw)


def test_sweep_unknown_workload_key_names_it():
    with pytest.raises(SpecError, match="unknown key 'workload.prefx_len'"):
        sweep(workload={"kind": "prefix", "prefx_len": 8}, pairs=[[8, 8]], concurrency=[1])
