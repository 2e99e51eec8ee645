"""No traceback without --debug, for any input: generated command lines, files (damaged databases, special
and unreadable paths, bad YAML) and environment variables drive the CLI in-process. Every exit is 0, or
exactly one `error:` line with a cause and a fix and an exit code from errors.EXIT_CODES (70, a bug, never).

The fast tier runs a bounded number of examples; the slow tier runs the long profile. Targets are closed
ports on loopback (refused at once), so no example waits on a network. Commands that deploy or serve (deploy up, demo, reference-server, monitor,
calibrate, agree, setup, flaggems) are left out: their failures are covered where they are tested.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenbench.cli.main import main
from tokenbench.errors import EXIT_CODES, InternalError
from tokenbench.store.db import Store
from tokenbench.store.schema import V1_DDL

FAST = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
RAN = {"invocations": 0, "tracebacks": 0}


GOOD_RUN: list[str] = []


SWEEP = b"target: {base_url: 'http://127.0.0.1:1'}\npairs: [[8, 8]]\nconcurrency: [1]\n"
# files with control characters and numbers that overflow: an API key file, sweep YAML, datasets, prompts
CONTROL_FILES = {
    "key_nul": b"sk-\x00abc\n", "key_ctrl": b"sk-\x1b[31mred\n", "key_empty": b"", "key_binary": b"\xff\xfe\x00k",
    "yaml_nul": SWEEP + b"name: a\x00b\n", "yaml_esc": SWEEP + b"name: \"a\\x07b\"\n",
    "yaml_huge": SWEEP.replace(b"[1]", b"[100000000000000000000000]"), "yaml_inf": SWEEP + b"repeats: .inf\n",
    "yaml_float": SWEEP + b"timeslice_s: 1e-320\nmonitor_interval_s: 1e308\n",
    "sharegpt_ctrl": b'[{"conversations": [{"from": "human", "value": "a\\u0000b\\u001b"}, {"from": "gpt", "value": "x"}]}]',
    "prompts_ctrl": b'{"prompt": "a\\u0000\\u0007", "output_len": 1e23}\n\x00\n',
}


def make_files(root: Path) -> dict[str, str]:
    """Named paths the strategies pick from; each kind of bad file a user can hand us."""
    root.mkdir(parents=True, exist_ok=True)
    files = {"missing": root / "nowhere" / "x.db", "dir": root / "adir", "text": root / "text.db",
             "empty": root / "empty.db", "truncated": root / "truncated.db", "foreign": root / "foreign.db",
             "wrong_schema": root / "wrong.db", "newer": root / "newer.db", "v1": root / "v1.db",
             "good": root / "good.db", "under_file": root / "text.db" / "x.db", "link": root / "link.json",
             "fifo": root / "fifo", "yaml_bad": root / "bad.yaml", "yaml_tabs": root / "tabs.yaml",
             "yaml_sweep": root / "sweep.yaml", "binary": root / "binary.bin", "out": root / "out" / "o.json"}
    files["dir"].mkdir(exist_ok=True)
    files["text"].write_text("not a database\n" * 40)
    files["empty"].write_bytes(b"")
    files["binary"].write_bytes(bytes(range(256)) * 8)
    good = Store(files["good"])
    GOOD_RUN.append(good.create_run("bench", "http://127.0.0.1:1", {"planned_cells": 1}, ["tokenbench"], {}))
    good.close()
    files["truncated"].write_bytes(files["good"].read_bytes()[:1500])
    for name, sql in (("foreign", "CREATE TABLE runs (id INTEGER)"),
                      ("wrong_schema", "CREATE TABLE runs (id TEXT); PRAGMA user_version = 1"),
                      ("newer", "PRAGMA user_version = 42"), ("v1", V1_DDL + "; PRAGMA user_version = 1")):
        con = sqlite3.connect(files[name])
        con.executescript(sql)
        con.close()
    if not files["link"].is_symlink():
        files["link"].symlink_to(files["text"])
    if not files["fifo"].exists():
        os.mkfifo(files["fifo"])
    files["yaml_bad"].write_text("target: [\n")
    files["yaml_tabs"].write_text("target:\n\tbase_url: x\n")
    files["yaml_sweep"].write_text("target: {base_url: 'http://127.0.0.1:1'}\npairs: [[8, 8]]\nconcurrency: [1]\n")
    for name, data in CONTROL_FILES.items():
        files[name] = root / name
        files[name].write_bytes(data)
    return {k: str(v) for k, v in files.items()} | {"dev_full": "/dev/full", "dash": "-", "dev_null": "/dev/null"}


ROOT = Path(tempfile.mkdtemp(prefix="tokenbench-cli-property-"))   # the strategies need the files at import
atexit.register(shutil.rmtree, ROOT, True)
FILES = make_files(ROOT)
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
URLS = st.sampled_from(["", " ", "nonsense", "127.0.0.1:1", "http://127.0.0.1:1", "http://127.0.0.1:1/v1",
                        "ftp://127.0.0.1:1", "http://[::1", "http://127.0.0.1:99999", "localhost:1", "some-deploy",
                        "http://", "://x", "127.0.0.1"])
PATH = st.sampled_from(sorted(FILES.values()))        # outputs and databases: a FIFO too (refused, never opened)
IN_PATH = st.sampled_from(sorted(v for k, v in FILES.items() if k != "fifo"))   # inputs: reading a FIFO is legal
OVERFLOW = st.sampled_from(["1e23", "100000000000000000000000", "9223372036854775808", "1e400", "-1e400", "1e308",
                            "inf", "-inf", "Infinity", "nan", "NaN", "1e-320", "0x10", "1_000", "4\x00", "\x1b[0m"])
NUMBER = st.one_of(st.sampled_from(["0", "-1", "1", "8", "1e9", "abc", "", "1,2", "nan", "inf", "2:2"]), OVERFLOW, TEXT)
RUN = st.one_of(st.sampled_from(["", "nope", "20261201-000000-abcdef", *GOOD_RUN]), TEXT)
WHEN = st.one_of(st.sampled_from(["2025-06-01", "2025-06-01T14:30", "2025-06-01T14:30+08:00", "7d", "12h", "1.5w",
                                  "0s", "yesterday", "2025-13-01", "-1d", "1e9d", "99999999999d", ""]), TEXT)
SET = st.one_of(st.sampled_from(["repeats=abc", "repeats=2", "bogus=1", "pairs=[[1]]", "=", "name", "target.x=1",
                                 "concurrency=[0]", "slo.ttft=-1"]), TEXT)


def opt(flag: str, values) -> st.SearchStrategy[list[str]]:
    return st.one_of(st.just([]), values.map(lambda v: [flag, v]))


def command(*parts) -> st.SearchStrategy[list[str]]:
    return st.tuples(*(p if isinstance(p, st.SearchStrategy) else st.just(p) for p in parts)).map(
        lambda t: [w for p in t for w in (p if isinstance(p, list) else [p])])


INVOCATIONS = st.one_of(
    command("runs", opt("--db", PATH), opt("--json", st.just("--json")).map(lambda v: v[1:]), opt("--name", TEXT),
            opt("--target", TEXT), opt("--since", WHEN), opt("--until", WHEN)),
    command("report", RUN, opt("--db", PATH), opt("-o", PATH), opt("--format", st.sampled_from(["md", "html", "x", ""]))),
    command("export", RUN, opt("--db", PATH), opt("-o", PATH), opt("--format", st.sampled_from(["json", "csv", "x"]))),
    command("compare", RUN, RUN, opt("--db", PATH)),
    command("import", IN_PATH, opt("--db", PATH)),
    command("parse", st.sampled_from(["npu-smi", "nvidia-smi", "prometheus", "x"]), IN_PATH),
    command("profiles", opt("--fields", st.just("--fields")).map(lambda v: v[1:])),
    command("deploy", "status"),
    command("deploy", "logs", st.sampled_from(["x", ""])),
    command("bench", opt("--base-url", URLS), opt("--input-len", NUMBER), opt("--output-len", NUMBER),
            opt("--concurrency", NUMBER), opt("--timeout", NUMBER), opt("--db", PATH), opt("--output", PATH),
            opt("--api-key-env", st.sampled_from(["UNSET_KEY_VAR", "TB_KEY", ""])),
            opt("--api-key-file", IN_PATH), opt("--resume", RUN)),
    command("bench", "--base-url", "http://127.0.0.1:1", "--input-len", NUMBER, "--output-len", NUMBER,
            st.sampled_from([["--concurrency", "1"], ["--request-rate", "4"]]),
            *(opt(flag, NUMBER) for flag in ("--num-prompts", "--max-concurrency", "--request-rate", "--timeout",
                                             "--warmup-requests", "--repeats", "--seed", "--temperature", "--duration",
                                             "--timeslice-s", "--monitor-interval-s", "--burstiness", "--top-k")),
            opt("--slo", st.one_of(OVERFLOW.map(lambda v: f"ttft={v}"), OVERFLOW.map(lambda v: f"ttft:p99<={v}"))),
            opt("--api-key-file", st.sampled_from([FILES[k] for k in CONTROL_FILES if k.startswith("key")])),
            opt("--dataset-name", st.sampled_from(["sharegpt", "jsonl"])),
            opt("--dataset-path", st.sampled_from([FILES["sharegpt_ctrl"], FILES["prompts_ctrl"]])),
            opt("--db", st.just(FILES["good"])), opt("--name", TEXT)),
    command("sweep", st.sampled_from([FILES[k] for k in CONTROL_FILES if k.startswith("yaml")]),
            opt("--set", st.one_of(SET, OVERFLOW.map(lambda v: f"repeats={v}"), OVERFLOW.map(lambda v: f"seed={v}"))),
            opt("--db", st.just(FILES["good"])), opt("--dry-run", st.just("--dry-run")).map(lambda v: v[1:])),
    command("sweep", st.one_of(st.just([]), IN_PATH.map(lambda p: [p])), opt("--db", PATH), opt("--set", SET),
            opt("--resume", RUN), opt("--output", PATH), opt("--base-url", URLS), opt("--pairs", NUMBER),
            opt("--concurrency", NUMBER), opt("--dry-run", st.just("--dry-run")).map(lambda v: v[1:])),
    command("smoke", URLS.filter(lambda u: ":" in u)),
    st.lists(st.one_of(TEXT, st.sampled_from(["--db", "--output", "-o", "--help", "--version", "bench", "sweep"])),
             max_size=5),
)
ENV = st.fixed_dictionaries({}, optional={
    "TOKENBENCH_RESULTS": st.sampled_from([FILES["dir"], FILES["text"], FILES["missing"], "/dev/null"]),
    "TOKENBENCH_STATE": st.sampled_from([FILES["dir"], FILES["text"], FILES["missing"]]),
    "TB_KEY": st.sampled_from(["", "k", "a\nb"]),
    "OPENAI_API_KEY": st.sampled_from(["", "k"]),
})


def check_exit(argv: list[str], env: dict[str, str], monkeypatch) -> None:
    for key in ("TOKENBENCH_RESULTS", "TOKENBENCH_STATE", "TB_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TOKENBENCH_RESULTS", str(ROOT / "results"))
    monkeypatch.setenv("TOKENBENCH_STATE", str(ROOT / "state"))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(argv)
    RAN["invocations"] += 1
    text = err.getvalue()
    if "Traceback" in text + out.getvalue():
        RAN["tracebacks"] += 1
    assert "Traceback" not in text + out.getvalue(), (argv, env, text)
    assert code in EXIT_CODES and code != InternalError.exit_code, (argv, env, code, text)
    if code != 0:
        errors = [line for line in text.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, (argv, env, text)
        assert " -- " in errors[0] or "--help" in errors[0], (argv, env, errors[0])
    assert Path("/dev/full").is_char_device() and Path(FILES["link"]).is_symlink() and Path(FILES["fifo"]).is_fifo()


@FAST
@given(INVOCATIONS, ENV)
def test_any_command_line_exits_0_or_one_line_with_a_documented_code(argv, env):
    with pytest.MonkeyPatch.context() as mp:
        check_exit(argv, env, mp)


@pytest.mark.slow
@LONG
@given(INVOCATIONS, ENV)
def test_any_command_line_long_profile(argv, env):
    with pytest.MonkeyPatch.context() as mp:
        check_exit(argv, env, mp)


def test_zz_report_how_many_ran(capsys):
    """Prints the count (the closing note quotes it); runs after the property tests in this module."""
    with capsys.disabled():
        print(f"\nCLI property: {RAN['invocations']} generated invocations, {RAN['tracebacks']} tracebacks")
    assert RAN["tracebacks"] == 0
