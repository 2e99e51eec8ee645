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


def test_concurrency_with_a_rate_is_refused_for_a_rate_with_a_cap(capsys):
    """AIPerf's `--request-rate R --concurrency C` means ONE cell, a rate with a cap (issue 28); tokenbench's
    --concurrency is a closed-loop axis, so the flags together are refused with the spelling of that cell
    (nothing is measured silently as two kinds of cells). The cap spelled as vLLM does is one rate cell
    with the cap; a spec that lists both axes (a sweep YAML) still plans both kinds of cells."""
    from tokenbench.cli.bench import build_spec
    from tokenbench.spec.study import StudySpec
    from tokenbench.study.plan import plan
    code, err = run(BASE + ["--base-url", "http://127.0.0.1:1", "--request-rate", "2"], capsys)
    assert code == 2 and len(err) == 1 and "not a rate with a cap" in err[0]
    assert "--request-rate R --max-concurrency C" in err[0]
    capped = plan(build_spec(bench_kw([*BASE[1:5], "--no-store", "--base-url", "http://127.0.0.1:1",
                                       "--request-rate", "2", "--max-concurrency", "1"]))).cells
    assert [(c.key, c.load.request_rate, c.load.max_concurrency) for c in capped] == [("8:4/rate=2/s", 2.0, 1)]
    both = StudySpec(target={"base_url": "http://127.0.0.1:1"}, pairs=[(8, 4)], concurrency=[1], rates=[2.0])
    assert [c.key for c in plan(both).cells] == ["8:4/c=1", "8:4/rate=2/s"]


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


@pytest.mark.parametrize("argv", [["bench", "--db", "\x00"], ["runs", "--db", "a\x00b"],
                                  ["bench", "--base-url", "http://h\x00:1", "--input-len", "8"]])
def test_a_nul_byte_in_any_argument_is_one_usage_line(capsys, argv):
    """No path, URL or value holds a NUL byte (a caller of main() can pass one, a shell cannot)."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NUL byte" in err[0] and "internal error" not in err[0]
