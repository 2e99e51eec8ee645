"""`tokenbench doctor [PROFILE] [--apply]`: host settings that move inference numbers, vs a profile."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table

from tokenbench.cli import console
from tokenbench.errors import TokenbenchError, UsageError
from tokenbench.host import doctor

STATUS_STYLE = {"ok": "green", "differs": "yellow", "unknown": "dim", "-": "dim"}


def _tuning(profile: str | None, overrides: tuple[str, ...]):
    if profile is None:
        return None, None
    from tokenbench.deploy.profiles import load_profile
    prof = load_profile(profile, overrides)
    return prof.name, prof.host_tuning


def _fmt(value) -> str:
    return "-" if value is None else str(value)


def _table(title: str, settings: list[doctor.Setting]) -> Table:
    table = Table(title=title)
    for col in ("setting", "current", "recommended", "status", "read from"):
        table.add_column(col)
    for s in settings:
        style = STATUS_STYLE[s.status]
        table.add_row(s.label, escape(_fmt(s.current)), escape(_fmt(s.recommended)), f"[{style}]{s.status}[/]",
                      escape(s.source))
    return table


@click.command("doctor")
@click.argument("profile", required=False)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="override a profile field")
@click.option("--apply", "apply_", is_flag=True, help="set what differs, where permitted; explain the rest")
@click.option("--json", "as_json", is_flag=True, help="print the values as JSON (what runs record)")
@click.option("--root", default="/", hidden=True, help="sysfs/procfs root (tests)")
def command(profile: str | None, overrides: tuple[str, ...], apply_: bool, as_json: bool, root: str) -> None:
    """Check CPU governor, swappiness, NUMA balancing, sched migration cost, /dev/shm and hugepages
    against PROFILE's host_tuning (a built-in name or a YAML file)."""
    name, tuning = _tuning(profile, overrides)
    if apply_ and tuning is None:
        raise UsageError("--apply needs a PROFILE whose host_tuning says what to set" if name is None else
                         f"profile '{name}' has no host_tuning section, so there is nothing to apply",
                         "e.g. tokenbench doctor study-a-minicpm5-sglang-flagos-910b4 --apply")
    settings = doctor.check(tuning, root)
    if as_json and not apply_:
        click.echo(json.dumps({"profile": name, "settings": doctor.as_records(settings)}, indent=2))
        return
    title = f"host settings vs profile '{name}'" if name else "host settings (give a PROFILE to compare)"
    console.out.print(_table(title, settings))
    if not apply_:
        return
    outcomes = doctor.apply(tuning, root)
    table = Table(title="--apply")
    for col in ("setting", "result"):
        table.add_column(col)
    for o in outcomes:
        table.add_row(doctor.LABELS[o.key], ("[green]" if o.changed else "") + escape(o.message))
    console.out.print(table)
    failed = [o for o in outcomes if not o.changed and not o.message.startswith("already")]
    if failed:
        raise TokenbenchError(f"{len(failed)} host setting(s) not applied: "
                              + ", ".join(doctor.LABELS[o.key] for o in failed),
                              "each reason is in the --apply table above")
