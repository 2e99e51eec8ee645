"""`tokenbench smoke URL|PROFILE`: one chat and one completions request, answers and timings."""

from __future__ import annotations

import click
from rich.table import Table

from tokenbench.cli import console
from tokenbench.cli.deploy import SET_HELP, print_facts, say
from tokenbench.deploy import lifecycle, profiles
from tokenbench.deploy.smoke import SmokeResult, smoke
from tokenbench.errors import TargetError, UsageError
from tokenbench.load.target import read_api_key
from tokenbench.spec.bench import Target


def smoke_table(results: list[SmokeResult]) -> Table:
    table = Table(title="smoke test")
    for col in ("api", "ok", "prompt tok", "output tok", "ms", "server prompt ms", "server gen ms", "answer"):
        table.add_column(col, overflow="fold")
    for r in results:
        t = r.server_timings
        table.add_row(r.api, "yes" if r.ok else "NO", console.fmt(r.prompt_tokens), console.fmt(r.completion_tokens),
                      console.fmt(r.elapsed_ms), console.fmt(t.get("prompt_ms")), console.fmt(t.get("predicted_ms")),
                      r.text if r.ok else r.error)
    return table


def check(results: list[SmokeResult], base_url: str) -> None:
    console.out.print(smoke_table(results))
    bad = [r for r in results if not r.ok]
    if bad:
        raise TargetError(f"{base_url}: the {bad[0].api} request failed ({bad[0].error})",
                          "see the table above; a base model without a chat template fails the chat request")


@click.command("smoke")
@click.argument("target")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--model", default=None, help="model name (default: the first served model)")
@click.option("--api", "apis", type=click.Choice(["chat", "completions"]), multiple=True,
              help="only these APIs (default: both)")
@click.option("--api-key-env", default=None, help="environment variable holding the API key")
def command(target: str, overrides: tuple[str, ...], model: str | None, apis: tuple[str, ...],
            api_key_env: str | None) -> None:
    """Send one chat and one completions request to TARGET: a URL, or a PROFILE deployed for the test."""
    apis = apis or ("chat", "completions")
    if target.startswith(("http://", "https://")):
        if overrides:
            raise UsageError("--set applies to a PROFILE, not a URL", "drop --set, or name a profile")
        key = read_api_key(Target(base_url=target, api_key_env=api_key_env))
        check(smoke(target.rstrip("/"), model, key, apis), target)
        return
    with lifecycle.deployed(profiles.load_profile(target, overrides), say=say) as dep:
        print_facts(dep.facts)
        check(smoke(dep.base_url, model, dep.api_key, apis), dep.base_url)
