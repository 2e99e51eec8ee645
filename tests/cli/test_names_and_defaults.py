"""The small things a first hour trips on: a bench run is named from its target and loads unless --name is
given, every default `--help` shows is the one a run takes, `sweep --fields` shows types and defaults (no
validator's repr), and README lists each document once and every benchmark script."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click
import pytest

from tokenbench.cli import bench, flags, sweep, tune
from tokenbench.cli.main import cli, main
from tokenbench.spec.study import StudySpec

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = ["--base-url", "http://127.0.0.1:8000", "--input-len", "8", "--output-len", "4", "--concurrency", "1"]


COMMANDS: dict[str, click.Command] = {"bench": bench.command, "sweep": sweep.command, "tune": tune.command}


def bench_spec(*args: str) -> StudySpec:
    return bench.build_spec(bench.command.make_context("bench", list(args)).params)


@pytest.mark.parametrize("args,name", [
    (MINIMAL, "127.0.0.1:8000 c=1"),
    ([*MINIMAL[:6], "--concurrency", "1,8,32"], "127.0.0.1:8000 c=1,8,32"),
    ([*MINIMAL[:6], "--request-rate", "4,0.5", "--max-concurrency", "64"], "127.0.0.1:8000 rate=4,0.5/s,max=64"),
    ([*MINIMAL[:6], "--max-concurrency", "16"], "127.0.0.1:8000 c=16"),
    (["--host", "10.0.0.2", "--port", "30000", *MINIMAL[2:]], "10.0.0.2:30000 c=1"),
    ([*MINIMAL, "--name", "mine"], "mine"),
    ([*MINIMAL, "--label", "theirs"], "theirs"),
])
def test_a_bench_run_is_named_from_its_target_and_loads(args, name):
    assert bench_spec(*args).name == name


def test_a_sweep_of_a_profile_is_named_from_the_profile_and_loads():
    spec = StudySpec.model_validate({"target": {"profile": "profiles/my-engine.yaml"}, "pairs": [[8, 4]],
                                     "users": [1, 4], "workload": {"kind": "sessions", "turns": 2}})
    assert spec.name == "my-engine users=1,4"


URL = "http://127.0.0.1:8000"


def _spec_of(name: str) -> StudySpec:
    """The spec each spec-building command makes of its minimal arguments, every other option left out."""
    if name == "bench":
        return bench_spec(*MINIMAL)
    if name == "sweep":
        kw = dict(sweep.command.make_context("sweep", ["--base-url", URL, "--pairs", "8:4", "--concurrency", "1"]).params)
        spec = sweep.build_spec(kw.pop("spec_file"), list(kw.pop("overrides")), kw)
    else:
        kw = dict(tune.command.make_context("tune", ["reference-sglang", "--input-len", "8", "--output-len", "4", "--slo",
                                                     "ttft:p99<=3000", "--vary", "args.max-running-requests=4,16"]).params)
        spec = tune.build_spec(kw.pop("profile"), kw.pop("axes"), kw.pop("profile_sets"), list(kw.pop("overrides")), kw)
    assert spec is not None
    return spec


SPEC_COMMANDS = {"bench": flags.SHARED, "sweep": sweep.FLAGS, "tune": tune.FLAGS}


def _commands(group: click.Group = cli, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    for name in group.list_commands(click.Context(group)):
        cmd = group.get_command(click.Context(group), name)
        assert cmd is not None
        out += _commands(cmd, (*path, name)) if isinstance(cmd, click.Group) else [((*path, name), cmd)]
    return out


def _shown(cmd: click.Command, path: tuple[str, ...]) -> list[tuple[click.Option, str]]:
    """Each option whose --help shows `[default: X]`, with X (a range's `; x>=0` left out)."""
    ctx = click.Context(cmd, info_name=path[-1])
    out = []
    for p in cmd.params:
        record = p.get_help_record(ctx) if isinstance(p, click.Option) else None
        m = re.search(r"\[default: ([^\]]*)\]", record[1]) if record else None
        if m and isinstance(p, click.Option):
            out.append((p, m.group(1).split("; ")[0]))
    return out


SHOWN = [(path, p, text) for path, cmd in _commands() for p, text in _shown(cmd, path)]
FROM_SPEC = {(name, f.dest) for name, fl in SPEC_COMMANDS.items() for f in fl}


@pytest.mark.parametrize("command,flag", [(c, f) for c, fl in SPEC_COMMANDS.items() for f in fl if f.key != "name"],
                         ids=lambda x: x if isinstance(x, str) else x.key)
def test_every_default_help_shows_is_the_one_the_run_takes(command, flag):
    """bench, sweep and tune: a flag's shown default is its spec field's, and the spec the command builds has it."""
    text, default = flags.describe(flag)
    option = next(p for p in COMMANDS[command].params if p.name == flag.dest)
    shown = re.search(r"\[default: ([^\]]*)\]", option.help or "")
    value: object = _spec_of(command)
    for part in flag.key.split("."):
        value = getattr(value, part)
    if shown:
        assert shown.group(1) == str(default) == str(value), flag.key
    elif isinstance(default, (int, float, str)) and not isinstance(default, bool):
        raise AssertionError(f"{flag.key}: default {default!r} not shown")


def _as_shown(p: click.Option, value: object) -> str:
    """A value as click shows a default: a two-way flag by the name that gives it, a list joined."""
    if p.is_flag and p.secondary_opts:
        return (p.opts[0] if value else p.secondary_opts[0]).lstrip("-")
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)


