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
        """Cause and fix on one line: newlines echoed from user input are shown escaped."""
        text = f"{self.message} -- {self.hint}" if self.hint else self.message
        return text.replace("\r", "\\r").replace("\n", "\\n")


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


class MeasurementError(TokenbenchError):
    """A cell ran but its numbers cannot be trusted (length mismatch, too many failures)."""

    exit_code = 5


class StoreError(TokenbenchError):
    """The results database is missing, locked or of an unknown schema."""

    exit_code = 6


class Interrupted(TokenbenchError):
    """SIGINT/SIGTERM: everything already measured has been kept."""

    exit_code = 130
