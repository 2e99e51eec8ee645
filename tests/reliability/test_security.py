"""Security: API keys come only from the environment or a file and are never written anywhere; model
text and server strings are escaped in HTML; nothing runs through a shell; tokenbench connects to the
configured target only.

Container argv quoting (profile values cannot inject arguments, with and without a setup script) is
proven by tests/engines/ascend/test_docker.py::test_values_stay_single_arguments and
tests/engines/ascend/test_container.py::test_nvidia_devices_and_visible_ids; they are not repeated here.
"""

from __future__ import annotations

import ast
import json
import secrets
import socket
import sqlite3
from pathlib import Path

import pytest

import tokenbench
from tokenbench.cli.main import main
from tokenbench.deploy import lifecycle, profiles
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import StubOpenAI, error_lines, files_holding

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]   # real servers, seconds per test

BENCH = ["--input-len", "8", "--output-len", "4", "--concurrency", "1", "--num-prompts", "6",
         "--warmup-requests", "0"]


def test_api_key_is_never_written(tmp_path, monkeypatch, capsys):
    """bench (env key and key file, with failing requests in the mix), sweep, report, export and runs:
    the key is in no file under the output tree (database, its WAL, JSON, reports) and in no output."""
    key = f"tb-secret-{secrets.token_hex(12)}"
    out, keydir = tmp_path / "out", tmp_path / "keys"
    out.mkdir(), keydir.mkdir()
    (keydir / "key.txt").write_text(key + "\n")
    monkeypatch.setenv("TB_TEST_KEY", key)
    db = str(out / "results.db")
    cfg = ReferenceConfig(ttft_ms=5, itl_ms=5, api_key=key, faults={"http_500": 0.3}, seed=1)
    with ReferenceProcess(cfg) as ref:
        for i, flag in enumerate((["--api-key-env", "TB_TEST_KEY"], ["--api-key-file", str(keydir / "key.txt")])):
            assert main(["bench", "--base-url", ref.url, *BENCH, *flag, "--max-error-rate", "1",
                         "--output", str(out / f"bench{i}.json"), "--db", db]) == 0
        assert main(["bench", "--base-url", ref.url, *BENCH, *flag, "--output", str(out / "failed.json"),
                     "--db", db]) == 5                          # a failed cell: its one-line error too
        spec = keydir / "sweep.yaml"
        spec.write_text(f"target: {{base_url: '{ref.url}', api_key_env: TB_TEST_KEY}}\npairs: [[8, 4]]\n"
                        "concurrency: [1, 2]\nmax_error_rate: 1\nrequests: {min: 4, per_concurrency: 1}\n")
        assert main(["sweep", str(spec), "--db", db]) == 0
        assert main(["bench", "--base-url", ref.url, *BENCH, "--no-store"]) == 3     # no key: refused, clearly
    assert "401" in error_lines(capsys.readouterr().err)[-1]
    run_ids = [r[0] for r in sqlite3.connect(db).execute("SELECT id FROM runs")]
    assert len(run_ids) == 4
    for run_id in run_ids:
        assert main(["report", run_id, "--db", db, "-o", str(out / "reports" / run_id)]) == 0
        assert main(["export", run_id, "--requests", "--db", db, "-o", str(out / f"{run_id}.json")]) == 0
    assert main(["runs", "--db", db]) == 0
    printed = capsys.readouterr()
    assert len(list(out.rglob("*.html"))) == 4 and len(list(out.rglob("*.md"))) == 4
    assert files_holding(out, key.encode()) == [] and files_holding(out, b"Bearer") == []
    assert key not in printed.out + printed.err


def test_key_quoted_by_the_server_is_not_stored(tmp_path, monkeypatch, capsys):
    """A server that quotes the Authorization header in its 401 body: the request is recorded as
    http_status 401 with the body, the key masked, in the database, the JSON and the error line."""
    key = f"tb-secret-{secrets.token_hex(12)}"
    monkeypatch.setenv("TB_TEST_KEY", key)
    with StubOpenAI(echo_auth=True) as stub:
        code = main(["bench", "--base-url", stub.url, *BENCH, "--vocab-size", "1000", "--api-key-env", "TB_TEST_KEY",
                     "--output", str(tmp_path / "r.json"), "--db", str(tmp_path / "r.db")])
    err = capsys.readouterr().err
    assert code == 5
    [line] = error_lines(err)
    assert "HTTP 401" in line and "Bearer ***" in line and key not in err
    assert files_holding(tmp_path, key.encode()) == []
    assert files_holding(tmp_path, b"Bearer ***") != []          # the rest of the body is kept


