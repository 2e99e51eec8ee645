"""Resumable, stamped set-up steps for engines that live in venvs of their own under the tokenbench cache.

Each step leaves a stamp holding its pins; a step whose stamp matches is skipped, a changed pin redoes it
and every step after it (a later step builds on the earlier ones). A lock file keeps two set-ups of the
same engine from racing. Subprocess output goes to a log file; notable lines and a heartbeat are said.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tokenbench.errors import DeployError

HEARTBEAT_S = 15.0
Say = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Step:
    name: str
    what: str
    cost: str                        # typical cost on a 2-core machine
    key: str                         # the pins it depends on; the stamp holds it
    action: Callable[[Say], None]
    stamp: Path
    also: Callable[[], bool] = lambda: True     # an outside condition the stamp cannot see

    def done(self) -> bool:
        return stamp_ok(self.stamp, self.key) and self.also()


def run_steps(steps: list[Step], lock: Path, say: Say, force: bool = False) -> list[tuple[str, str, float]]:
    """Run every step not done yet and every step after it (all with force).
    Returns (step, 'done' | 'skipped', seconds)."""
    report = []
    with locked(lock, say):
        redo = force
        for i, step in enumerate(steps, 1):
            if step.done() and not redo:
                say(f"[{i}/{len(steps)}] {step.name}: already done")
                report.append((step.name, "skipped", 0.0))
                continue
            say(f"[{i}/{len(steps)}] {step.name}: {step.what} (typically {step.cost})")
            t0, redo = time.monotonic(), True
            step.stamp.unlink(missing_ok=True)
            step.action(say)
            write_stamp(step.stamp, step.key)
            report.append((step.name, "done", time.monotonic() - t0))
            say(f"[{i}/{len(steps)}] {step.name}: done in {time.monotonic() - t0:.0f} s")
    return report


def run_logged(argv: list[str], log: Path, say: Say, hint: str, env: dict[str, str] | None = None) -> str:
    """Run argv, appending its output to `log`; a non-zero exit is a DeployError naming the log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    lines: list[str] = []
    started = last = time.monotonic()
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        for line in proc.stdout or ():
            out.write(line)
            lines.append(line)
            now = time.monotonic()
            if line.startswith(("Successfully", "ERROR", "[tokenbench]")) or now - last >= HEARTBEAT_S:
                say(f"    {now - started:4.0f} s  {line.strip()[:140]}")
                last = now
    if proc.wait() != 0:
        tail = "".join(lines[-5:]).strip().replace("\n", " | ")
        raise DeployError(f"set-up step failed (exit {proc.returncode}): {' '.join(argv[:6])} ...: {tail}",
                          f"see {log}; {hint}")
    return "".join(lines)


def stamp_ok(stamp: Path, key: str) -> bool:
    try:
        return stamp.read_text() == key
    except OSError:
        return False


def write_stamp(stamp: Path, key: str) -> None:
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key)


@contextmanager
def locked(path: Path, say: Say) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another set-up holds {path}; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
