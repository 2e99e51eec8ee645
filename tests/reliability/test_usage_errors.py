"""A usage error stores no run, and a message never advises a flag that cannot help.

Usage errors found only once the server answered (a model it does not serve, a dataset file that is
missing or not JSON Lines, an OTLP port that cannot be bound) are one line, exit 2, and leave no run behind
(the run was stored before they could be found; it is removed as it holds no cell). Advice: a request that
outlived a too-short --timeout names --timeout, not the error budget; a cell of which every request failed
is no budget to raise; a server that went away is no budget either."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.client.records import RequestRecord
from tokenbench.metrics.tally import Outcomes
from tokenbench.metrics.verdict import BUDGET, Verdict, server_gone, verdict
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import error_lines


def runs(db: Path) -> int:
    if not db.exists():
        return 0
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    finally:
        con.close()


@pytest.fixture
def taken_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_usage_errors_found_after_the_server_answered_store_no_run(tmp_path, capsys, taken_port):
    (tmp_path / "bad.jsonl").write_text('{"prompt": "a"\n')
    db = tmp_path / "r.db"
    pair = ["--input-len", "8", "--output-len", "4"]
    cases = {
        "model": [*pair, "--model", "no-such-model"],
        "dataset": ["--dataset-name", "sharegpt", "--dataset-path", str(tmp_path / "missing.json"), "--output-len", "4"],
        "jsonl": ["--dataset-name", "jsonl", "--dataset-path", str(tmp_path / "bad.jsonl"), "--output-len", "4"],
        "otlp": [*pair, "--otlp-listen", f"127.0.0.1:{taken_port}"],
    }
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1)) as ref:
        for name, args in cases.items():
            code = main(["bench", "--base-url", ref.url, *args, "--concurrency", "1", "--num-prompts", "2",
                         "--db", str(db)])
            err = capsys.readouterr().err
            assert code == 2 and len(error_lines(err)) == 1, (name, err[-600:])
            assert runs(db) == 0, name
        # the same database still takes a run that works
        assert main(["bench", "--base-url", ref.url, *pair, "--concurrency", "1", "--num-prompts", "2",
                     "--db", str(db)]) == 0
    assert runs(db) == 1


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_too_short_timeout_names_the_timeout_with_its_value(tmp_path, capsys):
    with ReferenceProcess(ReferenceConfig(ttft_ms=50, itl_ms=10)) as ref:
        code = main(["bench", "--base-url", ref.url, "--input-len", "8", "--output-len", "4", "--concurrency", "1",
                     "--num-prompts", "2", "--warmup-requests", "0", "--timeout", "0.02", "--db", str(tmp_path / "r.db")])
    [line] = error_lines(capsys.readouterr().err)
    assert code == 5 and "--timeout 0.02 s" in line and "raise --timeout" in line, line
    assert "TimeoutError: " not in line and BUDGET not in line


def rec(i: int, kind: str | None = None, status: int | None = 200) -> RequestRecord:
    return RequestRecord(index=i, phase="measure", input_len=4, output_len=2, intended_ns=i, sent_ns=i * 10,
                         end_ns=i * 10 + 5, status=status, token_times_ns=[], token_counts=[], prompt_tokens=None,
                         completion_tokens=None, usage_source="none", finish_reason=None, error_kind=kind,
                         error_detail=kind or "")


def test_the_error_budget_is_named_only_where_raising_it_could_keep_the_cell():
    some = [rec(0), rec(1, "reset", None)]
    assert BUDGET in verdict(some, False, 0.0)[1]
    every = [rec(0, "http_status", 500), rec(1, "http_status", 500)]
    said = verdict(every, False, 0.0)[1]
    assert BUDGET not in said and "--api-key-env" in said            # a gateway answers 500 without its key
    assert "--api-key-env" not in verdict(every, False, 0.0, api_key_sent=True)[1]
    timeouts = [rec(0, "timeout", None), rec(1, "timeout", None)]
    assert "raise --timeout" in verdict(timeouts, False, 0.0)[1] and BUDGET not in verdict(timeouts, False, 0.0)[1]


@pytest.mark.parametrize("recs", [[rec(0), rec(1, "reset", None)], [rec(0, "reset", None), rec(1, "reset", None)]])
def test_a_server_that_went_away_is_no_budget_to_raise_nor_a_log_to_read(recs):
    status, message = verdict(Outcomes.of(recs), False, 0.0)
    gone = server_gone(Verdict(status, message), "/v1/models: no connection", ours=False)
    assert gone.status == "failed" and "server unreachable" in gone.message, gone.message
    assert BUDGET not in gone.message and "every request failed" not in gone.message, gone.message
