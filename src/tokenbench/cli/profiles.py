"""`tokenbench profiles`: the built-in deployment profiles, one line each; --show prints one resolved."""

from __future__ import annotations

import click
from rich.table import Table

from tokenbench.cli import console
from tokenbench.deploy import profiles


@click.command("profiles")
@click.option("--show", metavar="PROFILE", default=None, help="print this profile (name or file) as resolved YAML")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="overrides applied to --show")
@click.option("--fields", is_flag=True, help="list every profile key with its meaning")
def command(show: str | None, overrides: tuple[str, ...], fields: bool) -> None:
    """List deployment profiles (use a name with `tokenbench deploy up NAME`)."""
    if fields:
        table = Table(title="profile keys (--set KEY=VALUE)")
        for col in ("key", "type", "default", "meaning"):
            table.add_column(col)
        for f in profiles.fields():
            table.add_row(f.key, f.kind, f.default, f.text)
        console.out.print(table)
    elif show:
        click.echo(profiles.to_yaml(profiles.load_profile(show, overrides)), nl=False)
    else:
        rows = profiles.listing()
        width = max((len(name) for name, _ in rows), default=0)
        for name, description in rows:
            click.echo(f"{name:{width}s}  {description}")
