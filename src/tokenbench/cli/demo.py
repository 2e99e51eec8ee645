"""`tokenbench demo`: deploy the embedded default engine, smoke-test it, sweep a small grid as one
stored run, render its report, and tear the server down. README command 1."""

from __future__ import annotations

import sys

import click

from tokenbench.cli import console, flags, options, progress
from tokenbench.cli.report_options import write_report
from tokenbench.cli.servers import SET_HELP, check, print_facts, say
from tokenbench.deploy import lifecycle, profiles
from tokenbench.deploy.smoke import smoke
from tokenbench.host import isolation
from tokenbench.spec.loader import load_model
from tokenbench.spec.ports import PortRange
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.spec.study import Client, StudySpec
from tokenbench.store import commands
from tokenbench.store.db import Store, default_db_path
from tokenbench.study import run as study
from tokenbench.study.servers import Server
from tokenbench.study.settings import RunSettings

DEFAULT_PROFILE = "cpu-smollm2-llamacpp"


def _stage(n: int, text: str) -> None:
    console.err.rule(f"[bold]{n}/4[/] {text}")


def demo_spec(base_url: str, pairs: list[tuple[int, int]], concurrency: list[int], num_prompts: int | None,
              client_cpus: str | None = None) -> StudySpec:
    requests = {"per_concurrency": 2, "min": 4} if num_prompts is None else {"per_concurrency": 1, "min": num_prompts}
    client = {"cpus": client_cpus} if client_cpus else {}
    return load_model(StudySpec, {"name": "demo", "target": {"base_url": base_url}, "pairs": pairs,
                                  "concurrency": concurrency, "requests": requests, "client": client}, "demo")


AGENTS = {"kind": "trajectories", "turns": 3, "turns_dist": "uniform", "num_trajectories": 8, "think_time_s": 0.2,
          "think_time_dist": "exponential", "system_prompt_len": 32, "shared_system_prompt": True}


def agents_spec(base_url: str, pairs: list[tuple[int, int]], users: list[int], client_cpus: str | None = None
                ) -> StudySpec:
    """`demo --agents`: a small set of generated agent trajectories (docs/workloads.md, "Trajectories"), one pass
    over it per number of concurrent agents."""
    client = {"cpus": client_cpus} if client_cpus else {}
    return load_model(StudySpec, {"name": "demo-agents", "target": {"base_url": base_url}, "workload": AGENTS,
                                  "pairs": pairs, "users": users, "client": client}, "demo --agents")


@click.command("demo")
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True, help="profile to deploy (name or file)")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--pairs", default="128:64,256:32", show_default=True, help="INPUT:OUTPUT token pairs")
@click.option("--concurrency", default="1,2,4", show_default=True, help="closed-loop concurrency levels")
@click.option("--num-prompts", type=click.IntRange(min=1), default=None, help="requests per cell (default max(4, 2xC))")
@click.option("--agents", is_flag=True, help="benchmark agent trajectories instead: 8 generated ones of 1-5 turns, "
              "each turn --pairs' first INPUT new tokens and OUTPUT answered ones, tool delays of 0.2 s on average, "
              "one pass per number of concurrent agents in --concurrency (docs/workloads.md, \"Trajectories\")")
@options.DB
@options.PORTS
@flags.apply((flags.CLIENT_CPUS,))
def command(profile: str, overrides: tuple[str, ...], pairs: str, concurrency: str, num_prompts: int | None,  # noqa: PLR0913 (a click command)
            agents: bool, db: str | None, ports: PortRange | None, client__cpus: str | None) -> None:
    """Deploy a real engine (llama.cpp + SmolLM2-135M on the CPU by default), smoke-test it,
    benchmark a small grid, store it as one run, write its report, then stop the server."""
    grid, concs = options.pairs("--pairs", pairs), options.int_list("--concurrency", concurrency)
    prof = profiles.load_profile(profile, overrides)
    store = Store(db or default_db_path())
    client = load_model(Client, {"cpus": client__cpus} if client__cpus else {}, "--client-cpus")
    placed = isolation.plan(client, prof.runs_in == "local")
    _stage(1, f"deploy {prof.name}: {prof.description}")
    say(f"CPUs: client {placed.record()['client_cpus']}, engine {placed.record()['engine_cpus']} ({placed.note})")
    with lifecycle.deployed(prof, say=say, how=lifecycle.LaunchOptions(placement=placed.engine, ports=ports)) as dep:
        print_facts(dep.facts)
        _stage(2, "smoke test: one chat and one completions request")
        check(smoke(dep.base_url), dep.base_url)
        server = Server(dep.base_url, dep.facts or ServerFacts(engine=prof.engine), prof)
        spec = (agents_spec(dep.base_url, grid[:1], concs, client__cpus) if agents
                else demo_spec(dep.base_url, grid, concs, num_prompts, client__cpus))
        planned = study.start(spec, store, RunSettings(kind="demo", server=server, isolation=placed), sys.argv)
        what = "of agent trajectories" if agents else "(exact token counts, ignore_eos, warmup per cell)"
        _stage(3, f"benchmark {len(planned.plan.cells)} cells {what}")
        out, display = progress.run(planned, [])
        progress.report(out, display, [f"stored run {out.run_id} in {store.path}"])
        study.check(out, "demo")
        run_id = out.run_id
    console.err.print(f"server {prof.name} stopped")
    _stage(4, f"report of run {run_id}")
    for path in write_report(store, run_id):
        console.err.print(f"report: {path}")
    console.err.print(f"all requests are in {store.path} (run {run_id}); list runs with "
                      f"`{commands.tokenbench(store.path, 'runs')}`, and set two side by side with `compare`",
                      markup=False, highlight=False, soft_wrap=True)
