"""`tokenbench demo`: deploy the embedded default engine, smoke-test it, sweep a small grid as one
stored run, render its report, and tear the server down. README command 1."""

from __future__ import annotations

import click

from tokenbench import __version__
from tokenbench.cli import console, options
from tokenbench.cli.deploy import SET_HELP, print_facts, say
from tokenbench.cli.smoke import check
from tokenbench.cli.sweep import create_run, execute
from tokenbench.deploy import lifecycle, profiles
from tokenbench.deploy.smoke import smoke
from tokenbench.report import plausibility, render
from tokenbench.report.build import build_report
from tokenbench.report.model import load_run
from tokenbench.spec.loader import load_model
from tokenbench.spec.sweep import SweepSpec
from tokenbench.store.db import Store, default_db_path
from tokenbench.sweep.plan import plan
from tokenbench.sweep.run import SweepRunner
from tokenbench.sweep.servers import Server

DEFAULT_PROFILE = "cpu-smollm2-llamacpp"


def _stage(n: int, text: str) -> None:
    console.err.rule(f"[bold]{n}/4[/] {text}")


def demo_spec(base_url: str, pairs: list[tuple[int, int]], concurrency: list[int], num_prompts: int | None) -> SweepSpec:
    requests = {"per_concurrency": 2, "min": 4} if num_prompts is None else {"per_concurrency": 1, "min": num_prompts}
    return load_model(SweepSpec, {"name": "demo", "target": {"base_url": base_url}, "pairs": pairs,
                                  "concurrency": concurrency, "requests": requests}, "demo")


def _report(store: Store, run_id: str) -> None:
    run = load_run(store, run_id)
    checks = plausibility.check_run(run, plausibility.Overrides())
    doc = build_report(run, "en", checks, __version__)
    for path in render.write(doc, store.path.parent / "reports" / run_id, ["md", "html"]):
        console.err.print(f"report: {path}")


@click.command("demo")
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True, help="profile to deploy (name or file)")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--pairs", default="128:64,256:32", show_default=True, help="INPUT:OUTPUT token pairs")
@click.option("--concurrency", default="1,2,4", show_default=True, help="closed-loop concurrency levels")
@click.option("--num-prompts", type=click.IntRange(min=1), default=None, help="requests per cell (default max(4, 2xC))")
@click.option("--db", default=None, type=click.Path(dir_okay=False), help="results database (default: $TOKENBENCH_RESULTS/tokenbench.db, else ~/.local/share/tokenbench/tokenbench.db)")
def command(profile: str, overrides: tuple[str, ...], pairs: str, concurrency: str, num_prompts: int | None,
            db: str | None) -> None:
    """Deploy a real engine (llama.cpp + SmolLM2-135M on the CPU by default), smoke-test it,
    benchmark a small grid, store it as one run, write its report, then stop the server."""
    grid, concs = options.pairs("--pairs", pairs), options.int_list("--concurrency", concurrency)
    prof = profiles.load_profile(profile, overrides)
    store = Store(db or default_db_path())
    _stage(1, f"deploy {prof.name}: {prof.description}")
    with lifecycle.deployed(prof, say=say) as dep:
        print_facts(dep.facts)
        _stage(2, "smoke test: one chat and one completions request")
        check(smoke(dep.base_url), dep.base_url)
        p = plan(demo_spec(dep.base_url, grid, concs, num_prompts))
        _stage(3, f"benchmark {len(p.cells)} cells (exact token counts, ignore_eos, warmup per cell)")
        run_id = create_run(store, p, prof.name, prof)
        execute(SweepRunner(p, store, run_id, server=Server(dep.base_url, dep.facts, prof)), store)
    console.err.print(f"server {prof.name} stopped")
    _stage(4, f"report of run {run_id}")
    _report(store, run_id)
    console.err.print(f"all requests are in {store.path} (run {run_id}); "
                      f"compare runs with `tokenbench compare`, list them with `tokenbench runs`")
