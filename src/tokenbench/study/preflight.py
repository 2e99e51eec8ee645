"""What a study checks before anything is deployed (`preflight`): the tokenizer and dataset paths exist, length
histograms read, profiles load, contexts fit, and each cell's sockets fit the limit on open files.

Open sockets against what this process may open: every request in flight holds a connection of its own,
so a cell that runs N requests at once needs N descriptors besides the few the run itself keeps open
(the results database and its WAL, logs, the spool, the monitor, stdio). The soft limit (`ulimit -n`) is
raised toward the need, up to the hard limit, before anything is sent; a cell that still cannot fit is
refused before it runs, naming `ulimit -n` (a connection refused for want of descriptors would otherwise
read as a server that went away).

The client's ceiling (host/ceiling.py): where `calibrate --ceiling` stored one for this machine, a cell that
asks one client process for more streams (its requests at once over --workers) or more chunks per second (a
rate x its output tokens, one token a chunk at most) than that ceiling gets one warning before the run,
naming the ceiling and the --workers that would keep each process within it (`client_load`)."""

from __future__ import annotations

import errno
import math
import resource
from collections.abc import Callable
from pathlib import Path

from tokenbench.errors import UsageError
from tokenbench.host import ceiling as machine
from tokenbench.host.ceiling import Ceiling
from tokenbench.spec.bench import Workload
from tokenbench.study.plan import Plan, PlannedCell, check_context
from tokenbench.study.servers import expected_ctx, load_profile

RESERVE = 64       # descriptors kept for everything but the connections of the requests in flight
OUT_OF_FILES = (errno.EMFILE, errno.ENFILE)


def file_limit(want: int) -> tuple[int, int]:
    """This process's (soft, hard) limit on open files, the soft one raised toward `want` (at most hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
            soft = ceiling
        except (ValueError, OSError):
            pass
    return soft, hard


def check_sockets(key: str, at_once: int | None, workers: int = 1) -> None:
    """UsageError when cell `key`, running `at_once` requests at once over `workers` client processes (each
    with its own limit), needs more descriptors than a process may open even after raising its soft limit."""
    if at_once is None:
        return                          # an uncapped rate: as many as arrive (the client says so if it runs out)
    need = math.ceil(at_once / max(workers, 1)) + RESERVE
    soft, hard = file_limit(need)
    if soft == resource.RLIM_INFINITY or need <= soft:
        return
    hard_text = "unlimited" if hard == resource.RLIM_INFINITY else f"{hard:,}"
    raise UsageError(f"cell {key} runs {at_once:,} requests at once, each on a socket of its own, but a client process "
                     f"may open {soft:,} files (ulimit -n; hard limit {hard_text})",
                     f"lower --concurrency / --max-concurrency to at most {max(soft - RESERVE, 1) * max(workers, 1):,}"
                     f", spread it with --workers, or raise the limit: `ulimit -n {need}` in the shell that runs "
                     "tokenbench (above the hard limit: as root, or in /etc/security/limits.conf)")


def _asks(cell: PlannedCell, workers: int) -> tuple[int | None, float | None]:
    """Streams and chunks per second the cell asks of one client process (None: not known before it runs;
    a closed loop's chunks follow the server's speed)."""
    load, wl = cell.load, cell.workload
    streams = math.ceil(load.at_once / workers) if load.at_once else None
    rate = load.request_rate if load.request_rate and math.isfinite(load.request_rate) else None
    chunks = rate * wl.output_len / workers if rate and wl.output_len else None
    return streams, chunks


def client_load(p: Plan, ceiling: Ceiling | None) -> str | None:
    """One warning where cells ask one client process for more than this machine's client ceiling (None: within
    it, or no ceiling measured here)."""
    if ceiling is None:
        return None
    workers = p.spec.client.workers
    over = [(cell.key, *_asks(cell, workers)) for cell in p.cells]
    over = [(key, s, c) for key, s, c in over if max(ceiling.allows(s, c)) > 1]
    if not over:
        return None
    need = max(ceiling.workers_for(s, c) for _, s, c in over) * workers
    asked = ", ".join(f"{key} ({_asked(s, c)})" for key, s, c in dict.fromkeys(over))
    return (f"cell(s) {_cut(asked)} ask one client process for more than this machine's client ceiling, "
            f"{ceiling.streams:,} streams and {ceiling.chunks_per_s:,.0f} chunks/s (calibrate --ceiling, "
            f"{ceiling.measured_at}): its TTFT may then carry the client's own delay; add --workers {need} "
            f"(and as many free cores), or lower the load")


def _asked(streams: int | None, chunks: float | None) -> str:
    parts = ([f"{streams:,} streams"] if streams else []) + ([f"{chunks:,.0f} chunks/s"] if chunks else [])
    return " and ".join(parts) + " per process"


def _cut(text: str, n: int = 240) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _paths_exist(wl: Workload) -> None:
    """The workload's tokenizer directory and dataset file are there (a run is not stored for a missing one)."""
    given = (("--tokenizer", wl.tokenizer_path, "the model's Hugging Face directory (with tokenizer.json)"),
             ("--dataset-path", wl.dataset_path, "a local file (nothing is downloaded)"))
    for flag, path, what in given:
        if path and not Path(path).expanduser().exists():
            raise UsageError(f"{flag} {path}: no such file or directory", f"give {what}")


def preflight(p: Plan, warn: Callable[[str], None] = lambda line: None) -> None:
    """Everything that can be checked before a deploy: length histograms read, each cell's sockets fit the
    limit on open files, profiles load, contexts fit; `warn` is told where cells ask the client for more
    than this machine's client ceiling."""
    for wl in p.spec.workloads():
        _paths_exist(wl)
        if wl.draws is not None:
            from tokenbench.workload.lengths import Draws  # a length distribution: only a workload that draws
            Draws.of(wl)
    for cell in p.cells:
        load = cell.load
        check_sockets(cell.key, max(load.at_once or 0, load.warmup_width if load.warmup_count() else 0) or None,
                      p.spec.client.workers)
    said = client_load(p, machine.load())
    if said:
        warn(said)
    if not p.spec.target.profile:
        return
    for config in p.configs:
        profile = load_profile(p.spec.target, config)
        if p.spec.tune is None:               # a tune records such a config as not started, and goes on
            check_context(p, expected_ctx(profile), f"profile {profile.name} [{config.name}]")
