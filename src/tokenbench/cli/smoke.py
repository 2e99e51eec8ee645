"""`tokenbench smoke URL|PROFILE`: one chat and one completions request, answers and timings."""

from __future__ import annotations

import click

from tokenbench.cli.servers import SET_HELP, check, print_facts, say
from tokenbench.deploy import address, lifecycle, profiles
from tokenbench.deploy.smoke import smoke
from tokenbench.errors import UsageError
from tokenbench.load.target import read_api_key
from tokenbench.spec.study import Target


def _running(target: str) -> str | None:
    """TARGET as a server root when it is a URL, with or without its scheme (else a profile)."""
    return address.base_url(target, "TARGET") if address.looks_like_url(target) else None


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
    url = _running(target)
    if url:
        if overrides:
            raise UsageError("--set applies to a PROFILE, not a URL", "drop --set, or name a profile")
        key = read_api_key(Target(base_url=url, api_key_env=api_key_env))
        check(smoke(url, model, key, apis), url)
        return
    with lifecycle.deployed(profiles.load_profile(target, overrides), say=say) as dep:
        print_facts(dep.facts)
        check(smoke(dep.base_url, model, dep.api_key, apis), dep.base_url)
