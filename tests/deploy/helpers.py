"""Fake engines (tiny Python programs run through a profile's `command`) and profile files."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import psutil
import yaml

# A fake engine that never becomes ready: lets interrupts land during the readiness wait.
SLEEPER = "import time; print('fake engine up', flush=True); time.sleep(120)"
# One that ignores SIGTERM: teardown must escalate to SIGKILL.
STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ignoring SIGTERM', flush=True); time.sleep(120)")
# One that starts a grandchild in a new session (outside the process group) and sleeps.
FORKER = ("import subprocess, sys, time; "
          "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True); "
          "print('grandchild', p.pid, flush=True); time.sleep(120)")
CRASHER = "import sys; print('fatal: cannot load the weights (test marker)', flush=True); sys.exit(3)"


def write_profile(directory: Path, name: str = "fake", code: str | None = SLEEPER, **extra) -> Path:
    model = directory / "model.gguf"
    model.write_bytes(b"GGUF")
    data = {"name": name, "description": "a fake engine for tests", "engine": "llamacpp",
            "model": {"path": str(model)}, "readiness": {"timeout_s": 30, "interval_s": 0.05}}
    if code is not None:
        data["command"] = ["python", "-c", code]
    data.update(extra)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def states(directory: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))] if directory.is_dir() else []


def wait_for_state(directory: Path, timeout_s: float = 30) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = states(directory)
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no deployment state appeared in {directory}")


def gone(pid: int, timeout_s: float = 10) -> bool:
    """True once `pid` no longer runs (zombies count as gone)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def tokenbench_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "tokenbench.cli.main", *args]


def script(code: str) -> str:
    return textwrap.dedent(code).strip() + "\n"


class StubServer:
    """A loopback HTTP server answering GETs from a {path: (status, body)} table (body: dict or str)."""

    def __init__(self, routes: dict[str, tuple[int, object]]) -> None:
        import http.server
        import threading

        table = routes

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):               # noqa: N802 (http.server's name)
                status, body = table.get(self.path, (404, "not found"))
                data = (json.dumps(body) if not isinstance(body, str) else body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "StubServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
