"""Who owns a running run: the pid and start time of the tokenbench process that runs it. A run still
marked "running" whose owner is gone (or whose pid now belongs to a later process) is "interrupted"."""

from __future__ import annotations

import os

import psutil

START_TOLERANCE_S = 1.0     # psutil's create_time is rounded differently across calls on some kernels


def me() -> tuple[int, float]:
    pid = os.getpid()
    return pid, psutil.Process(pid).create_time()


def alive(pid: int | None, started: float | None) -> bool:
    if pid is None:
        return True                    # runs stored before owners were recorded: cannot tell
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(proc.create_time() - started) < START_TOLERANCE_S
    except psutil.AccessDenied:
        return True                    # another user's process: it exists
    except (psutil.NoSuchProcess, ProcessLookupError):
        return False


def shown_status(row: dict) -> dict:
    """The row with status "interrupted" (and why) when it says running but its owner is gone."""
    if row.get("status") == "running" and not alive(row.get("owner_pid"), row.get("owner_started")):
        row["status"] = "interrupted"
        why = f"its process (pid {row.get('owner_pid')}) ended without finishing"
        row["message"] = f"{why}; {row['message']}" if row.get("message") else why
    return row
