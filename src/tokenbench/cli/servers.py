"""What the commands that start or probe servers print (deploy, smoke, demo): facts, smoke tables."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from tokenbench.cli import console
from tokenbench.deploy.smoke import SmokeResult
from tokenbench.errors import TargetError
from tokenbench.spec.server_facts import ServerFacts

SET_HELP = "override a profile field, e.g. --set parallelism.slots=8 (repeatable)"


def say(message: str) -> None:
    console.err.print(f"[dim]deploy:[/] {escape(message)}")


def print_facts(facts: ServerFacts | None) -> None:
    if facts is None:
        return
    console.err.print(f"[bold]{facts.engine}[/] {escape(str(facts.version))} model={escape(str(facts.model))} "
                      f"slots={facts.slots} ctx/seq={facts.ctx_per_seq} KV tokens={facts.kv_capacity_tokens}")


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
