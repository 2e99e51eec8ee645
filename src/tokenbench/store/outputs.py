"""Every file tokenbench writes for the user (JSON results, CSV/JSON exports, reports, recovery files)
goes through here: written to a temporary file beside the target, flushed, then renamed into place, so a
reader, a crash or a full disk never sees half a file and never loses the previous one.

An output path must be a regular file or not exist yet: a symbolic link, a directory, a device (such as
/dev/full), a FIFO or a socket is refused before anything is measured. `-` means standard output.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tokenbench.errors import OutputError, UsageError

STDOUT = "-"
KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
         (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _what(mode: int) -> str | None:
    for test, name in KINDS:
        if test(mode):
            return name
    return None


def check(path: str | Path, flag: str = "--output", probe: bool = False) -> None:
    """UsageError unless `path` is `-`, a regular file, or a new file in a directory (or a directory
    still to be created). `probe`: also create and remove a temporary file beside it, so a read-only or
    unwritable directory is refused before anything is measured."""
    if str(path) == STDOUT:
        return
    p = Path(path)
    _check_kind(p, flag)
    if probe:
        _probe(p, flag)


def _check_kind(p: Path, flag: str) -> None:
    fix = f"give {flag} a regular file path (or - for standard output)"
    if p.is_symlink():
        raise UsageError(f"{flag} {p} is a symbolic link; tokenbench does not write through links", fix)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        return _check_parent(p, flag, fix)
    except OSError as exc:
        raise UsageError(f"{flag} {p}: {exc.strerror}", fix) from None
    kind = _what(mode)
    if kind:
        raise UsageError(f"{flag} {p} is {kind}, not a regular file; refusing to replace it", fix)


def _probe(p: Path, flag: str) -> None:
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise UsageError(f"{flag} {p}: cannot write in {p.parent}: {reason(exc)}",
                         f"choose a writable place for {flag}") from None


def _check_parent(p: Path, flag: str, fix: str) -> None:
    for parent in p.parents:
        if parent.is_dir():
            return
        if parent.exists() or parent.is_symlink():
            raise UsageError(f"{flag} {p}: {parent} is not a directory", fix)


def write_text(path: str | Path, text: str | Iterable[str], flag: str = "--output") -> Path | None:
    """Atomic write (see the module doc) of a text or of its pieces in order (a large result is never
    one string in memory); `-` prints to stdout. OutputError says why it failed; the target is then
    exactly as it was before."""
    pieces = [text] if isinstance(text, str) else text
    if str(path) == STDOUT:
        for piece in pieces:
            sys.stdout.write(piece)
        sys.stdout.flush()
        return None
    check(path, flag)
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        os.fchmod(fd, _mode_for(target))           # mkstemp's 0600 would hide results from teammates
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {reason(exc)}", "free space or choose another path") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for piece in pieces:
                handle.write(piece)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {target}: {reason(exc)}", "free space or choose another path") from None
        raise
    return target


def append_line(path: str | Path, line: str, flag: str) -> None:
    """Append one line (a JSONL record) and flush it to disk, as other tools append to their result files;
    the file is created with the umask's mode. OutputError says why it failed."""
    check(path, flag)
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as handle:
            handle.write(line.rstrip("\n") + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise OutputError(f"cannot append to {target}: {reason(exc)}", "free space or choose another path") from None


def create(path: Path) -> None:
    """Create `path` empty if it does not exist, with the umask's mode (an existing file is left alone)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))


def _mode_for(target: Path) -> int:
    """The mode a plain `open(target, "w")` would give: the replaced file's own, else 0666 less the umask.
    tokenbench writes no secret (keys are read from the environment or a file, never stored), so no
    output is private by itself; a user who wants that sets the umask (or the file's mode)."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        return 0o666 & ~umask()


def umask() -> int:
    """The process's umask, read without changing it (Linux: /proc/self/status; elsewhere set and restored)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    current = os.umask(0o022)
    os.umask(current)
    return current


def reason(exc: OSError) -> str:
    """'No space left on device (ENOSPC)'."""
    name = errno.errorcode.get(exc.errno or 0)
    return f"{exc.strerror} ({name})" if name else str(exc)


def first_writable(text: str, candidates: list[Path]) -> tuple[Path | None, list[str]]:
    """Write `text` to the first candidate that takes it; (path or None, why each earlier one failed)."""
    failures: list[str] = []
    for path in candidates:
        try:
            write_text(path, text, "recovery file")
            return path, failures
        except (OutputError, UsageError) as exc:
            failures.append(exc.message)
    return None, failures
