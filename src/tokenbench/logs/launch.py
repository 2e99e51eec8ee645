"""Why an engine did not start, read from its log: its command not found, out of memory, a port in use, a flag
the engine does not know, a value it refuses, an accelerator error (Ascend ACL and runtime codes), a missing
model; or, where no line tells, only what was seen (it exited, or was not ready in time). Pure: text in, a
typed cause out. An engine that started and then died (`Death`) is read the same way, from the log it left.

A cause is named only on a line that says it; that line is kept as the evidence. The patterns come from the
engines' own messages (real logs in tests/fixtures/launch/: llama.cpp, vLLM, Python's argparse) and, for
Ascend, from CANN's runtime error table (`rt_error_codes.h`: ACL_ERROR_RT_* = 107xxx parameter, 207xxx
resource, 507xxx runtime errors) and the `E?nnnn` error ids its log lines begin with (EL0004: failed to
allocate memory). docs/metrics.md, "Tune", lists them.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

Cause = Literal["command_missing", "out_of_memory", "port_in_use", "unsupported_flag", "rejected_value", "accelerator_error",
                "model_missing", "context_too_small", "not_ready", "exited"]
CAUSES: tuple[Cause, ...] = ("command_missing", "out_of_memory", "port_in_use", "unsupported_flag", "rejected_value",
                             "accelerator_error", "model_missing", "context_too_small", "not_ready", "exited")
FIRST: tuple[Cause, ...] = ("command_missing", "out_of_memory", "port_in_use", "unsupported_flag")   # told before an accelerator code
RETRIED: tuple[Cause, ...] = ("port_in_use", "not_ready", "exited")   # a relaunch may fare otherwise
EVIDENCE_CHARS = 300

# Ascend ACL / runtime codes whose meaning is memory (rt_error_codes.h; EL0004 "Failed to allocate memory")
MEMORY_CODES = frozenset({"207001", "EL0004"})

_I = re.IGNORECASE
PATTERNS: tuple[tuple[Cause, re.Pattern[str]], ...] = (
    # the engine's program itself: tokenbench could not execute it (deploy/local.py), or a shell did not find it
    ("command_missing", re.compile(r"cannot start '[^']*': (?:No such file or directory|Permission denied|"
                                   r"Exec format error)|: command not found$|exec: \S+: not found", _I)),
    ("out_of_memory", re.compile(r"out of memory|OutOfMemoryError|insufficient memory|failed to allocate|"
                                 r"cannot allocate memory|std::bad_alloc|\bMemoryError\b|no available memory for "
                                 r"the cache blocks|KV cache is needed, which is larger than the available|not enough memory|"
                                 r"available memory\b.*\bless than (?:the )?requested", _I)),
    ("port_in_use", re.compile(r"address already in use|EADDRINUSE|\[Errno 98\]|(?:couldn't|could not|failed to) "
                               r"bind|port \d+ on \S+ is (?:already in use|held by)", _I)),
    ("unsupported_flag", re.compile(r"unrecognized arguments?:|unknown (?:argument|option|flag)|no such option|"
                                    r"has no parameter '|invalid choice:", _I)),
    ("rejected_value", re.compile(r"Value error, |\bValueError: |error: argument \S+: invalid|"
                                  r"must be (?:greater|less|at least|at most|positive|between)", _I)),
    ("model_missing", re.compile(r"model file '.*' does not exist|bundled model '.*' is not installed|"
                                 r"(?:model|weights|checkpoint)\b.*(?:not found|does not exist|No such file)", _I)),
)
# an Ascend code on a line: `acl Error, code: 207001`, `error code is 507015`, `EL0004: [PID: ...]`
ACL_CODE = re.compile(r"(?:acl|aclnn|npu|ascend|\brt)\w*\b.*?(?:error )?code(?: is)?\s*[:=]?\s*(\d{6})\b", _I)
ERROR_ID = re.compile(r"(?:^|\s)(E[A-Z]\d{4}):\s")
EXIT = re.compile(r"exited with code (-?\d+)")


class LaunchFailure(BaseModel):
    """A server config that did not start: the cause, the line that tells it (`evidence`: "" where no line
    does), an accelerator's error code where the log gave one, the engine's exit code, tokenbench's one-line
    error and the engine log it was read from."""

    model_config = ConfigDict(frozen=True)
    cause: Cause
    evidence: str = ""
    code: str | None = None
    exit_code: int | None = None
    message: str = ""
    log: str | None = None

    @property
    def retried(self) -> bool:
        """Whether a relaunch may start it (a port taken by another process, a slow or unexplained start);
        out of memory, an unknown flag or a refused value start no better a second time."""
        return self.cause in RETRIED


class Death(BaseModel):
    """A server config's engine that started and then died: on which of the config's launches in the run
    (tokenbench's number), during which cell (its key), whether that cell was the sustain cell at a capacity
    search's answer (a tune's confirmation of the config, on a fresh launch), and why, read from the end of
    the log it left as a failed launch's cause is (`failure`: the cause, the line that tells it, the exit code)."""

    model_config = ConfigDict(frozen=True)
    launch: int | None = None
    cell: str = ""
    sustain: bool = False
    failure: LaunchFailure


def _clip(line: str) -> str:
    line = line.strip()
    return line if len(line) <= EVIDENCE_CHARS else line[:EVIDENCE_CHARS - 3] + "..."


def accelerator_code(lines: list[str]) -> tuple[str, str] | None:
    """(code, line) of the first Ascend error code in the lines: a memory code first, else the first code."""
    found = [(m.group(1), line) for line in lines for m in (ACL_CODE.search(line) or ERROR_ID.search(line),) if m]
    return next((f for f in found if f[0] in MEMORY_CODES), found[0] if found else None)


def _matched(lines: list[str], causes: tuple[Cause, ...]) -> tuple[Cause, str] | None:
    for cause, pattern in PATTERNS:
        line = next((x for x in lines if pattern.search(x)), None) if cause in causes else None
        if line is not None:
            return cause, line
    return None


def _seen(message: str) -> Cause:
    return "not_ready" if "was not ready" in message else "exited"


def too_small(message: str) -> LaunchFailure:
    """A config whose context cannot hold the workload's sequences: tokenbench's own check, before a launch
    (or on the context the server reported)."""
    return LaunchFailure(cause="context_too_small", evidence=_clip(message), message=message)


def classify(log: str, message: str = "", path: str | None = None) -> LaunchFailure:
    """The cause of a failed launch from the engine's log text and tokenbench's error message."""
    lines = [x for x in (log + "\n" + message).splitlines() if x.strip()]
    exit_code = int(m.group(1)) if (m := EXIT.search(message)) else None
    base = {"exit_code": exit_code, "message": message, "log": path}
    code = accelerator_code(lines)
    if code is not None and code[0] in MEMORY_CODES:
        return LaunchFailure(cause="out_of_memory", evidence=_clip(code[1]), code=code[0], **base)
    hit = _matched(lines, FIRST)
    if hit is None and code is not None:
        hit = ("accelerator_error", code[1])
    hit = hit or _matched(lines, CAUSES)
    if hit is None:
        return LaunchFailure(cause=_seen(message), code=code and code[0], **base)
    return LaunchFailure(cause=hit[0], evidence=_clip(hit[1]), code=code[0] if code else None, **base)
