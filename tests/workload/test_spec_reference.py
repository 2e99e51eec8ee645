"""Speculative decoding against the reference server's emulation over real loopback HTTP (issue 27):
`tokenbench bench` reads the acceptance of each cell's measured phase from the server's spec_decode
counters (equal to the server's own per-request counts in its send log), text prompts get the
acceptance text gets, a cell of random token ids is marked, and the report shows both next to TPOT."""

from __future__ import annotations

import json

import pytest

from tokenbench.cli.main import main
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.status import judge
from tokenbench.judge.views import load_run
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.report import render
from tokenbench.report.build import build_report
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow

K, WARM, N = 3, 2, 12


def bench(url: str, kind: str, tmp_path) -> dict:
    out = tmp_path / f"{kind}.json"
    assert main(["bench", "--base-url", url, "--dataset-name", kind, "--input-len", "256", "--output-len", "48",
                 "--concurrency", "2", "--num-prompts", str(N), "--num-warmups", str(WARM),
                 "--db", str(tmp_path / "r.db"), "--output", str(out)]) == 0
    return json.loads(out.read_text())


def test_acceptance_per_cell_from_the_counters_and_random_ids_marked(tmp_path):
    log = tmp_path / "send.jsonl"
    cfg = ReferenceConfig(ttft_ms=2, itl_ms=2, spec_tokens=K, spec_accept_text=0.8, spec_accept_random=0.1,
                          send_log=str(log))
    with ReferenceProcess(cfg) as server:
        text, rand = bench(server.url, "text", tmp_path), bench(server.url, "random", tmp_path)
    sent = sorted((json.loads(line) for line in log.read_text().splitlines()), key=lambda r: r["recv_ns"])
    assert len(sent) == 2 * (WARM + N)
    for result, measured in ((text, sent[WARM:WARM + N]), (rand, sent[2 * WARM + N:])):
        s = result["cells"][0]["summary"]
        drafts, accepted = sum(r["spec_drafts"] for r in measured), sum(r["spec_accepted"] for r in measured)
        assert (s["spec_drafts"], s["spec_draft_tokens"], s["spec_accepted_tokens"]) == (drafts, K * drafts, accepted)
        assert s["spec_acceptance_rate"] == accepted / (K * drafts)
        assert s["spec_mean_acceptance_length"] == 1 + accepted / drafts
        assert s["speculative"] == "REFERENCE, 3 draft tokens"
    t, r = text["cells"][0], rand["cells"][0]
    assert t["summary"]["spec_acceptance_rate"] > 0.4 > 0.2 > r["summary"]["spec_acceptance_rate"]
    assert t["status"] == r["status"] == "ok"                         # the status stays: a mark, not a failure
    assert judge(t["status"], "", CellSummary.from_dict(t["summary"])).ok and "spec_random_prompts" not in t["summary"]
    assert judge(r["status"], "", CellSummary.from_dict(r["summary"])).kind == "spec_random"

    store = Store(tmp_path / "r.db")
    run = load_run(store, rand["run_id"])
    [md] = render.write(build_report(run, "en", check_run(run), "TEST"), tmp_path, ["md"])
    report = md.read_text(encoding="utf-8")
    rate, length = r["summary"]["spec_acceptance_rate"], r["summary"]["spec_mean_acceptance_length"]
    assert "| TPOT p99 (ms) | Spec. acceptance (rate, tokens/step) |" in report
    assert f"| {100 * rate:.1f}%, {length:.2f}§ |" in report
    assert "fed random token ids" in report
