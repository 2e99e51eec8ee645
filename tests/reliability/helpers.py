"""Shared by the reliability tests: the CLI in-process, the reference server's log joined with the
client's records, and the database invariants every crash must leave intact."""

from __future__ import annotations

import http.server
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.deploy.helpers import gone, tokenbench_argv  # noqa: F401  (gone: one definition, shared with the deploy tests)
from tokenbench.cli.main import main
from tokenbench.testing.reference_server import ReferenceProcess

FAKE_ENGINE = Path(__file__).with_name("fake_engine.py")
WAIT_S = 120                # a deadline that only stops a broken test


def bench(url: str, tmp: Path, *extra: str, n: int = 10, output_len: int = 6, name: str = "run") -> tuple[int, dict]:
    """`tokenbench bench` at concurrency 1 without warmup (request i is the server's i-th arrival);
    returns (exit code, the JSON result)."""
    out = tmp / f"{name}.json"
    code = main(["bench", "--base-url", url, "--input-len", "8", "--output-len", str(output_len),
                 "--concurrency", "1", "--num-prompts", str(n), "--warmup-requests", "0", "--seed", "0",
                 "--output", str(out), "--db", str(tmp / "results.db"), *extra])
    return code, json.loads(out.read_text())


def by_arrival(log: list[dict]) -> list[dict]:
    return sorted(log, key=lambda r: r["recv_ns"])


def wait_for_log(ref, count: int, timeout_s: float = 10.0) -> None:
    """Until the server has logged `count` requests. A request still stalled when the server shuts down
    is logged as `cancelled`; tests that check how a stall ends let the stalls end first."""
    deadline = time.monotonic() + timeout_s
    while len(ref.send_log()) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def files_holding(root: Path, needle: bytes) -> list[Path]:
    """Every file under `root` whose bytes contain `needle`."""
    return [p for p in sorted(root.rglob("*")) if p.is_file() and needle in p.read_bytes()]


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def db_problems(path: Path) -> list[str]:
    """Every invariant of the results database that a crash at any moment must keep; [] when sound."""
    con = sqlite3.connect(path)
    try:
        problems = [f"integrity_check: {r[0]}" for r in con.execute("PRAGMA integrity_check") if r[0] != "ok"]
        problems += [f"foreign key: {tuple(r)}" for r in con.execute("PRAGMA foreign_key_check")]
        problems += [f"orphan requests of cell {r[0]}" for r in con.execute(
            "SELECT DISTINCT cell_id FROM requests WHERE cell_id NOT IN (SELECT id FROM cells)")]
        problems += [f"orphan samples of cell {r[0]}" for r in con.execute(
            "SELECT DISTINCT cell_id FROM samples WHERE cell_id NOT IN (SELECT id FROM cells)")]
        problems += [f"duplicate cell {tuple(r)}" for r in con.execute(
            "SELECT run_id, config_id, key, repeat, superseded FROM cells GROUP BY 1, 2, 3, 4, 5 HAVING COUNT(*) > 1")]
        for cell_id, status, summary in con.execute("SELECT id, status, summary_json FROM cells"):
            s = json.loads(summary)
            got = con.execute("SELECT COUNT(*), SUM(error_kind IS NOT NULL) FROM requests "
                              "WHERE cell_id=? AND phase='measure'", (cell_id,)).fetchone()
            cut = s.get("interrupted_cut", 0)      # an interrupted cell also stores the requests it cut off
            want = (s.get("num_prompts", 0) + cut, s.get("failed", 0) + cut) if status != "skipped" else (0, 0)
            if (got[0], got[1] or 0) != want:
                problems.append(f"cell {cell_id}: {got[0]} requests ({got[1]} failed) stored, summary says {want}")
        return problems
    finally:
        con.close()


