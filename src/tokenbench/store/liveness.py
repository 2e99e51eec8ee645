"""Who owns a running run: the pid and start time of the tokenbench process that runs it. A run still
marked "running" whose owner is gone (or whose pid now belongs to a later process) is "interrupted"."""

from __future__ import annotations

import os
from dataclasses import replace

from tokenbench.store.rows import RunRow

# psutil is imported where an owner is looked up (a run that says "running", the run's own lock): its
# import was 22 ms of `tokenbench runs`, which reads no owner when no run is running (docs/architecture.md)

START_TOLERANCE_S = 1.0     # psutil's create_time is rounded differently across calls on some kernels


def me() -> tuple[int, float]:
    import psutil
    pid = os.getpid()
    return pid, psutil.Process(pid).create_time()


def alive(pid: int | None, started: float | None) -> bool:
    if pid is None:
        return True                    # runs stored before owners were recorded: cannot tell
    import psutil
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(proc.create_time() - started) < START_TOLERANCE_S
    except psutil.AccessDenied:
        return True                    # another user's process: it exists
    except (psutil.NoSuchProcess, ProcessLookupError):
        return False


def shown_status(run: RunRow) -> RunRow:
    """The run with status "interrupted" (and why) when it says running but its owner is gone."""
    if run.status != "running" or alive(run.owner_pid, run.owner_started):
        return run
    why = f"its process (pid {run.owner_pid}) ended without finishing"
    return replace(run, status="interrupted", message=f"{why}; {run.message}" if run.message else why)
