"""Test servers in child processes, optionally pinned to CPUs: the reference server (`ReferenceProcess`,
`python -m tokenbench.testing.reference_server`) and the recording or flushing proxy (`ProxyProcess`)."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

from tokenbench.errors import DeployError
from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.recording_proxy import READY_PREFIX as PROXY_READY

CONFIG_ENV = "TOKENBENCH_REFERENCE_CONFIG"
READY_PREFIX = "REFERENCE_READY port="


class ChildServer:
    """A test server in a child process (optionally pinned to CPUs) that prints `<ready> N` once it listens on
    port N; a context manager. `module` is run with `python -m`, with `args` and `--host`, `--cpu`, and `--port`
    when one is asked (0: a free port)."""

    module = ""
    ready = ""
    name = "server"

    def __init__(self, cpu: int | set[int] | None = None, host: str = "127.0.0.1",
                 startup_timeout_s: float = 30.0, port: int = 0) -> None:
        self.host, self.timeout = host, startup_timeout_s
        self.cpus = None if cpu is None else ({cpu} if isinstance(cpu, int) else set(cpu))
        self.proc: subprocess.Popen | None = None
        self.port, self.url = port, ""
        self._tmp: tempfile.TemporaryDirectory | None = None

    def _start(self, args: list[str], env: dict[str, str] | None = None) -> None:
        assert self._tmp is not None
        self._stderr = Path(self._tmp.name) / "stderr.txt"
        argv = [sys.executable, "-m", self.module, *args, "--host", self.host]
        if self.port:
            argv += ["--port", str(self.port)]
        if self.cpus:
            argv += ["--cpu", ",".join(map(str, sorted(self.cpus)))]
        with self._stderr.open("w") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env={**os.environ, **(env or {})},
                                         text=True)
        try:
            self._wait_ready(time.monotonic() + self.timeout)
        except BaseException:
            self.close()
            raise

    def _fail(self, what: str) -> DeployError:
        tail = self._stderr.read_text(errors="replace").strip().splitlines()[-1:] or ["(no stderr)"]
        return DeployError(f"{self.name} {what}: {tail[0]}")

    def _wait_ready(self, deadline: float) -> None:
        proc = self.proc
        if proc is None or proc.stdout is None:
            raise self._fail("was not started")
        with selectors.DefaultSelector() as sel:  # the child prints the ready line, or exits (EOF)
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(max(deadline - time.monotonic(), 0)):
                raise self._fail("printed no ready line in time")
        line = proc.stdout.readline()
        if not line.startswith(self.ready):
            proc.wait(5)
            raise self._fail(f"did not start (exit {proc.returncode})")
        self.port = int(line[len(self.ready):])
        self.url = f"http://{f'[{self.host}]' if ':' in self.host else self.host}:{self.port}"
        self._wait_healthy(deadline)

    def _wait_healthy(self, deadline: float) -> None:
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise self._fail("never became healthy") from None
                time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop_child()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _stop_child(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()



class ReferenceProcess(ChildServer):
    """The reference server in a child process (optionally pinned to CPUs); a context manager.

    The config travels in an environment variable (never argv, which other users can read); the
    child binds a free port and prints `REFERENCE_READY port=N`. On exit the child gets SIGTERM and
    the send log is loaded: `.send_log()` -> list of per-request dicts.
    """

    module = "tokenbench.testing.reference_server"
    ready = READY_PREFIX
    name = "reference server"

    def __init__(self, config: ReferenceConfig, cpu: int | set[int] | None = None,
                 host: str = "127.0.0.1", startup_timeout_s: float = 30.0, port: int = 0) -> None:
        super().__init__(cpu, host, startup_timeout_s, port)
        self.config = config
        self._records: list[dict] | None = None

    def __enter__(self) -> ReferenceProcess:
        self._tmp = tempfile.TemporaryDirectory(prefix="tokenbench-ref-")
        if self.config.send_log is None:
            self.config = replace(self.config, send_log=str(Path(self._tmp.name) / "send_log.jsonl"))
        self._start([], {CONFIG_ENV: self.config.to_json()})
        return self

    def close(self) -> None:
        self._stop_child()
        if self._records is None and self.config.send_log and Path(self.config.send_log).exists():
            self._records = self.send_log()
        super().close()

    def arrivals(self, since: int = 0) -> dict:
        """The running server's arrival log from arrival `since` on (GET /arrivals?since=N)."""
        with urllib.request.urlopen(f"{self.url}/arrivals?since={since}", timeout=10) as answer:
            return json.loads(answer.read())

    def send_log(self) -> list[dict]:
        """Records written so far (complete after exit)."""
        if self._records is not None:
            return self._records
        text = Path(self.config.send_log).read_text(encoding="utf-8") if self.config.send_log else ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]


class ProxyProcess(ChildServer):
    """The recording proxy in a child process in front of `upstream`, flushing every `flush_ms` when given
    (testing/recording_proxy.py); a context manager."""

    module = "tokenbench.testing.recording_proxy"
    ready = PROXY_READY
    name = "proxy"

    def __init__(self, upstream: str, flush_ms: float | None = None, flush_mode: str = "interval",
                 cpu: int | set[int] | None = None) -> None:
        super().__init__(cpu)
        self.args = ["--upstream", upstream, "--flush-mode", flush_mode]
        self.args += ["--flush-ms", str(flush_ms)] if flush_ms else []

    def __enter__(self) -> ProxyProcess:
        self._tmp = tempfile.TemporaryDirectory(prefix="tokenbench-proxy-")
        self._start(self.args)
        return self