OTHERS = [x for x in SHOWN if (x[0][0], x[1].name) not in FROM_SPEC]


@pytest.mark.parametrize("path,option,text", OTHERS, ids=[f"{' '.join(path)} {p.name}" for path, p, _ in OTHERS])
def test_every_other_default_any_help_shows_is_the_one_its_command_gets(path, option, text):
    """Every command's options outside the spec: `[default: X]` is what the command receives without it."""
    ctx = click.Context(COMMANDS.get(path[0]) or cli, info_name=path[-1])
    assert text == _as_shown(option, option.type_cast_value(ctx, option.get_default(ctx))), (path, option.name)


def test_every_command_with_a_shown_default_is_checked():
    assert {path[0] for path, _, _ in SHOWN} >= {"bench", "sweep", "tune", "calibrate", "agree", "report", "compare",
                                                 "export", "reference-server", "monitor", "deploy", "demo"}


@pytest.mark.parametrize("argv,hint", [(["bench", "--bogus"], "tokenbench bench --help"),
                                       (["no-such-command"], "tokenbench --help"),
                                       (["deploy", "down", "--grace", "x"], "tokenbench deploy down --help")])
def test_a_usage_error_names_the_program_whatever_runs_main(capsys, monkeypatch, argv, hint):
    """In-process (pytest, `python -c`, another tool) the hint still names `tokenbench`, never argv[0]."""
    for argv0 in ("/usr/lib/python3/dist-packages/pytest.py", "-c"):
        monkeypatch.setattr(sys, "argv", [argv0, *argv])
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].endswith(f"(see `{hint}`)"), err


def test_bench_help_says_how_a_run_is_named(capsys):
    assert main(["bench", "--help"]) == 0
    out = re.sub(r"\s+", " ", capsys.readouterr().out)
    assert "default: the target and the loads" in out and "[default: sweep]" not in out


def test_sweep_fields_shows_types_and_defaults_not_validators(capsys):
    assert main(["sweep", "--fields"]) == 0
    out = capsys.readouterr().out
    assert "<function" not in out and "0x" not in out and "AfterValidator" not in out and "Annotated" not in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 4}
    assert "dict[str, list[Any]]" in rows["vary"]
    assert "poisson | constant" in rows["arrival"] and "poisson" in rows["arrival"].split("│")[4]
    assert "600.0" in rows["target.timeout_s"]


def test_readme_lists_each_document_once_and_every_benchmark():
    readme = (ROOT / "README.md").read_text()
    listed = readme.split("## Documentation", 1)[1]
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert listed.count(f"- [docs/{doc.name}]") + listed.count(f"; [docs/{doc.name}]") \
            + listed.count(f", [docs/{doc.name}]") == 1, doc.name
    for script in sorted((ROOT / "bench").glob("*.py")):
        assert f"`bench/{script.name}`" in listed, script.name
