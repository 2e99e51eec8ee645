"""Ctrl-C works in every phase of a run, not only while a cell sends (test_interrupt.py has the measured phase,
the warmup in-process, and the save): a real SIGINT to a real `tokenbench bench` process, sent at a moment
the test observes (the server took a connection or a request), never after a sleep:

- while it asks the server which model it serves (a server that accepts and never answers);
- while it makes the cell's requests (a chat workload's template probe, which a server never answers: work
  the event loop cannot interrupt, so Ctrl-C raises there at once instead of waiting for the probe's own
  60 s timeout);
- in the warmup, with real processes.

Each ends with exit code 130, one error line that says "interrupted", no traceback, and the database sound."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import WAIT_S, Child, db_problems, error_lines, wait_arrivals

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


class Mute:
    """A TCP server that accepts connections and never answers; `accepted` is set at the first one."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.accepted.set()

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


def assert_interrupted(child: Child) -> None:
    assert child.exit_code() == 130, child.output
    [line] = error_lines(child.output)
    assert "interrupted" in line and "Traceback" not in child.output, child.output


def bench_args(url: str, tmp_path, *extra: str) -> list[str]:
    return ["bench", "--base-url", url, "--input-len", "8", "--output-len", "4", "--concurrency", "2",
            "--num-prompts", "4", "--db", str(tmp_path / "r.db"), *extra]


def test_sigint_while_asking_the_server_what_it_serves(tmp_path):
    mute = Mute()
    try:
        child = Child(*bench_args(mute.url, tmp_path))
        assert mute.accepted.wait(WAIT_S), child.output
        child.sigint()
        assert_interrupted(child)
    finally:
        mute.close()


def test_sigint_while_the_cell_s_requests_are_made(tmp_path):
    """The chat probe (workload/chat.py) is a blocking call made while the cell's prompts are built; the
    server holds its headers for 10 minutes, past the probe's own timeout."""
    slow = ReferenceConfig(ttft_ms=1, itl_ms=1, faults={"slow_headers": 1.0}, slow_headers_s=600)
    with ReferenceProcess(slow) as ref:
        child = Child(*bench_args(ref.url, tmp_path, "--api", "chat"))
        wait_arrivals_on(ref, "/chat/completions", child)
        child.sigint()
        assert_interrupted(child)
        # the chat probe's failure is not shown (the capability probe's own lines are expected)
        assert "cannot reach" not in child.output and "probe failed" not in child.output
    assert db_problems(tmp_path / "r.db") == []


def wait_arrivals_on(ref: ReferenceProcess, path: str, child: Child) -> None:
    deadline = time.monotonic() + WAIT_S
    while not any(a["path"].endswith(path) for a in ref.arrivals()["arrivals"]):
        assert child.proc.poll() is None and time.monotonic() < deadline, child.output
        time.sleep(0.02)


def test_sigint_in_the_warmup(tmp_path):
    with ReferenceProcess(ReferenceConfig(ttft_ms=3000, itl_ms=1)) as ref:       # nothing finishes for 3 s
        child = Child(*bench_args(ref.url, tmp_path, "--warmup-requests", "2"))
        wait_arrivals(ref, 2, child)                 # both warmup requests sent, none finished
        child.sigint()
        assert_interrupted(child)
    assert db_problems(tmp_path / "r.db") == []
