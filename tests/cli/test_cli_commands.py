"""Each command is found by its name, and finding it loads only its own command module."""

import subprocess
import sys

import click

from tokenbench.cli.main import COMMAND_MODULES, Root, cli


def test_every_command_is_found_by_its_name():
    ctx = click.Context(cli)
    names = [Root._load(m).name for m in COMMAND_MODULES]
    assert [cli.get_command(ctx, n).name for n in names] == names
    assert cli.get_command(ctx, "no-such-command") is None


def test_finding_bench_loads_no_other_command():
    code = ("import sys, click; from tokenbench.cli.main import cli; cli.get_command(click.Context(cli), 'bench'); "
            "print(' '.join(m for m in sys.modules if m.startswith('tokenbench.cli.')))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert "tokenbench.cli.bench" in loaded
    assert not loaded & {f"tokenbench.cli.{m}" for m in COMMAND_MODULES if m != "bench"}
