"""Each command is found by its name, and finding it loads only its own command module; the root's help
lists every command with its own first line and loads none of them."""

import subprocess
import sys

import click
import pytest

from tokenbench.cli.main import COMMANDS, cli, load


def test_every_command_is_found_by_its_name():
    ctx = click.Context(cli)
    names = [load(e.module).name for e in COMMANDS]
    assert names == [e.name for e in COMMANDS]
    assert [cli.get_command(ctx, n).name for n in names] == names
    assert cli.get_command(ctx, "no-such-command") is None


@pytest.mark.parametrize("entry", COMMANDS, ids=[e.name for e in COMMANDS])
def test_the_root_table_says_what_each_command_says_of_itself(entry):
    """The root's help is printed from the table; a command whose help changed makes the table wrong here."""
    assert entry.summary == load(entry.module).get_short_help_str(limit=10**6)


def _loaded_by(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code`."""
    probe = f"{code}\nimport sys; print(' '.join(sys.modules))"
    return set(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split())


def test_finding_bench_loads_no_other_command():
    loaded = _loaded_by("import click; from tokenbench.cli.main import cli; cli.get_command(click.Context(cli), 'bench')")
    assert "tokenbench.cli.bench" in loaded
    assert not loaded & {f"tokenbench.cli.{e.module}" for e in COMMANDS if e.module != "bench"}


HEAVY = ("pydantic", "numpy", "rich", "msgspec", "uvloop", "asyncio", "sqlite3", "yaml", "psutil")


def test_the_root_help_loads_no_command_and_nothing_heavy():
    """`tokenbench --help` stays a start of click and the entry point: no command module, none of the
    libraries a command brings (their import was 0.8 s of the root help's CPU; docs/architecture.md)."""
    loaded = _loaded_by("from tokenbench.cli.main import main\nimport contextlib, io\n"
                        "with contextlib.redirect_stdout(io.StringIO()): main(['--help'])")
    ours = sorted(m for m in loaded if m.startswith("tokenbench"))
    assert ours == ["tokenbench", "tokenbench.cli", "tokenbench.cli.main", "tokenbench.errors"]
    assert not {m.split(".")[0] for m in loaded} & set(HEAVY)


def test_listing_runs_executes_no_numpy(tmp_path, monkeypatch):
    """`tokenbench runs` reads stored summaries and computes nothing: numpy (a quarter of its start-up) stays
    unloaded (tokenbench/lazy.py); the run it lists has a stored cell, so its verdict was judged."""
    from bench import scale
    monkeypatch.setattr(scale, "SUMMARY_SAMPLE", 20)
    monkeypatch.setattr(scale, "WRITE_MAX", 20)
    scale.synthetic_row(20, tmp_path / "r.db", output_len=4, streams=2)
    code = ("from tokenbench.cli.main import main\nimport contextlib, io\nout = io.StringIO()\n"
            f"with contextlib.redirect_stdout(out): main(['runs', '--db', {str(tmp_path / 'r.db')!r}])\n"
            "assert '1/1' in out.getvalue(), out.getvalue()")
    loaded = _loaded_by(code)
    assert "tokenbench.cli.runs" in loaded
    assert not {m for m in loaded if m.startswith("numpy.")}
