"""`tokenbench translate -- <their command line>`: which tool the line is for (by its program), read as
that tool reads it, then written as `tokenbench bench` options and the differences in meaning."""

from __future__ import annotations

import re
import shlex

from tokenbench.errors import UsageError
from tokenbench.peers import aiperf, argv, guidellm, sglang, tables, vllm
from tokenbench.peers.equivalent import Equivalent

TOOLS = "vllm bench serve, benchmark_serving.py, python -m sglang.bench_serving, aiperf profile, guidellm benchmark, guidellm run"


def words_of(line: list[str]) -> list[str]:
    """The command's words: one pasted string (with shell line continuations) is split as a shell would;
    leading VAR=value assignments are left out."""
    if len(line) == 1 and " " in line[0].strip():
        try:
            line = shlex.split(line[0].replace("\\\n", " "))
        except ValueError as exc:
            raise UsageError(f"cannot split the command line: {exc}", "check its quotes") from None
    words = [w for w in line if w not in ("\\", "\n")]
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words = words[1:]
    return words


def translate(line: list[str]) -> Equivalent:
    """The tokenbench equivalent of a peer's command line; UsageError (exit 2) when it has none."""
    words = words_of(line)
    program, rest = _program(words)
    if program == "vllm":
        return vllm.translate(argv.parse(rest, tables.VLLM))
    if program == "vllm-script":
        return vllm.translate(argv.parse(rest, tables.VLLM), old_script=True)
    if program == "sglang":
        return sglang.translate(argv.parse(rest, tables.SGLANG))
    if program == "aiperf":
        return aiperf.translate(argv.parse(rest, tables.AIPERF))
    if program == "guidellm-run":
        return guidellm.equivalent(guidellm.from_run(argv.parse(rest, tables.GUIDELLM_RUN)))
    return guidellm.equivalent(guidellm.from_benchmark(argv.parse(rest, tables.GUIDELLM)))


PROGRAMS = {("vllm", "bench", "serve"): "vllm", ("aiperf", "profile"): "aiperf",
            ("guidellm", "benchmark", "run"): "guidellm", ("guidellm", "benchmark"): "guidellm",
            ("guidellm", "run"): "guidellm-run", ("benchmark_serving.py",): "vllm-script"}
MODULES = {"sglang.bench_serving": "sglang", "sglang.benchmark.serving": "sglang"}


def _program(words: list[str]) -> tuple[str, list[str]]:
    """(tool, the words after its program and verb): `vllm bench serve`, `python3 path/benchmark_serving.py`,
    `python3 -m sglang.bench_serving`, `aiperf profile`, `guidellm benchmark [run]`, `guidellm run`."""
    head = [w.rsplit("/", 1)[-1] for w in words[:3]]
    if head and re.fullmatch(r"python[0-9.]*", head[0]):
        if len(head) > 2 and head[1] == "-m" and head[2] in MODULES:
            return MODULES[head[2]], words[3:]
        head, words = head[1:], words[1:]
    for n in (3, 2, 1):
        if tuple(head[:n]) in PROGRAMS:
            return PROGRAMS[tuple(head[:n])], words[n:]
    shown = " ".join(words[:3]) or "(nothing)"
    raise UsageError(f"'{shown}' is not a command line tokenbench can translate", f"give one of: {TOOLS}")
