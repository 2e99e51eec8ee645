"""Files tokenbench reads for the user (captures, imports, spec files): a device such as /dev/zero or
/dev/full would be read forever, so anything that is not a regular file, a directory where one is
allowed, a FIFO or `-` (standard input) is refused in one line before a byte is read."""

from __future__ import annotations

import stat
from pathlib import Path

from tokenbench.errors import UsageError

KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_readable(path: str | Path, what: str = "input", dir_ok: bool = False) -> None:
    """UsageError when `path` is a device, a socket, or (unless `dir_ok`) a directory."""
    if str(path) == "-":
        return
    try:
        mode = Path(path).stat().st_mode
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror}", "check the path and its permissions") from None
    kinds = KINDS if dir_ok else (*KINDS, (stat.S_ISDIR, "a directory"))
    for test, name in kinds:
        if test(mode):
            raise UsageError(f"{what} {path} is {name}, not a file to read", "give the path of a regular file")
