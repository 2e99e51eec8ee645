"""The small things a first hour trips on: a bench run is named from its target and loads unless --name is
given, every default `--help` shows is the one a run takes, `sweep --fields` shows types and defaults (no
validator's repr), and README lists each document once and every benchmark script."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokenbench.cli import bench, flags
from tokenbench.cli.main import main
from tokenbench.spec.study import StudySpec

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = ["--base-url", "http://127.0.0.1:8000", "--input-len", "8", "--output-len", "4", "--concurrency", "1"]


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


@pytest.mark.parametrize("flag", [f for f in flags.SHARED if f.key != "name"], ids=lambda f: f.key)
def test_every_default_help_shows_is_the_one_a_bench_run_takes(flag):
    text, default = flags.describe(flag)
    option = next(p for p in bench.command.params if p.name == flag.dest)
    shown = re.search(r"\[default: ([^\]]*)\]", option.help or "")
    value = bench_spec(*MINIMAL)
    for part in flag.key.split("."):
        value = getattr(value, part)
    if shown:
        assert shown.group(1) == str(default) == str(value), flag.key
    elif isinstance(default, (int, float, str)) and not isinstance(default, bool):
        raise AssertionError(f"{flag.key}: default {default!r} not shown")


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
