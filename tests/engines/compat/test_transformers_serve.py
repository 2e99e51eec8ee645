"""Unpatched `transformers serve` 5.17, measured out of the box: its /v1/models answers 500 (no hub cache), it
refuses ignore_eos and min_tokens (422) and token-id prompts (400), ends streams without [DONE] and ignores
stream_options. `bench` with --model and a local tokenizer still runs every cell ok, knows every request's
output length, and states the method it kept lengths by (console, JSON, report)."""

from __future__ import annotations

import json

import pytest

from tokenbench.cli.main import main

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

METHOD = "output lengths not forced (measured per request; early ends counted) by max_tokens; prompts as text"


def test_bench_against_unpatched_transformers_serve(transformers_serve, tmp_path, capsys):
    m, out, db = transformers_serve.model, tmp_path / "result.json", tmp_path / "r.db"
    code = main(["bench", "--base-url", transformers_serve.base_url, "--model", m, "--tokenizer-path", m,
                 "--input-len", "32", "--output-len", "16", "--concurrency", "1,2", "--num-prompts", "4",
                 "--db", str(db), "--output", str(out)])
    said = capsys.readouterr()
    assert code == 0, said.err[-3000:] + transformers_serve.log.read_text()[-2000:]
    result = json.loads(out.read_text())
    assert [c["status"] for c in result["cells"]] == ["ok", "ok"]
    assert result["target"]["method"] == METHOD and METHOD in said.out + said.err
    caps = result["server_facts"]["capabilities"]
    assert caps["models_status"] == 500 and caps["token_ids"] is False
    assert caps["ignore_eos"] is False and caps["min_tokens"] is False and caps["done_marker"] is False
    assert caps["requests"] <= 10
    for cell in result["cells"]:
        measured = [r for r in cell["requests"] if r["phase"] == "measure"]
        assert len(measured) == 4
        assert all(r["completion_tokens"] is not None for r in measured)         # every output length known
        assert all(r["prompt_tokens"] == 32 for r in measured)                    # text built to the exact length
        ended = cell["summary"].get("ended_early", 0)
        assert sum(r["completion_tokens"] < 16 for r in measured) == ended
        assert cell["summary"]["length_mismatches"] == 0
    report = tmp_path / "report"
    assert main(["report", result["run_id"], "--db", str(db), "--format", "md", "-o", str(report)]) == 0
    assert METHOD in "".join(p.read_text() for p in report.glob("*.md"))