def test_model_text_and_server_strings_are_escaped_in_html(tmp_path, capsys):
    """Generated text `<script>` and a model name with markup, from a live server through bench and
    report: escaped in the HTML page, never live markup. (Renderer-level cases, also for markdown, are
    in tests/report/test_report_render.py.)"""
    evil_model, evil_text = "<img src=x onerror=alert(1)>", "<script>alert(1)</script>"
    with StubOpenAI(model=evil_model, text=evil_text) as stub:
        assert main(["bench", "--base-url", stub.url, *BENCH, "--vocab-size", "1000",
                     "--db", str(tmp_path / "r.db"), "--output", str(tmp_path / "r.json")]) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["target"]["model"] == evil_model
    assert main(["report", doc["run_id"], "--db", str(tmp_path / "r.db"), "-o", str(tmp_path / "rep"),
                 "--format", "html"]) == 0
    page = next((tmp_path / "rep").glob("*.html")).read_text()
    assert evil_text not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_nothing_runs_through_a_shell():
    """No shell=True, os.system or os.popen anywhere in the package: every tool and engine is started
    from an argv list."""
    offenders = []
    for path in Path(tokenbench.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                fn = ast.unparse(node.func)
                if fn in ("os.system", "os.popen") or any(
                        k.arg == "shell" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                        for k in node.keywords):
                    offenders.append(f"{path.name}:{node.lineno} {fn}")
    assert offenders == []


def test_local_engine_argv_keeps_profile_values_whole(tmp_path):
    """A local (llama.cpp) profile with shell metacharacters and flag-like values: each value is one
    argv item after its flag, so it cannot add arguments (the launcher is Popen(argv), no shell)."""
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    evil = ["model.served_name='x; rm -rf / --evil'", "args.foo='--foo --bar'", "args.bar='$(touch PWNED)'",
            f"model.path={tmp_path / 'm.gguf'}"]
    p = profiles.load_profile("cpu-smollm2-llamacpp", ["model.bundled=null", *evil])
    argv = lifecycle.command_for(p, 8123)
    for flag, value in (("--alias", "x; rm -rf / --evil"), ("--foo", "--foo --bar"), ("--bar", "$(touch PWNED)")):
        assert argv[argv.index(flag) + 1] == value
    assert "--evil" not in argv and "--bar" in argv and argv.count("--foo") == 1


class Connections:
    """Every socket connect and name lookup made in this process."""

    def __init__(self, monkeypatch) -> None:
        self.connects: list[tuple] = []
        self.lookups: list[tuple] = []
        real_connect, real_connect_ex, real_gai = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

        def connect(sock, address):
            self.connects.append((sock.family, address))
            return real_connect(sock, address)

        def connect_ex(sock, address):
            self.connects.append((sock.family, address))
            return real_connect_ex(sock, address)

        def getaddrinfo(host, port, *args, **kwargs):
            self.lookups.append((host, port))
            return real_gai(host, port, *args, **kwargs)

        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    def addresses(self) -> set:
        return {(family, address[:2] if isinstance(address, tuple) else address) for family, address in self.connects}


def test_connects_to_nothing_but_the_target(tmp_path, monkeypatch):
    """bench and sweep (both asyncio's transport and urllib's side calls) connect to the target's host
    and port only, and look up no name; report connects to nothing."""
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=5)) as ref:
        seen = Connections(monkeypatch)
        assert main(["bench", "--base-url", ref.url, *BENCH, "--db", str(tmp_path / "r.db"),
                     "--output", str(tmp_path / "r.json")]) == 0
        assert main(["sweep", "--base-url", ref.url, "--pairs", "8:4", "--concurrency", "1,2", "--num-prompts", "4",
                     "--db", str(tmp_path / "r.db")]) == 0
        assert len(seen.connects) >= 5
        assert seen.addresses() == {(socket.AF_INET, ("127.0.0.1", ref.port))}
        assert all(host in ("127.0.0.1", None) for host, _ in seen.lookups), seen.lookups
        seen.connects.clear()
        run_id = json.loads((tmp_path / "r.json").read_text())["run_id"]
        assert main(["report", run_id, "--db", str(tmp_path / "r.db"), "-o", str(tmp_path / "rep")]) == 0
        assert seen.connects == []
