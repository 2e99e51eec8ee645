"""Every `tokenbench bench` / `tokenbench sweep` command line in the README and docs parses: no documented
flag is missing (docs cannot go stale), and `bench --help` lists nothing that `sweep --help` lacks."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokenbench.cli import bench, sweep

ROOT = Path(__file__).parents[2]
COMMANDS = {"bench": bench.command, "sweep": sweep.command}
LINE = re.compile(r"^(?:\.venv/bin/)?tokenbench (bench|sweep) (.*)$")


def documented() -> list[tuple[str, str, list[str]]]:
    out = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            m = LINE.match(line.strip())
            if m and not m.group(2).startswith(("SPEC", "--help")):
                args = shlex.split(m.group(2).split("#")[0].replace("$URL", "URL"))
                out.append((doc.name, m.group(1), args))
    return out


@pytest.mark.parametrize("doc,name,args", documented())
def test_documented_command_lines_parse(doc, name, args):
    COMMANDS[name].make_context(name, list(args))          # click raises on an unknown flag or a bad value


def test_there_are_documented_command_lines():
    assert len(documented()) >= 8


def test_every_option_of_bench_help_is_in_sweep_help():
    help_of = {n: CliRunner().invoke(c, ["--help"], terminal_width=200).output for n, c in COMMANDS.items()}
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_of["bench"]))
    assert len(options) > 50
    assert options <= set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_of["sweep"]))
