"""A resume measures again every cell that did not end ok (failed, interrupted, cut short by a server that
went away), for a server tokenbench did not start as for one it did; the command tokenbench prints is the one
that does it, run here as printed; a resume with nothing left to measure says so and exits 0.

The server is the reference server in a child process, SIGKILLed during the third cell and started again on
the same port, as a user would restart their own server."""

from __future__ import annotations

import shlex
import sqlite3
import threading
from pathlib import Path

import pytest
import yaml

from tokenbench.cli.main import main
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import db_problems, error_lines, kill_when_cells

pytestmark = pytest.mark.slow   # subprocesses and real servers: seconds per test

SERVER = ReferenceConfig(ttft_ms=30, itl_ms=40)


def printed_resume(err: str) -> list[str]:
    """The resume command of the one error line, as a user pastes it (without the word `tokenbench`)."""
    [line] = error_lines(err)
    assert "resume with `tokenbench " in line, line
    words = shlex.split(line.split("resume with `", 1)[1].split("`", 1)[0])
    assert words[0] == "tokenbench" and "--resume" in words
    return words[1:]


def current(db: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT key, status FROM cells WHERE superseded = 0 ORDER BY concurrency").fetchall()
    finally:
        con.close()


def killed_in_third_cell(argv: list[str], db: Path, capsys) -> tuple[ReferenceProcess, int, str]:
    """Run `argv` against a reference server that is SIGKILLed once two cells are stored; the server's
    port, the exit code and stderr."""
    ref = ReferenceProcess(SERVER).__enter__()
    done = threading.Event()
    threading.Thread(target=kill_when_cells, args=(db, 2, ref.proc.pid, done), daemon=True).start()
    try:
        code = main([argv[0], "--base-url", ref.url, *argv[1:], "--db", str(db)])
    finally:
        done.set()
        port = ref.port
        ref.close()
    return ref, port, capsys.readouterr().err if code else ""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["bench", "sweep"])
def test_the_printed_resume_measures_the_cell_the_dead_server_cut(tmp_path, capsys, kind):
    db = tmp_path / "death.db"
    argv = ["bench", "--input-len", "16", "--output-len", "16", "--concurrency", "1,2,3", "--num-prompts", "6"]
    if kind == "sweep":
        argv = ["sweep", "--pairs", "16:16", "--concurrency", "1,2,3", "--set", "requests.min=6",
                "--set", "requests.per_concurrency=1"]
    ref, port, err = killed_in_third_cell(argv, db, capsys)
    assert err, "the run ended ok although its server was killed"
    resume = printed_resume(err)
    assert current(db)[:2] == [("16:16/c=1", "ok"), ("16:16/c=2", "ok")] and current(db)[2][1] != "ok"
    with ReferenceProcess(SERVER, port=port) as again:            # the user starts the server again
        code = main(resume)
        captured = capsys.readouterr()
        arrivals = len(again.send_log())
    assert code == 0, captured.err
    assert current(db) == [("16:16/c=1", "ok"), ("16:16/c=2", "ok"), ("16:16/c=3", "ok")]
    assert arrivals >= 6                                          # c=3 was measured again, in full
    con = sqlite3.connect(db)
    [(superseded, status)] = con.execute("SELECT superseded, status FROM cells WHERE superseded > 0").fetchall()
    assert status != "ok"                                          # the cut attempt is kept as data
    [(run_status,)] = con.execute("SELECT status FROM runs").fetchall()
    con.close()
    assert run_status == "done" and db_problems(db) == []
    assert main(resume) == 0                                      # nothing left: said, exit 0, no server needed
    err = capsys.readouterr().err
    assert "nothing to resume" in err and not error_lines(err)


@pytest.mark.timeout(120)
def test_a_failed_cell_is_measured_again_and_the_failure_names_the_resume(tmp_path, capsys):
    """A cell failed for a cause the user then fixes (here: the server answered every request with HTTP 500):
    the failure's line prints the resume, which measures that cell again."""
    db = tmp_path / "r.db"
    spec = {"pairs": [[8, 4]], "concurrency": [1], "warmup_requests": 0, "requests": {"per_concurrency": 4, "min": 4}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1, faults={"http_500": 1.0})) as bad:
        code = main(["sweep", str(tmp_path / "s.yaml"), "--base-url", bad.url, "--db", str(db)])
        port = bad.port
    err = capsys.readouterr().err
    assert code == 5 and current(db) == [("8:4/c=1", "failed")]
    resume = printed_resume(err)
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1), port=port):
        assert main(resume) == 0, capsys.readouterr().err
    assert current(db) == [("8:4/c=1", "ok")]


@pytest.mark.timeout(240)
def test_a_capacity_search_measures_the_probe_the_dead_server_cut_and_finds_the_same_capacity(tmp_path, capsys):
    """A search whose server died mid-probe: that probe is no result of the load (the search would read it as
    over capacity), so the printed resume measures it again and the search ends where an uncut one ends (the
    server runs 6 requests at once and queues the rest: tests/study/test_capacity.py)."""
    db = tmp_path / "r.db"
    config = ReferenceConfig(ttft_ms=10, itl_ms=20, max_running=6)
    argv = ["sweep", "--pairs", "16:8", "--find-capacity", "--slo", "ttft=80", "--sustain-s", "2"]
    ref = ReferenceProcess(config).__enter__()
    done = threading.Event()
    threading.Thread(target=kill_when_cells, args=(db, 2, ref.proc.pid, done), daemon=True).start()
    try:
        code = main([argv[0], "--base-url", ref.url, *argv[1:], "--db", str(db)])
    finally:
        done.set()
        port = ref.port
        ref.close()
    err = capsys.readouterr().err
    assert code == 3, err
    resume = printed_resume(err)
    con = sqlite3.connect(db)
    [(cut_key, cut_status)] = con.execute("SELECT key, status FROM cells WHERE json_extract(summary_json, "
                                          "'$.server_unreachable') = 1").fetchall()
    con.close()
    assert cut_status == "failed"
    with ReferenceProcess(config, port=port):
        assert main(resume) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert main(resume) == 0 and "nothing to resume" in capsys.readouterr().err
    assert "capacity 16:8 (tier slo: goodput:fraction>=0.9): 6 streams" in out
    assert (cut_key, "ok") in current(db)
