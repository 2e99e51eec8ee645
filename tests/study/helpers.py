"""Shared by the sweep tests, and a client ceiling record for the tests that store one."""

import psutil

from tokenbench.host.ceiling import Ceiling
from tokenbench.store.db import Store


def engines() -> set[int]:
    """pids of running llama.cpp launchers (other tests' session-scoped engines may be among them)."""
    return {p.pid for p in psutil.process_iter(["cmdline"])
            if "tokenbench.local_engines.llamacpp_server" in " ".join(p.info["cmdline"] or [])}


def ceiling(streams: int = 16, chunks: float = 1000.0, bounded: bool = True) -> Ceiling:
    return Ceiling(streams=streams, chunks_per_s=chunks, bounded=bounded, failed_at=streams * 2 if bounded else None,
                   ttft_error=0.012, delivery_ms=0.2, client_cpu_percent=40.0, client_cpus="1",
                   load="reference TTFT 100 ms, ITL 20 ms, 50 output tokens, 1 per chunk",
                   measured_at="2026-01-02T03:04:05+00:00", tool_version="0.0.1")


def ids(db) -> set[str]:
    """The ids of the runs stored in `db` now."""
    return {r.id for r in Store(db).runs()}


def added(db, before: set[str]) -> str:
    """The one run stored since `before` (ids(db) taken before the call): the call's own, whatever else the
    database holds."""
    [new] = [r.id for r in Store(db).runs() if r.id not in before]
    return new
