"""The one error tree. Every user-facing failure is a TokenbenchError with a cause and a fix.

The CLI renders these in one place (cli/main.py) as a single line and maps them to exit codes.
"""

from __future__ import annotations


class TokenbenchError(Exception):
    """Base of all expected failures: `message` says what went wrong, `hint` how to fix it."""

    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """Cause and fix on one line: line breaks echoed from user input are shown escaped."""
        return escape_breaks(f"{self.message} -- {self.hint}" if self.hint else self.message)


# every character str.splitlines() breaks at (a terminal or a log reader may too)
_BREAKS = str.maketrans({c: c.encode("unicode_escape").decode() for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


def escape_breaks(text: str) -> str:
    return text.translate(_BREAKS)


class UsageError(TokenbenchError):
    """Bad flags, bad values, bad spec files."""

    exit_code = 2


class SpecError(UsageError):
    """A spec or profile file that does not validate."""


class TargetError(TokenbenchError):
    """The server under test cannot be reached, refuses us, or answers wrongly."""

    exit_code = 3


class DeployError(TokenbenchError):
    """A server could not be started, became unhealthy, or could not be stopped."""

    exit_code = 4


class EngineFailed(DeployError):
    """An engine tokenbench launched exited, or was not ready in time; `log` is its log file, where the cause
    is read from (logs/launch.py)."""

    def __init__(self, message: str, hint: str = "", log: str | None = None) -> None:
        super().__init__(message, hint)
        self.log = log


class MeasurementError(TokenbenchError):
    """A cell ran but its numbers cannot be trusted (length mismatch, too many failures)."""

    exit_code = 5


class StoreError(TokenbenchError):
    """The results database is missing, locked or of an unknown schema."""

    exit_code = 6


class OutputError(StoreError):
    """A result file or the database could not be written (disk full, read-only, refused path);
    the message says what was kept where."""


class GateNotPassed(TokenbenchError):
    """The regression gate did not pass; its summary, JSON, JUnit XML and report were written first. Each
    outcome has its own exit code, so a CI job can branch on it."""


class GateRegressed(GateNotPassed):
    """At least one figure regressed beyond --min-effect, at the gate's stated false-alarm rate."""

    exit_code = 10


class GateInconclusive(GateNotPassed):
    """No figure regressed, but some could not be decided with the runs given (run more)."""

    exit_code = 11


class GateRefused(GateNotPassed):
    """No figure regressed, but some were not judged: the two sides' runs cannot be compared there (their
    prefix-cache states or host load differ, a cell failed, or the client's delays moved a figure)."""

    exit_code = 12


class Interrupted(TokenbenchError):
    """SIGINT/SIGTERM: everything already measured has been kept."""

    exit_code = 130


class InternalError(TokenbenchError):
    """A bug: an exception that is not one of the above (rendered in one line; --debug shows it)."""

    exit_code = 70


# exit code -> meaning; docs/reliability.md lists the same table (a test keeps them equal)
EXIT_CODES: dict[int, str] = {
    0: "success",
    1: "other expected failure",
    UsageError.exit_code: "bad flags, values, spec files or output paths",
    TargetError.exit_code: "the server under test cannot be reached, refuses us, or answers wrongly",
    DeployError.exit_code: "a server could not be started, became unhealthy, or could not be stopped",
    MeasurementError.exit_code: "a cell ran but failed or cannot be trusted (results were kept)",
    StoreError.exit_code: "results database or output file problem (the message says what was kept where)",
    GateRegressed.exit_code: "gate: a figure regressed (at the gate's stated false-alarm rate)",
    GateInconclusive.exit_code: "gate: nothing regressed, but some figure is undecided (run more)",
    GateRefused.exit_code: "gate: nothing regressed, but some figure was refused (the sides cannot be compared there)",
    InternalError.exit_code: "internal error (a bug; rerun with --debug and report it)",
    Interrupted.exit_code: "interrupted (Ctrl-C or SIGTERM); results measured so far were kept",
}