class EngineKiller:
    """A thread that watches the deployment state directory and SIGKILLs the first engine that a sweep
    launches as soon as `ready_to_kill(state)` says so (the state dict holds pid, port and base_url).
    Every deployment seen is kept in `.seen`, in launch order."""

    def __init__(self, state_dir: Path, ready_to_kill: Callable[[dict], bool], timeout_s: float = 120) -> None:
        self.state_dir, self.ready_to_kill, self.timeout_s = state_dir, ready_to_kill, timeout_s
        self.seen: list[dict] = []
        self.killed: dict | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> "EngineKiller":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def _look(self) -> None:
        for path in sorted(self.state_dir.glob("*.json")) if self.state_dir.is_dir() else []:
            try:
                st = json.loads(path.read_text())
            except (OSError, ValueError):
                continue                      # being written
            if st["pid"] not in {s["pid"] for s in self.seen}:
                self.seen.append(st)

    def _watch(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            self._look()
            if self.killed is None and self.seen and self.ready_to_kill(self.seen[0]):
                os.kill(self.seen[0]["pid"], signal.SIGKILL)
                self.killed = self.seen[0]
            time.sleep(0.01)


class StubOpenAI:
    """A hostile OpenAI-compatible server on loopback (HTTP/1.0, one request per connection).

    `/v1/completions` either streams `text` as every token (with token_ids and usage, so lengths
    verify), or, with `echo_auth`, answers 401 quoting the request's Authorization header, as some
    gateways do. `/v1/models` lists `model`."""

    def __init__(self, model: str = "stub-model", text: str = " x", echo_auth: bool = False) -> None:
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):                 # noqa: N802 (http.server's name)
                if self.path != "/v1/models":
                    return self._send(404, b"{}")
                self._send(200, json.dumps({"object": "list", "data": [
                    {"id": stub.model, "object": "model", "max_model_len": 4096}]}).encode())

            def do_POST(self):                # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if stub.echo_auth:
                    msg = {"error": {"message": f"invalid key in '{self.headers.get('Authorization')}'"}}
                    return self._send(401, json.dumps(msg).encode())
                self._send(200, b"", "text/event-stream")
                for event in stub.stream(len(body["prompt"]), body["max_tokens"]):
                    time.sleep(0.005)          # a token every 5 ms, like a (fast) engine
                    self.wfile.write(event)
                    self.wfile.flush()

            def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def log_message(self, *args):
                pass

        self.model, self.text, self.echo_auth = model, text, echo_auth
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def stream(self, prompt_tokens: int, n: int) -> list[bytes]:
        out = []
        for i in range(n):
            chunk = {"choices": [{"index": 0, "text": self.text, "token_ids": [7],
                                  "finish_reason": "length" if i == n - 1 else None}]}
            if i == n - 1:
                chunk["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": n}
            out.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        return out + [b"data: [DONE]\n\n"]

    def __enter__(self) -> "StubOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def fake_profile(tmp: Path, monkeypatch) -> Path:
    """A llama.cpp profile whose command is fake_engine.py (10 ms ITL); each launch logs to tmp/logs."""
    (tmp / "model.gguf").write_bytes(b"GGUF")
    (tmp / "logs").mkdir()
    monkeypatch.setenv("FAKE_ENGINE_LOG_DIR", str(tmp / "logs"))
    monkeypatch.setenv("FAKE_ENGINE_ITL_MS", "10")
    profile = {"name": "fake", "description": "the reference server as an engine", "engine": "llamacpp",
               "model": {"path": str(tmp / "model.gguf")}, "command": [sys.executable, str(FAKE_ENGINE)],
               "readiness": {"timeout_s": 30, "interval_s": 0.05}}
    path = tmp / "fake.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def logged(tmp: Path, port: int) -> int:
    """Requests the fake engine on `port` has finished."""
    path = tmp / "logs" / f"{port}.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


# ---- a tokenbench process interrupted as a terminal interrupts it (tests/reliability/test_interrupt.py) ----

class Child:
    """`tokenbench ARGS` in its own process group (SIGINT reaches it and its workers, as Ctrl-C in a terminal
    does, and nothing else), its output read as it comes."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(tokenbench_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # not inherited ignored
        self.lines: list[str] = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()

    def wait_line(self, marker: str) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: any(marker in line for line in self.lines), WAIT_S):
                raise AssertionError(f"'{marker}' never came:\n{self.output}")

    def sigint(self) -> None:
        os.killpg(self.proc.pid, signal.SIGINT)

    def exit_code(self, timeout_s: float = WAIT_S) -> int:
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise AssertionError(f"tokenbench did not exit within {timeout_s} s:\n{self.output}") from None

    @property
    def output(self) -> str:
        time.sleep(0)
        return "".join(self.lines)


def completions(ref: ReferenceProcess) -> int:
    """Requests the server has taken so far (its arrival log)."""
    return sum(a["path"].endswith("/completions") for a in ref.arrivals()["arrivals"])


def wait_arrivals(ref: ReferenceProcess, n: int, child: Child) -> None:
    deadline = time.monotonic() + WAIT_S
    while completions(ref) < n:
        if child.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the server never took {n} requests:\n{child.output}")
        time.sleep(0.02)


def cells(db: Path) -> list[tuple]:
    """(key, status, superseded, summary) of every stored cell row, in the order stored."""
    con = sqlite3.connect(db)
    try:
        return [(k, st, sup, json.loads(s)) for k, st, sup, s in
                con.execute("SELECT key, status, superseded, summary_json FROM cells ORDER BY id")]
    finally:
        con.close()


def kill_when_cells(db, n: int, pid: int, done: threading.Event) -> None:
    """SIGKILL `pid` once `n` cells are committed and the next one has started sending."""
    while not done.is_set():
        try:
            con = sqlite3.connect(db)
            count = con.execute("SELECT COUNT(*) FROM cells").fetchone()[0]
            con.close()
        except sqlite3.Error:
            count = 0
        if count >= n:
            time.sleep(0.3)
            os.kill(pid, signal.SIGKILL)
            done.killed_at = time.monotonic()
            return
        time.sleep(0.02)
