"""What a study checks before anything is deployed (`preflight`): the tokenizer and dataset paths exist, length
histograms read, profiles load, contexts fit, and each cell's sockets fit the limit on open files.

Open sockets against what this process may open: every request in flight holds a connection of its own,
so a cell that runs N requests at once needs N descriptors besides the few the run itself keeps open
(the results database and its WAL, logs, the spool, the monitor, stdio). The soft limit (`ulimit -n`) is
raised toward the need, up to the hard limit, before anything is sent; a cell that still cannot fit is
refused before it runs, naming `ulimit -n` (a connection refused for want of descriptors would otherwise
read as a server that went away)."""

from __future__ import annotations

import errno
import math
import resource
from pathlib import Path

from tokenbench.errors import UsageError
from tokenbench.spec.bench import Workload
from tokenbench.study.plan import Plan, check_context
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


def _paths_exist(wl: Workload) -> None:
    """The workload's tokenizer directory and dataset file are there (a run is not stored for a missing one)."""
    given = (("--tokenizer", wl.tokenizer_path, "the model's Hugging Face directory (with tokenizer.json)"),
             ("--dataset-path", wl.dataset_path, "a local file (nothing is downloaded)"))
    for flag, path, what in given:
        if path and not Path(path).expanduser().exists():
            raise UsageError(f"{flag} {path}: no such file or directory", f"give {what}")


def preflight(p: Plan) -> None:
    """Everything that can be checked before a deploy: length histograms read, each cell's sockets fit the
    limit on open files, profiles load, contexts fit."""
    for wl in p.spec.workloads():
        _paths_exist(wl)
        if wl.draws is not None:
            from tokenbench.workload.lengths import Draws  # a length distribution: only a workload that draws
            Draws.of(wl)
    for cell in p.cells:
        load = cell.load
        check_sockets(cell.key, max(load.at_once or 0, load.warmup_width if load.warmup_count() else 0) or None,
                      p.spec.client.workers)
    if not p.spec.target.profile:
        return
    for config in p.configs:
        profile = load_profile(p.spec.target, config)
        if p.spec.tune is None:               # a tune records such a config as not started, and goes on
            check_context(p, expected_ctx(profile), f"profile {profile.name} [{config.name}]")
