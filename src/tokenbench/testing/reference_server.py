"""The reference OpenAI-compatible streaming server: ground-truth timing for tokenbench's client.

Token i of a request admitted at t_adm is due at t_adm + ttft + i*itl (absolute perf_counter_ns
deadlines); a chunk of K tokens is written when its last token is due, and every write is stamped in
the send log. See docs/reference-server.md for the full contract (tokenizer, template, usage, faults).

This module runs the server (`start`, `serve`, `run_blocking`, `python -m` for ReferenceProcess's
child) and re-exports the public names of the modules beside it:

    config.py     ReferenceConfig
    tokenizer.py  tokenize, detokenize, chat_text (word tokenizer and chat template)
    handlers.py   the aiohttp handlers, over jobs.py (request -> Job), streams.py (chunks at
                  deadlines), clock.py (timerfd deadlines), admission.py (FIFO gate, prefill queue),
                  send_log.py (send log, arrival log), surface.py (/metrics, server info)
    load_model.py, prefix_cache.py, speculative.py   the pure models the handlers run
    expect.py     closed forms of the load model (what a load should measure, the highest load
                  meeting an SLO)
    process.py    ReferenceProcess (the server in a child process)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import resource
import signal
import sys
from dataclasses import dataclass

from aiohttp import web

from tokenbench.errors import TokenbenchError
from tokenbench.testing.clock import TimerFd as _TimerFd
from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.handlers import Server
from tokenbench.testing.process import CONFIG_ENV, READY_PREFIX, ReferenceProcess
from tokenbench.testing.replay import replay_app
from tokenbench.testing.tokenizer import SPECIAL, chat_text, detokenize, tokenize, word_id

__all__ = ["READY_PREFIX", "SPECIAL", "ReferenceConfig", "ReferenceProcess", "RunningReference",
           "chat_text", "detokenize", "run_blocking", "serve", "start", "tokenize", "word_id"]


@dataclass
class RunningReference:
    """A server started by `start()` in the current event loop."""

    url: str
    port: int
    _runner: web.AppRunner
    _server: Server

    def arrivals(self, since: int = 0) -> dict:
        """The arrival log from arrival `since` on: what GET /arrivals?since=N answers."""
        return self._server.arrivals.since(since)

    async def close(self) -> None:
        await self._runner.cleanup()
        await self._server.close()


async def start(config: ReferenceConfig, host: str = "127.0.0.1", port: int = 0) -> RunningReference:
    """Listen on host:port (0 = a free port) in the running loop; `await ref.close()` stops it."""
    srv = Server(config, _TimerFd)  # looked up here, so a test can replace the timer
    app = replay_app(config) if config.recording else srv.application()
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, backlog=4096).start()
    except OSError:
        await runner.cleanup()
        await srv.close()
        raise
    bound = runner.addresses[0][1]
    return RunningReference(f"http://{f'[{host}]' if ':' in host else host}:{bound}", bound, runner, srv)


async def serve(config: ReferenceConfig, host: str, port: int, on_ready=None) -> None:
    """Run until SIGINT or SIGTERM, then close cleanly (the send log is complete on return)."""
    ref = await start(config, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if on_ready is not None:
        on_ready(ref)
    try:
        await stop.wait()
    finally:
        await ref.close()


def run_blocking(config: ReferenceConfig, host: str, port: int, on_ready=None) -> None:
    """`serve` in a fresh loop: uvloop (a dependency; asyncio's loop where it cannot be imported)."""
    try:
        import uvloop
        factory = uvloop.new_event_loop
    except ImportError:
        factory = None
    _raise_file_limit()

    def ready(ref: RunningReference) -> None:
        gc.collect()
        gc.freeze()  # what startup built is never collected again: shorter GC pauses while serving
        if on_ready is not None:
            on_ready(ref)

    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(config, host, port, ready))


def _raise_file_limit() -> None:
    """1024 streams need more than the common soft limit of 1024 descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else hard
    if soft < want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def _child_main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tokenbench.testing.reference_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cpu", default="", help="comma-separated CPUs to pin to")
    args = parser.parse_args(argv)
    if args.cpu:
        os.sched_setaffinity(0, {int(c) for c in args.cpu.split(",")})

    def ready(ref: RunningReference) -> None:
        print(f"{READY_PREFIX}{ref.port}", flush=True)

    try:
        run_blocking(ReferenceConfig.from_json(os.environ[CONFIG_ENV]), args.host, args.port, ready)
    except (TokenbenchError, OSError) as exc:
        print(f"error: {exc.one_line() if isinstance(exc, TokenbenchError) else exc}", file=sys.stderr)
        sys.exit(getattr(exc, "exit_code", 1))


if __name__ == "__main__":
    _child_main()
