"""`tokenbench doctor [PROFILE] [--apply]`: host settings that move inference numbers, vs a profile."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table

from tokenbench.cli import console
from tokenbench.errors import TokenbenchError, UsageError
from tokenbench.host import doctor, nvidia
from tokenbench.spec.deploy_profile import HostTuning, Profile

STATUS_STYLE = {"ok": "green", "differs": "yellow", "unknown": "dim", "-": "dim"}


def _profile(profile: str | None, overrides: tuple[str, ...]) -> Profile | None:
    if profile is None:
        return None
    from tokenbench.deploy.profiles import load_profile
    return load_profile(profile, overrides)


def _fmt(value) -> str:
    return "-" if value is None else str(value)


def _table(title: str, settings: list[doctor.Setting] | list[nvidia.GpuCheck]) -> Table:
    table = Table(title=title)
    for col in ("setting", "current", "recommended", "status", "read from", "fix"):
        table.add_column(col)
    for s in settings:
        style = STATUS_STYLE[s.status]
        table.add_row(s.label, escape(_fmt(s.current)), escape(_fmt(s.recommended)), f"[{style}]{s.status}[/]",
                      escape(s.source), escape(s.fix) if s.status != "ok" else "")
    return table


@click.command("doctor")
@click.argument("profile", required=False)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="override a profile field")
@click.option("--apply", "apply_", is_flag=True, help="set what differs, where permitted; explain the rest")
@click.option("--json", "as_json", is_flag=True, help="print the values as JSON (what runs record)")
@click.option("--root", default="/", hidden=True, help="sysfs/procfs root (tests)")
def command(profile: str | None, overrides: tuple[str, ...], apply_: bool, as_json: bool, root: str) -> None:
    """Check CPU governor, swappiness, NUMA balancing, sched migration cost, /dev/shm and hugepages
    against PROFILE's host_tuning (a built-in name or a YAML file); on an NVIDIA host (or profile) the GPUs
    too: driver and CUDA, persistence, clocks, power limit, ECC, MIG, topology (nvidia-smi)."""
    prof = _profile(profile, overrides)
    name, tuning = (prof.name, prof.host_tuning) if prof else (None, None)
    if apply_ and tuning is None:
        raise UsageError("--apply needs a PROFILE whose host_tuning says what to set" if name is None else
                         f"profile '{name}' has no host_tuning section, so there is nothing to apply",
                         "e.g. tokenbench doctor study-a-minicpm5-sglang-flagos-910b4 --apply")
    settings = doctor.check(tuning, root)
    if apply_ and tuning is not None:
        console.out.print(_table(f"host settings vs profile '{name}'", settings))
        _apply(tuning, root)
        return
    gpus = nvidia.check(prof) if nvidia.applies(prof) else []
    if as_json:
        click.echo(json.dumps({"profile": name, "settings": doctor.as_records(settings),
                               "gpus": nvidia.as_records(gpus)}, indent=2))
        return
    title = f"host settings vs profile '{name}'" if name else "host settings (give a PROFILE to compare)"
    console.out.print(_table(title, settings))
    if gpus:
        console.out.print(_table("NVIDIA GPUs (nvidia-smi; doctor changes none of them)", gpus))


def _apply(tuning: HostTuning, root: str) -> None:
    """Set what differs; a table of what was set and why the rest was not."""
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
