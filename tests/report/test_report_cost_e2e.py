"""`--price-per-hour 2.5` on a real run: the reference server exports each request's span with the prefill and
decode times it imposes, `bench` joins them, and the report's cost satisfies $/M = $/h / (tok/s x 3600) x
10^6 and splits the cost by the measured prefill and decode time (not by token share). Slow tier (real
processes and sockets)."""

from __future__ import annotations

import json
import socket

import pytest

from tokenbench.cli.main import main
from tokenbench.judge.cells import label_of
from tokenbench.judge.cost import Price, cell_cost
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run
from tokenbench.report import markdown
from tokenbench.report.build import build_report
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow
TTFT_MS, ITL_MS, PER_TOKEN_MS, IN, OUT = 30.0, 4.0, 0.02, 128, 16


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_price_per_hour_gives_the_identity_and_a_split_by_measured_prefill_and_decode(tmp_path):
    port = free_port()
    cfg = ReferenceConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS, prefill_ms_per_token=PER_TOKEN_MS,
                          otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces")
    db, out = tmp_path / "results.db", tmp_path / "run.json"
    with ReferenceProcess(cfg) as ref:
        assert main(["bench", "--base-url", ref.url, "--otlp-listen", f"127.0.0.1:{port}", "--input-len", str(IN),
                     "--output-len", str(OUT), "--concurrency", "2", "--num-prompts", "12", "--price-per-hour", "2.5",
                     "--db", str(db), "--output", str(out)]) == 0
    store = Store(db)
    run = load_run(store, json.loads(out.read_text())["run_id"])
    (cell,) = run.cells
    s = cell.summary
    cost = cell_cost(cell, Price(2.5), 1)
    assert cost.per_m_output == pytest.approx(2.5 / (s.output_throughput * 3600) * 1e6, rel=1e-12)
    # the server's own prefill (TTFT_MS + IN x PER_TOKEN_MS) and decode ((OUT - 1) x ITL_MS) per request
    prefill, decode = TTFT_MS + IN * PER_TOKEN_MS, (OUT - 1) * ITL_MS
    assert cost.split_by == "spans" and cost.input_share == pytest.approx(prefill / (prefill + decode), abs=0.01)
    charged = (cost.per_m_input_split * s.total_input_tokens + cost.per_m_output_split * s.total_output_tokens) / 1e6
    assert charged == pytest.approx(2.5 * s.duration / 3600, rel=1e-9)
    page = markdown.render(build_report(run, "en", check_run(run), "TEST"))
    row = next(ln for ln in page[page.index("Cost per million tokens"):].splitlines()
               if ln.startswith(f"| {label_of(cell)} |"))
    assert f"prefill / decode time, the server's spans ({100 * cost.input_share:.1f}% to input)" in row
    assert "proportional by construction" not in page           # a measured split is not said to be one
    assert f"{cost.per_m_output:,.4f}" in row or f"{cost.per_m_output:,.2f}" in row
