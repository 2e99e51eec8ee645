"""Pipes and files as a shell user expects them: `--output -` puts only the JSON result on stdout (the
table and progress go to stderr), so `bench --output - ... | jq .` parses; every file tokenbench writes
(JSON results, exports, reports, the database) has the mode the umask gives; `--db -` is refused, never
a file named "-"; the advice printed is a command that works when pasted, naming `--db` when needed."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.store import commands, outputs
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess


@pytest.fixture
def umask():
    """Set a umask for the test and restore the caller's."""
    saved = os.umask(0o022)
    yield os.umask
    os.umask(saved)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002, 0o077])
def test_new_output_files_and_databases_follow_the_umask(tmp_path, umask, mask):
    umask(mask)
    assert outputs.umask() == mask
    outputs.write_text(tmp_path / "out" / "result.json", "{}")
    Store(tmp_path / "results.db").close()
    assert mode(tmp_path / "out" / "result.json") == 0o666 & ~mask
    assert mode(tmp_path / "results.db") == 0o666 & ~mask
    assert mode(tmp_path / "out") == 0o777 & ~mask


def test_a_replaced_file_keeps_its_own_mode(tmp_path, umask):
    target = tmp_path / "report.md"
    target.write_text("old")
    target.chmod(0o640)
    outputs.write_text(target, "new")
    assert (target.read_text(), mode(target)) == ("new", 0o640)


@pytest.mark.parametrize("argv", [["runs"], ["report", "R1"], ["export", "R1"], ["compare", "R1", "R2"],
                                  ["bench", "--base-url", "http://127.0.0.1:1", "--input-len", "8",
                                   "--output-len", "2", "--concurrency", "1"],
                                  ["sweep", "--base-url", "http://127.0.0.1:1", "--pairs", "8:2", "--concurrency", "1"]])
def test_db_dash_is_refused_in_one_line_and_creates_nothing(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    code = main([*argv, "--db", "-"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: --db -: the results database is an SQLite file, not a stream -- "
                                 "give --db a file path, e.g. --db ./results.db"]
    assert list(tmp_path.iterdir()) == []


def test_advice_names_the_database_unless_it_is_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBENCH_RESULTS", str(tmp_path / "home"))
    assert commands.resume(None, "sweep", "R1") == "tokenbench sweep --resume R1"
    assert commands.resume(tmp_path / "home" / "tokenbench.db", "sweep", "R1") == "tokenbench sweep --resume R1"
    assert commands.resume(tmp_path / "my results.db", "bench", "R1") == \
        f"tokenbench bench --resume R1 --db '{tmp_path}/my results.db'"
    monkeypatch.chdir(tmp_path)
    assert commands.tokenbench("rel.db", "runs") == f"tokenbench runs --db {tmp_path}/rel.db"   # pasteable anywhere


def tokenbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenbench.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def pasted(line: str) -> list[str]:
    """The command between backticks in an advice line, as the shell would split it (without `tokenbench`)."""
    [command] = re.findall(r"`(tokenbench [^`]+)`", line)
    return shlex.split(command)[1:]


@pytest.mark.slow
def test_output_dash_pipes_only_json_and_the_printed_commands_work(tmp_path):
    db = tmp_path / "my runs" / "r.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=2)) as ref:
        done = tokenbench("bench", "--base-url", ref.url, "--input-len", "16", "--output-len", "4",
                          "--concurrency", "1,2", "--num-prompts", "4", "--db", str(db), "--output", "-",
                          "--allow-client-lag", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)                         # stdout is exactly one JSON document
        assert [c["key"] for c in result["cells"]] == ["16:4/c=1", "16:4/c=2"]
        assert "results (ms, tokens/s" in done.stderr and "16:4/c=2" in done.stderr     # the table, on stderr
        [where] = [line for line in done.stderr.splitlines() if line.startswith("stored run")]
        report = pasted(where)
        assert report[-2:] == ["--db", str(db)]
        assert tokenbench(*report, "-o", str(tmp_path / "rep"), cwd=tmp_path / "my runs").returncode == 0
        resume = shlex.split(commands.resume(db, "bench", result["run_id"]))[1:]
        again = tokenbench(*resume, cwd=tmp_path / "my runs")     # nothing left: exits 0, measures nothing
        assert again.returncode == 0, again.stderr
    assert list(tmp_path.glob("-")) == [] and not (tmp_path / "my runs" / "-").exists()
