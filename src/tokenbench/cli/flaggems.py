"""`tokenbench flaggems LOG [--profile P]`: which operators FlagGems served, beside the routing."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from tokenbench.cli import console
from tokenbench.errors import UsageError
from tokenbench.logs import flaggems


def _env(profile: str | None, overrides: tuple[str, ...]) -> tuple[str | None, dict[str, str] | None]:
    if profile is None:
        return None, None
    from tokenbench.deploy.profiles import load_profile
    prof = load_profile(profile, overrides)
    return prof.name, dict(prof.env)


def _read(log: str) -> str:
    path = Path(log)
    if not path.is_file():
        raise UsageError(f"FlagGems log '{log}' not found",
                         "copy it out of the container first, e.g. docker cp <container>:/tmp/gems_aten.txt .")
    return path.read_text(errors="replace")


@click.command("flaggems")
@click.argument("log")
@click.option("--profile", default=None, help="profile whose env gives the blacklist and per-op routing")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="override a profile field")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
def command(log: str, profile: str | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Report the FlagGems operator log LOG (written with SGLANG_FLAGGEMS_RECORD=1 at
    SGLANG_FLAGGEMS_LOG_PATH): operators served, log lines each, blacklist and per-op routing."""
    name, env = _env(profile, overrides)
    rep = flaggems.report(_read(log), env)
    if as_json:
        click.echo(json.dumps({"profile": name, **rep.to_dict()}, indent=2))
        return
    if not rep.ops:
        raise UsageError(f"'{log}' holds no FlagGems operator records ({rep.total_lines} lines)",
                         "check SGLANG_FLAGGEMS_RECORD=1 and SGLANG_FLAGGEMS_LOG_PATH, and send a request first")
    console.out.print(_table(rep, log))
    _footer(rep, name)


def _table(rep: flaggems.GemsReport, log: str) -> Table:
    table = Table(title=f"FlagGems operators in {log}")
    for col in ("operator", "layer", "backend", "module", "log lines", "note"):
        table.add_column(col, justify="right" if col == "log lines" else "left")
    for o in rep.ops:
        note = "[red]served although blacklisted[/]" if o.blacklisted else ""
        table.add_row(escape(o.op), o.layer, o.backend, escape(o.module), str(o.lines), note)
    return table


def _footer(rep: flaggems.GemsReport, name: str | None) -> None:
    say = console.out.print
    say(f"{len(rep.ops)} operators, {rep.total_lines} lines ({rep.unparsed_lines} not FlagGems records)")
    if rep.log_once is not False:
        say("counts are log lines: with SGLANG_FLAGGEMS_LOG_ONCE=1 (the plugin default) each logging statement "
            "is written once, so they say which operators were served, not how often"
            + ("" if rep.log_once else "; no profile given, so the setting is unknown"))
    if name is None:
        say("no --profile: blacklist and per-op routing not shown")
        return
    say(f"blacklist (SGLANG_FL_FLAGOS_BLACKLIST, kept on the native path): {', '.join(rep.blacklist) or '(none)'}")
    if rep.whitelist:
        say(f"whitelist (SGLANG_FL_FLAGOS_WHITELIST): {', '.join(rep.whitelist)}")
    routing = "; ".join(f"{op} -> {' | '.join(kinds)}" for op, kinds in rep.per_op.items()) or "(none)"
    say(f"per-op routing of fused ops (SGLANG_FL_PER_OP, Layer 2; the plugin keeps these out of this log): "
        f"{routing}")
    if rep.served_blacklisted:
        say(f"[red]blacklisted but present in the log:[/] {', '.join(rep.served_blacklisted)}")
