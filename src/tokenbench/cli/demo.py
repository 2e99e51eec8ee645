"""`tokenbench demo`: deploy the embedded default engine, smoke-test it, benchmark a small grid,
store and print the results, and tear the server down. README command 1."""

from __future__ import annotations

import sys

import click

from tokenbench.cli import console, options
from tokenbench.cli.bench import measure
from tokenbench.cli.deploy import SET_HELP, print_facts, say
from tokenbench.cli.smoke import check
from tokenbench.deploy import lifecycle, profiles
from tokenbench.deploy.lifecycle import Deployment
from tokenbench.deploy.smoke import smoke
from tokenbench.errors import MeasurementError
from tokenbench.load.cell import CellResult
from tokenbench.load.target import resolve
from tokenbench.spec.bench import BenchSpec, Load

DEFAULT_PROFILE = "cpu-smollm2-llamacpp"


def grid_spec(base_url: str, input_len: int, output_len: int, concurrency: list[int],
              num_prompts: int | None) -> BenchSpec:
    cells = [Load(concurrency=c, num_prompts=num_prompts or max(4, 2 * c)) for c in concurrency]
    return BenchSpec(target={"base_url": base_url}, workload={"input_len": input_len, "output_len": output_len},
                     cells=cells)


def _stage(n: int, text: str) -> None:
    console.err.rule(f"[bold]{n}/4[/] {text}")


def _bench_all(dep: Deployment, pairs: list[tuple[int, int]], concurrency: list[int],
               num_prompts: int | None, db: str | None) -> tuple[list[CellResult], list[str]]:
    results, where = [], []
    facts = dep.facts.to_dict() if dep.facts else {}
    for input_len, output_len in pairs:
        spec = grid_spec(dep.base_url, input_len, output_len, concurrency, num_prompts)
        console.err.print(f"input {input_len} tokens, output {output_len} tokens, concurrency "
                          f"{', '.join(map(str, concurrency))}")
        cells, writer = measure(spec, resolve(spec.target), sys.argv, None, db, facts=facts)
        results += cells
        where += writer.locations()
    return results, where


@click.command("demo")
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True, help="profile to deploy (name or file)")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--pairs", default="128:64,256:32", show_default=True, help="INPUT:OUTPUT token pairs")
@click.option("--concurrency", default="1,2,4", show_default=True, help="closed-loop concurrency levels")
@click.option("--num-prompts", type=click.IntRange(min=1), default=None, help="requests per cell (default max(4, 2xC))")
@click.option("--db", default=None, type=click.Path(dir_okay=False), help="results database (default results/)")
def command(profile: str, overrides: tuple[str, ...], pairs: str, concurrency: str, num_prompts: int | None,
            db: str | None) -> None:
    """Deploy a real engine (llama.cpp + SmolLM2-135M on the CPU by default), smoke-test it,
    benchmark a small grid, store and print the results, then stop the server."""
    grid, concs = options.pairs("--pairs", pairs), options.int_list("--concurrency", concurrency)
    prof = profiles.load_profile(profile, overrides)
    _stage(1, f"deploy {prof.name}: {prof.description}")
    with lifecycle.deployed(prof, say=say) as dep:
        print_facts(dep.facts)
        _stage(2, "smoke test: one chat and one completions request")
        check(smoke(dep.base_url), dep.base_url)
        _stage(3, f"benchmark {len(grid) * len(concs)} cells (exact token counts, ignore_eos)")
        results, where = _bench_all(dep, grid, concs, num_prompts, db)
        _stage(4, "results")
        console.out.print(console.cells_table([(r.key, r.summary, r.status) for r in results]))
    console.err.print(f"server {prof.name} stopped")
    for line in where:
        console.err.print(line)
    failed = [r for r in results if r.status != "ok"]
    if failed:
        raise MeasurementError(f"cell {failed[0].key} failed: {failed[0].message}",
                               "results were kept; see the database for each request's error")
