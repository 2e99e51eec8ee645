"""A server that dies or refuses mid-run: the cell ends "server unreachable" after a few consecutive
connection failures and the sweep stops (naming the server, not the error budget); every request
answered 4xx is a request problem, 401/403 with a key a wrong key."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
import yaml

from tokenbench.cli.main import main
from tokenbench.client.records import RequestRecord
from tokenbench.metrics.tally import UNREACHABLE_AFTER
from tokenbench.metrics.verdict import unreachable, verdict
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import db_problems, error_lines, kill_when_cells


def rec(i: int, kind: str | None = None, status: int | None = 200, detail: str = "") -> RequestRecord:
    return RequestRecord(index=i, phase="measure", input_len=4, output_len=2, intended_ns=i, sent_ns=i * 10,
                         end_ns=i * 10 + 5, status=status, token_times_ns=[], token_counts=[], prompt_tokens=None,
                         completion_tokens=None, usage_source="none", finish_reason=None, error_kind=kind,
                         error_detail=detail or (kind or ""))


def test_every_request_4xx_is_a_request_problem_not_the_error_budget():
    recs = [rec(i, "http_status", 400, "HTTP 400: unknown field 'foo'") for i in range(4)]
    status, message = verdict(recs, False, 0.0)
    assert status == "failed" and "request problem" in message and "--model" in message
    assert "max-error-rate" not in message


@pytest.mark.parametrize("code", [401, 403])
def test_401_403_with_a_key_is_a_wrong_key(code):
    recs = [rec(i, "http_status", code, f"HTTP {code}") for i in range(3)]
    assert "rejected the API key" in verdict(recs, False, 0.0, api_key_sent=True)[1]
    assert "requires an API key" in verdict(recs, False, 0.0, api_key_sent=False)[1]


def test_some_failures_still_name_the_error_budget():
    recs = [rec(0), rec(1, "http_status", 400, "HTTP 400"), rec(2, "http_status", 429, "HTTP 429")]
    assert "max-error-rate" in verdict(recs, False, 0.0)[1]


def test_unreachable_needs_the_last_requests_all_refused():
    refused = [rec(i, "connect", None, "Connection refused") for i in range(1, UNREACHABLE_AFTER + 1)]
    assert unreachable([rec(0), *refused]) == "Connection refused"
    assert unreachable([*refused, rec(9)]) is None                        # it came back
    assert unreachable(refused[:-1]) is None


@pytest.mark.slow
def test_wrong_key_at_model_discovery_is_told_as_such(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BENCH_KEY", "not-the-key")
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1, api_key="the-key")) as ref:
        code = main(["bench", "--base-url", ref.url, "--input-len", "4", "--output-len", "2", "--concurrency", "1",
                     "--api-key-env", "BENCH_KEY", "--db", str(tmp_path / "r.db")])
    [line] = error_lines(capsys.readouterr().err)
    assert code == 3 and "rejected the API key" in line and "pass the key" not in line


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_reference_server_killed_in_the_second_cell_stops_the_sweep(tmp_path, capsys):
    db = tmp_path / "r.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=2, itl_ms=20)) as ref:
        spec = {"target": {"base_url": ref.url}, "pairs": [[8, 20]], "concurrency": [1, 2, 4], "warmup_requests": 0,
                "requests": {"per_concurrency": 10, "min": 20}, "monitor_interval_s": 0.2}
        (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
        done = threading.Event()
        killer = threading.Thread(target=kill_when_cells, args=(db, 1, ref.proc.pid, done), daemon=True)
        killer.start()
        code = main(["sweep", str(tmp_path / "s.yaml"), "--db", str(db), "--output", str(tmp_path / "r.json")])
        stopped_at = time.monotonic()
        done.set()
    [line] = error_lines(capsys.readouterr().err)
    assert code == 3 and "server unreachable at " + ref.url in line and "max-error-rate" not in line, line
    assert stopped_at - done.killed_at < 60                 # not the 600 s request timeout: the refusal stops it
    con = sqlite3.connect(db)
    cells = con.execute("SELECT key, status, message FROM cells ORDER BY id").fetchall()
    [(status,)] = con.execute("SELECT status FROM runs").fetchall()
    assert [c[:2] for c in cells] == [("8:20/c=1", "ok"), ("8:20/c=2", "failed")]    # c=4 never ran
    assert "server unreachable" in cells[1][2] and status == "failed" and db_problems(db) == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_reference_server_killed_in_the_second_cell_stops_the_bench(tmp_path, capsys):
    db = tmp_path / "r.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=2, itl_ms=20)) as ref:
        done = threading.Event()
        threading.Thread(target=kill_when_cells, args=(db, 1, ref.proc.pid, done), daemon=True).start()
        code = main(["bench", "--base-url", ref.url.removeprefix("http://"), "--input-len", "8", "--output-len", "20",
                     "--concurrency", "1,2,4", "--num-prompts", "20", "--warmup-requests", "0", "--db", str(db)])
        done.set()
    [line] = error_lines(capsys.readouterr().err)
    assert code == 3 and line.startswith("error: bench stopped") and "server unreachable at " + ref.url in line
    assert "tokenbench bench --resume" in line
    con = sqlite3.connect(db)
    assert [r[0] for r in con.execute("SELECT key FROM cells ORDER BY id")] == ["8:20/c=1", "8:20/c=2"]
