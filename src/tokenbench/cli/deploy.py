"""`tokenbench deploy up|status|logs|down`: servers from profiles, as local processes."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import click
from rich.table import Table

from tokenbench.cli import console, options
from tokenbench.cli.servers import SET_HELP, print_facts, say
from tokenbench.client import api
from tokenbench.deploy import engines, lifecycle, profiles, readiness, state
from tokenbench.errors import DeployError, UsageError
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.ports import PortRange


@click.group("deploy")
def command() -> None:
    """Start, inspect and stop inference servers described by profiles."""


@command.command("up")
@click.argument("profile")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--foreground", is_flag=True, help="stay attached; Ctrl-C or SIGTERM stops the server")
@click.option("--dry-run", is_flag=True, help="print the command line that would start the server, and exit")
@click.option("--compose", is_flag=True, help="with --dry-run, print a compose file (container profiles)")
@click.option("--otlp-listen", metavar="HOST:PORT", help="the engine exports each request's OpenTelemetry span to "
              "an OTLP receiver at HOST:PORT (vLLM, SGLang); `bench --base-url` against this deployment then "
              "listens there and joins them")
@options.PORTS
def up(profile: str, overrides: tuple[str, ...], foreground: bool, dry_run: bool, compose: bool,  # noqa: PLR0913
       otlp_listen: str | None, ports: PortRange | None) -> None:
    """Start PROFILE (a built-in name or a YAML file) and wait until it is ready; print its URL."""
    prof = profiles.load_profile(profile, overrides)
    if otlp_listen:
        prof = _traced(prof, otlp_listen)
    if dry_run or compose:
        click.echo(_dry_run(prof, compose, ports))
        return
    _refuse_duplicate(prof.name)
    how = lifecycle.LaunchOptions(stable_port=True, ports=ports)
    if foreground:
        _foreground(prof, how)
        return
    with lifecycle.stop_on_signal() as live:
        dep = lifecycle.start(prof, say=say, on_launch=live.append, how=how)
    print_facts(dep.facts)
    console.err.print(f"running in the background (pid {dep.state.pid}); stop it with "
                      f"`tokenbench deploy down {prof.name}`")
    click.echo(dep.base_url)


def _traced(prof: Profile, address: str) -> Profile:
    traced = engines.traced(prof, address)
    if traced is None:
        raise UsageError(f"profile '{prof.name}': tokenbench cannot point {prof.engine}'s spans at a receiver",
                         "drop --otlp-listen (vLLM and SGLang export them)")
    return traced


def _dry_run(prof: Profile, compose: bool, ports: PortRange | None) -> str:
    port = lifecycle.choose_port(prof, stable=True, within=ports)
    if prof.runs_in != "container":
        if compose:
            raise UsageError(f"profile '{prof.name}' runs locally; --compose is for container profiles",
                             "drop --compose")
        return shlex.join(lifecycle.command_for(prof, port))
    from tokenbench.deploy import container

    return container.render_compose(prof, port) if compose else \
        container.format_command(lifecycle.command_for(prof, port))


def _refuse_duplicate(name: str) -> None:
    directory = state.state_dir()
    running = [s for s in state.load_all(directory) if s.profile == name and state.is_alive(s)]
    if running:
        raise UsageError(f"profile '{name}' is already deployed at {running[0].base_url}",
                         f"use it, or stop it first with `tokenbench deploy down {name}`")


def _foreground(prof: Profile, how: lifecycle.LaunchOptions) -> None:
    with lifecycle.deployed(prof, say=say, how=how) as dep:
        print_facts(dep.facts)
        click.echo(dep.base_url)
        console.err.print("serving in the foreground; Ctrl-C stops it")
        try:
            while (code := dep.exit_code()) is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            return                      # the normal way to stop; `deployed` tears down
        raise readiness.failure(f"the engine exited with code {code}", dep.log_path, "read the log lines above")


@command.command("status")
def status() -> None:
    """List deployments recorded in the state directory, with their health."""
    directory = state.state_dir()
    states = state.load_all(directory)
    if not states:
        console.err.print(f"no deployments recorded in {directory}")
        return
    table = Table(title=f"deployments ({directory})")
    for col in ("id", "profile", "url", "pid", "state", "log"):
        table.add_column(col, no_wrap=col in ("id", "url"))
    for s in states:
        table.add_row(s.id, s.profile, s.base_url, str(s.pid), _health(s), s.log_path)
    console.out.print(table)
    for s in states:                    # plain lines to paste (`--base-url` also takes the id or profile)
        click.echo(f"{s.id} {s.base_url}")


def _health(s: state.DeploymentState) -> str:
    if not state.is_alive(s):
        return "exited (run `deploy down` to clear)"
    code, _ = api.call(s.base_url, "/health", timeout=2, quiet=True)
    return "ready" if code == 200 else f"running, /health {code or 'unreachable'}"


@command.command("logs")
@click.argument("name", required=False)
@click.option("-n", "--lines", type=click.IntRange(min=1), default=50, show_default=True)
def logs(name: str | None, lines: int) -> None:
    """Print the last lines of a deployment's log (NAME: its id or profile; optional if only one)."""
    target = _one(name)
    click.echo(readiness.log_tail(Path(target.log_path), lines))


def _one(name: str | None) -> state.DeploymentState:
    found = state.select(state.state_dir(), name)
    if not found:
        raise UsageError("no deployments are recorded", "start one with `tokenbench deploy up PROFILE`")
    if len(found) > 1:
        raise UsageError(f"{len(found)} deployments match", f"name one of: {', '.join(s.id for s in found)}")
    return found[0]


@command.command("down")
@click.argument("name", required=False)
@click.option("--all", "all_", is_flag=True, help="stop every recorded deployment")
@click.option("--grace", type=click.FloatRange(min=0), default=lifecycle.GRACE_S, show_default=True,
              help="seconds between SIGTERM and SIGKILL")
def down(name: str | None, all_: bool, grace: float) -> None:
    """Stop a deployment (NAME: its id or profile; optional if only one), or --all."""
    directory = state.state_dir()
    if name and all_:
        raise UsageError("give a NAME or --all, not both", "e.g. tokenbench deploy down --all")
    targets = state.select(directory, name) if (name or all_) else state.load_all(directory)
    if not targets:
        console.err.print(f"nothing to stop: no deployments recorded in {directory}")
        return
    if len(targets) > 1 and not (name or all_):
        raise UsageError(f"{len(targets)} deployments are recorded",
                         f"name one of: {', '.join(s.id for s in targets)}, or use --all")
    failed = []
    for s in targets:
        try:
            lifecycle.stop_state(s, directory, grace)
            console.err.print(f"stopped {s.id} (pid {s.pid})")
        except DeployError as exc:
            failed.append(exc)
    if failed:
        raise failed[0]
