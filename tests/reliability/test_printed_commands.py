"""Every command tokenbench prints runs as printed. Two parts:

- the catalogue: each message that holds a command (a finished run's report, a failed cell's report and
  resume, an unknown run's `runs`, a peer's line given to `bench`, its translation, a help pointer, a spec
  key's `--fields`), made by a real scenario against the reference server, and the command pasted from it
  (between backticks, or the line translate prints) run through the CLI with its expected exit code;
- every command written as a literal in the source (a backticked `tokenbench ...` in a message, with its
  placeholders filled) is parsed as the CLI parses it: the command exists and takes those options.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import click
import pytest

import tokenbench
from tokenbench.cli.main import main
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import error_lines

BACKTICKED = re.compile(r"`(tokenbench [^`]+)`")


def pasted(text: str) -> list[list[str]]:
    """Each backticked tokenbench command in `text`, as a shell splits it, without the word `tokenbench`."""
    return [shlex.split(cmd)[1:] for cmd in BACKTICKED.findall(text)]


def one_command(text: str) -> list[str]:
    [cmd] = pasted(text)
    return cmd


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_each_printed_command_runs_as_printed(tmp_path, capsys):
    db = tmp_path / "my runs" / "r.db"              # a space in the path: the command must quote it
    small = ["--input-len", "8", "--output-len", "4", "--concurrency", "1", "--num-prompts", "3",
             "--warmup-requests", "0", "--db", str(db)]
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1)) as ref:
        # a finished bench: `report with ...`
        assert main(["bench", "--base-url", ref.url, *small]) == 0
        [stored] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("stored run")]
        assert main(one_command(stored)) == 0

        # an unknown run: `list runs with ...`
        assert main(["report", "no-such-run", "--db", str(db)]) != 0
        assert main(one_command(capsys.readouterr().err)) == 0

        # a peer's line given to bench, tokenbench's own --db among its options: the translate command, then
        # the bench command it prints
        line = ["guidellm", "benchmark", "--target", ref.url, "--rate-type", "concurrent", "--rate", "1",
                "--max-requests", "3", "--data", "prompt_tokens=8,output_tokens=4"]
        assert main(["bench", *line, "--db", str(db)]) == 2
        translate = one_command(error_lines(capsys.readouterr().err)[0])
        assert translate[0] == "translate" and translate.index("--db") < translate.index("--")
        assert main(translate) == 0
        [equivalent] = [x for x in capsys.readouterr().out.splitlines() if x.startswith("tokenbench bench")]
        assert main(shlex.split(equivalent)[1:]) == 0
        capsys.readouterr()

        # a peer's verb with --help: translate answers it
        assert main(["bench", "serve", "--help"]) == 2
        assert main(one_command(error_lines(capsys.readouterr().err)[0])) == 0
        assert "--random-input-len" in capsys.readouterr().out

    # a failed cell: the report and the resume its error names (the server that failed every request is
    # replaced by a sound one on the same port before the resume runs)
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1, faults={"http_500": 1.0})) as bad:
        assert main(["bench", "--base-url", bad.url, *small]) == 5
        port = bad.port
    report, resume = pasted(error_lines(capsys.readouterr().err)[0])
    assert report[0] == "report" and main(report) == 0
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1), port=port):
        assert main(resume) == 0
    capsys.readouterr()

    # a usage error points to the command's --help; a spec key's typo to `sweep --fields`
    assert main(["bench", "--no-such-option"]) == 2
    assert main(one_command(capsys.readouterr().err)) == 0
    assert main(["sweep", "--base-url", "http://127.0.0.1:9", "--pairs", "8:8", "--set", "nosuch=1"]) == 2
    assert main(one_command(capsys.readouterr().err)) == 0


def test_setup_check_exits_as_its_help_says(tmp_path, monkeypatch, capsys):
    """`setup X --check`: 1 while a step is not done (an empty cache), as its --help promises."""
    monkeypatch.setenv("TOKENBENCH_CACHE", str(tmp_path / "cache"))
    for name in ("vllm-cpu", "sglang-cpu", "transformers-serve", "litellm"):
        assert main(["setup", name, "--check"]) == 1, name
        assert "NOT DONE" in capsys.readouterr().err
    assert main(["setup", "vllm-cpu", "--help"]) == 0 and "exit 1 if any is not" in capsys.readouterr().out


# ---- every command literal in the source ----

SRC = Path(tokenbench.__file__).parent
FILLED = {"RUN": "20260101-000000-abcdef", "PROFILE": "cpu-smollm2-llamacpp", "NAME": "cpu-smollm2-llamacpp",
          "FILE": "captured.txt", "PATH": "x.db", "DIR": "x", "N": "2", "VAR": "KEY"}


def _strings(tree: ast.AST) -> list[str]:
    """Every string written in the module that is not a docstring; an f-string's fields read as {x}."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "{x}" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            out.append(node.value)
    return out


def source_commands() -> list[tuple[str, str]]:
    """(module, command) of every backticked `tokenbench ...` in a message (not in a docstring); one whose
    command word is computed (`tokenbench {kind} ...`, the store's resume and report) is run by the catalogue."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for text in _strings(ast.parse(path.read_text(encoding="utf-8"))):
            found += [(str(path.relative_to(SRC)), cmd) for cmd in BACKTICKED.findall(text)
                      if not cmd.startswith("tokenbench {x}")]
    return sorted(set(found))


def filled(cmd: str) -> list[str]:
    words = [w for w in shlex.split(cmd.replace("{x}", "x"))[1:] if w not in ("[--db", "PATH]")]
    return [FILLED.get(w, "x" if w == "..." else w) for w in words]


def test_the_catalogue_of_source_commands_is_not_empty():
    cmds = {c for _, c in source_commands()}
    assert {"tokenbench sweep --fields", "tokenbench deploy status"} <= cmds, cmds


@pytest.mark.parametrize("module,cmd", source_commands())
def test_every_command_in_a_message_parses_as_printed(module, cmd, monkeypatch, tmp_path):
    """Parsed as the CLI parses it, the commands' bodies not run (one would deploy or install)."""
    monkeypatch.setattr(click.Command, "invoke", lambda self, ctx: None)
    Path(FILLED["FILE"]).write_text("")               # a file argument must exist (the cwd is the test's own)
    assert main(filled(cmd)) == 0, (module, cmd)
