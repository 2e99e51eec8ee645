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


# ---- a peer's line given to `bench` instead of `translate` ----

TABLES = (("vllm bench serve", tables.VLLM), ("python3 -m sglang.bench_serving", tables.SGLANG),
          ("aiperf profile", tables.AIPERF), ("guidellm benchmark", tables.GUIDELLM),
          ("guidellm run", tables.GUIDELLM_RUN))
PROGRAM_TABLES = {"vllm": tables.VLLM, "vllm-script": tables.VLLM, "sglang": tables.SGLANG, "aiperf": tables.AIPERF,
                  "guidellm": tables.GUIDELLM, "guidellm-run": tables.GUIDELLM_RUN}
VERBS = {"serve": "vllm bench serve", "profile": "aiperf profile", "benchmark": "guidellm benchmark",
         "run": "guidellm run"}


def pasted(words: list[str], own: dict[str, bool], positional: bool = False) -> str | None:
    """Why `words`, given to `tokenbench bench` (or sweep), are another tool's command line, with the
    translate command to run instead (one line); None when nothing says so. A line is a peer's when it
    starts with a peer's program or verb (`vllm bench serve`, `serve`, `python3 -m sglang.bench_serving`,
    `guidellm benchmark` ...; `positional`: the command takes an argument of its own, so only its options
    are looked at), or when an option is none of `own` (the command's spellings, each with whether it takes a
    value) but one of a peer's. The translate command keeps tokenbench's own options apart, before `--`."""
    if not positional and words and not words[0].startswith("-"):
        found = _by_program(words, own)
        if found is not None:
            return found
    for word in words:
        name = _name(word)
        if not name or name in own:
            continue
        tool = next((t for t, table in TABLES if name in table.names), None)
        if tool is not None:
            return _suggest(f"{name} is {tool}'s option, not tokenbench's", tool, words, own)
    return None


def _name(word: str) -> str:
    return "--" + word.partition("=")[0][2:].replace("_", "-") if word.startswith("--") else ""


def _by_program(words: list[str], own: dict[str, bool]) -> str | None:
    try:
        program, _ = _program(words)
    except UsageError:
        verb = VERBS.get(words[0])
        return _suggest(f"'{words[0]}' is {verb}'s verb", verb, words[1:], own) if verb else None
    tool = next(t for t, table in TABLES if table is PROGRAM_TABLES[program])
    return _suggest(f"'{' '.join(words[:3])}' is another tool's command", "", words, own, tool)


def _apart(words: list[str], own: dict[str, bool], tool: str) -> tuple[list[str], list[str]]:
    """(tokenbench's own options with their values, the peer's words): an option of the command that the peer's
    tool does not have is tokenbench's (`--db`), and goes before `--` in the translate command."""
    names = dict(TABLES)[tool].names
    mine: list[str] = []
    theirs: list[str] = []
    taking = False
    for word in words:
        if taking:
            mine.append(word)
            taking = False
            continue
        name = _name(word)
        if name in own and name not in names:
            mine.append(word)
            taking = own[name] and "=" not in word
        else:
            theirs.append(word)
    return mine, theirs


def _suggest(why: str, program: str, words: list[str], own: dict[str, bool], tool: str = "") -> str:
    mine, theirs = _apart(words, own, tool or program)
    line = " ".join(filter(None, [program, shlex.join(theirs)]))
    before = f"{shlex.join(mine)} " if mine else ""
    what = ("for the options of it tokenbench reads" if {"--help", "-h"} & set(theirs)
            else "for the tokenbench command that measures what it would")
    return f"{why}: run `tokenbench translate {before}-- {line}` {what}"


def help_of(line: list[str]) -> str | None:
    """What `translate -- TOOL ... --help` answers: the tool's options tokenbench reads (as that tool reads
    them) and where each is explained; None for a line that does not ask for help."""
    words = words_of(line)
    if not any(w in ("--help", "-h") for w in words):
        return None
    program, _ = _program(words)
    tool, table = next((t, tb) for t, tb in TABLES if tb is PROGRAM_TABLES[program])
    return (f"tokenbench translate reads a {tool} line as {tool} itself does; its options: "
            f"{' '.join(sorted(table.names))}. Each one's tokenbench meaning and every difference: docs/peers.md; "
            f"give the line without --help for its tokenbench command: tokenbench translate -- {tool} ...")
