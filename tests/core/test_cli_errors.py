"""Bad input: one line naming the cause and the fix, non-zero exit, no traceback (--debug shows it)."""

import socket
import subprocess
import sys

import pytest

from tokenbench.cli.main import main

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, capsys):
    code = main(args)
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


BASE = ["bench", "--input-len", "8", "--output-len", "4", "--concurrency", "1", "--no-store"]


def test_unreachable_url(capsys):
    code, err = run(BASE + ["--base-url", f"http://127.0.0.1:{free_port()}"], capsys)
    assert code == 3
    assert len(err) == 1 and "cannot reach" in err[0] and "--base-url" in err[0]


@pytest.mark.parametrize("flag,value,needle", [
    ("--input-len", "0", "--input-len must be a positive"),
    ("--output-len", "-3", "--output-len must be a positive"),
])
def test_non_positive_lengths(capsys, flag, value, needle):
    args = ["bench", "--base-url", "http://127.0.0.1:1", "--input-len", "8", "--output-len", "4",
            "--concurrency", "1", "--no-store"]
    args[args.index(flag) + 1] = value
    code, err = run(args, capsys)
    assert code == 2 and len(err) == 1 and needle in err[0]


def test_junk_concurrency_list(capsys):
    code, err = run(["bench", "--base-url", "http://127.0.0.1:1", "--input-len", "8", "--output-len", "4",
                     "--concurrency", "1,x,8"], capsys)
    assert code == 2 and len(err) == 1 and "'x' is not a positive integer" in err[0] and "1,8,32" in err[0]


def test_concurrency_and_rate_together_are_two_kinds_of_cells():
    """A bench is a study: closed-loop and open-loop cells may be mixed, as in a sweep."""
    from tokenbench.cli.bench import build_spec
    from tokenbench.sweep.plan import plan
    args = BASE[1:] + ["--base-url", "http://127.0.0.1:1", "--request-rate", "2"]
    kw = bench_kw(args)
    assert [c.key for c in plan(build_spec(kw)).cells] == ["8:4/c=1", "8:4/rate=2/s"]


def bench_kw(args: list[str]) -> dict:
    from tokenbench.cli.bench import command
    return command.make_context("bench", list(args)).params


def test_bad_slo(capsys):
    code, err = run(BASE + ["--base-url", "http://127.0.0.1:1", "--slo", "latency=5"], capsys)
    assert code == 2 and "NAME=MS" in err[0]


def test_unknown_flag(capsys):
    code, err = run(["bench", "--base-url", "http://x", "--bogus"], capsys)
    assert code == 2 and len(err) == 1 and "--bogus" in err[0] and "--help" in err[0]


def test_missing_api_key_variable(capsys, monkeypatch):
    monkeypatch.delenv("TB_TEST_KEY", raising=False)
    code, err = run(BASE + ["--base-url", "http://127.0.0.1:1", "--api-key-env", "TB_TEST_KEY"], capsys)
    assert code == 2 and "TB_TEST_KEY is not set" in err[0]


def test_no_traceback_without_debug_and_traceback_with_it():
    port = free_port()
    args = [sys.executable, "-m", "tokenbench.cli.main"]
    tail = BASE + ["--base-url", f"http://127.0.0.1:{port}"]
    plain = subprocess.run(args + tail, capture_output=True, text=True, timeout=60)
    assert plain.returncode == 3 and "Traceback" not in plain.stderr
    debug = subprocess.run(args + ["--debug"] + tail, capture_output=True, text=True, timeout=60)
    assert debug.returncode == 3 and "Traceback" in debug.stderr
