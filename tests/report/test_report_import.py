"""Importers on small real-shaped files: vllm bench serve JSON, SGLang bench_serving JSONL, CSV."""

from __future__ import annotations

import json

import pytest

from tokenbench.cli.main import main
from tokenbench.errors import UsageError
from tokenbench.formats.importers import ImportOptions, import_file
from tokenbench.judge.cells import pair_of, value_of
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run
from tokenbench.report import render
from tokenbench.report.build import build_report

from .report_fixtures import FIXTURES


def test_vllm_bench_serve_json(store):
    src = json.loads((FIXTURES / "vllm-bench-serve.json").read_text())
    run_id = import_file(store, FIXTURES / "vllm-bench-serve.json", opts=ImportOptions(hardware="h100"))
    run = load_run(store, run_id)
    assert run.kind == "import" and run.configs[0].engine == "vllm" and run.configs[0].model == "google/gemma-3-270m"
    [cell] = run.cells
    assert (cell.input_len, cell.output_len, cell.concurrency, cell.request_rate) == (128, 4, 4, None)
    for key in ("request_throughput", "output_throughput", "mean_ttft_ms", "p99_tpot_ms", "median_e2el_ms"):
        assert cell.summary.to_dict()[key] == pytest.approx(src[key])
    recs = run.timeline.requests
    assert len(recs) == 8 and recs[0].output_tokens == 4 and len(recs[0].token_times_ns) == 4
    assert recs[0].ttft_ns == pytest.approx(src["ttfts"][0] * 1e9, abs=1)
    page = render.html_page.render(build_report(run, "en", check_run(run), "T"))
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_sglang_bench_serving_jsonl(store):
    run = load_run(store, import_file(store, FIXTURES / "sglang-bench-serving.jsonl"), requests=False)
    assert [c.config for c in run.cells] == ["sglang", "sglang"]
    c1, c8 = run.cells
    assert (pair_of(c1), c1.concurrency, c8.concurrency) == ((512, 128), 1, 8)
    assert c8.summary.to_dict()["mean_e2el_ms"] == pytest.approx(480.0 * 8 ** 0.3)
    assert c8.summary.to_dict()["total_token_throughput"] == pytest.approx(9.5 * 640)
    assert c8.summary.to_dict()["achieved_concurrency"] == pytest.approx(8 * 0.97)


def test_csv_imports_one_config_per_setup(store):
    run = load_run(store, import_file(store, FIXTURES / "study-a-headline.csv"), requests=False)
    assert run.config_names() == ["tp1", "tp2"]
    tp1 = run.config("tp1")
    assert tp1.facts.hardware == "ascend-910b4" and tp1.kv_capacity == 1066112
    over = {(c.config, pair_of(c), c.concurrency) for c in run.cells if c.over_capacity}
    assert over == {("tp1", (16384, 2048), 96)}          # 96 x 18,432 > 1,066,112; TP=2 holds 2,243,968
    head = run.cell_at("tp1", (512, 512), 128)
    assert head.summary.to_dict()["output_throughput"] == 6452.2 and head.summary.to_dict()["total_token_throughput"] == 12904.4


@pytest.mark.parametrize("text, message", [
    ("engine,model,input_len,output_len,concurrency,speed\nx,m,1,1,1,2\n", "unknown column(s) speed"),
    ("engine,model,input_len,concurrency,output_throughput\nx,m,1,1,2\n", "missing column(s) output_len"),
    ("engine,model,input_len,output_len,concurrency,output_throughput\nx,m,1,1,1,fast\n",
     ":2: column output_throughput"),
    ("engine,model,input_len,output_len,concurrency,output_throughput\nx,m,1,1,,5\n", "exactly one of concurrency"),
    ("engine,model,input_len,output_len,concurrency,notes\nx,m,1,1,1,hi\n", ":2: no figure in this row"),
])
def test_csv_errors_name_the_line(store, tmp_path, text, message):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        import_file(store, f)


def test_unknown_file_kind_and_wrong_format(store, tmp_path):
    f = tmp_path / "r.txt"
    f.write_text("{}")
    with pytest.raises(UsageError, match="cannot tell the format"):
        import_file(store, f)
    line = tmp_path / "one.json"
    line.write_text((FIXTURES / "sglang-bench-serving.jsonl").read_text().splitlines()[0])
    with pytest.raises(UsageError, match="not a `vllm bench serve` result: it has SGLang"):
        import_file(store, line, "vllm")
    assert store.run(import_file(store, line)).spec["import"]["format"] == "sglang"    # told from the content
    with pytest.raises(UsageError, match=":1: not JSON"):
        import_file(store, FIXTURES / "vllm-bench-serve.json", "sglang")


def test_import_cli(db_path, capsys):
    assert main(["import", str(FIXTURES / "study-b-published.csv"), "--db", str(db_path)]) == 0
    out = capsys.readouterr()
    run_id = out.out.strip()
    assert run_id and "8 result(s) beyond the decode roofline" in out.err
    assert main(["report", run_id, "--db", str(db_path), "--format", "md"]) == 0
    report = (db_path.parent / "reports" / run_id / "report.md").read_text()
    assert "IMPOSSIBLE" in report and "12,800.0" in report and "28.0x the bound" in report


def test_a_rate_with_a_cap_is_imported_as_that_rate_with_that_cap(store):
    """`vllm bench serve --request-rate 4 --max-concurrency 4` (and SGLang's --request-rate 8
    --max-concurrency 8) stay open-loop rates with their cap, never closed-loop c=C; vLLM's burstiness
    keeps its arrival process (inf: constant gaps)."""
    [rate] = load_run(store, import_file(store, FIXTURES / "vllm-bench-serve-rate.json"), requests=False).cells
    assert (rate.concurrency, rate.request_rate, rate.key) == (None, 4.0, "128:4/rate=4/s")
    assert (rate.summary.max_concurrency, rate.summary.arrival, rate.summary.burstiness) == (4, "poisson", None)
    assert rate.kv_demand == 4 * (128 + 4)                       # the cap is what can be in flight
    [const] = load_run(store, import_file(store, FIXTURES / "vllm-bench-serve-constant.json"), requests=False).cells
    assert (const.request_rate, const.summary.max_concurrency, const.summary.arrival) == (4.0, None, "constant")
    [sg] = load_run(store, import_file(store, FIXTURES / "sglang-bench-serving-rate.jsonl"), requests=False).cells
    assert (sg.concurrency, sg.request_rate, sg.summary.max_concurrency) == (None, 8.0, 8)
    [closed] = load_run(store, import_file(store, FIXTURES / "vllm-bench-serve.json"), requests=False).cells
    assert (closed.concurrency, closed.request_rate) == (4, None)     # request_rate inf with a cap: c=4


def test_burstiness_is_imported_as_the_gamma_shape(store, tmp_path):
    doc = json.loads((FIXTURES / "vllm-bench-serve-rate.json").read_text())
    path = tmp_path / "bursty.json"
    path.write_text(json.dumps({**doc, "burstiness": 0.5, "max_concurrency": None}))
    [cell] = load_run(store, import_file(store, path), requests=False).cells
    assert (cell.key, cell.summary.burstiness, cell.summary.max_concurrency) == ("128:4/rate=4/s,b=0.5", 0.5, None)


def test_an_interval_that_does_not_hold_the_files_own_figure_is_not_shown(store):
    """vLLM's file states its TPOT to the stream's end (20.33 ms); its records give 20.0 ms to the last
    token: no interval is drawn around a figure it does not contain, and every one drawn contains its
    figure."""
    from tokenbench.judge.intervals import Book
    from tokenbench.metrics.cell_summary import Metric
    run = load_run(store, import_file(store, FIXTURES / "vllm-bench-serve.json", opts=ImportOptions()))
    [cell], book = run.cells, Book(run)
    tpot = Metric("tpot")
    assert value_of(cell, tpot) == pytest.approx(20.333, abs=1e-3) and book.interval(cell, tpot) is None
    shown = [(m, iv) for m in (Metric("ttft"), Metric("e2el"), Metric("output_throughput"), Metric("tpot", "p99"))
             if (iv := book.interval(cell, m)) is not None]
    assert shown and all(iv.lo * 0.999 <= value_of(cell, m) <= iv.hi * 1.001 for m, iv in shown)
