"""`tokenbench bench`: measure a running OpenAI-compatible server over one or more cells."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click
from pydantic import ValidationError

from tokenbench.cli import console, options
from tokenbench.deploy import facts_for
from tokenbench.errors import MeasurementError, UsageError
from tokenbench.load.bench import run_bench
from tokenbench.load.cell import CellResult
from tokenbench.load.target import ResolvedTarget, check_context, resolve
from tokenbench.store.writer import ResultWriter
from tokenbench.spec.bench import BenchSpec, Load


def _loads(concurrency: str | None, rate: str | None, max_conc: int | None, arrival: str,
           num_prompts: int | None, duration: float | None, warmup: int | None) -> list[Load]:
    concs, rates = options.int_list("--concurrency", concurrency), options.float_list("--request-rate", rate)
    if bool(concs) == bool(rates):
        raise UsageError("give exactly one of --concurrency or --request-rate", "e.g. --concurrency 1,8,32")
    def count(width: float) -> int | None:
        return num_prompts if num_prompts or duration else max(16, int(4 * width))
    common = dict(duration_s=duration, warmup_requests=warmup)
    if concs:
        return [Load(concurrency=c, num_prompts=count(c), **common) for c in concs]
    return [Load(request_rate=r, arrival=arrival, max_concurrency=max_conc, num_prompts=count(r * 10), **common)
            for r in rates]


def build_spec(kw: dict) -> BenchSpec:
    if kw["input_len"] is None or kw["output_len"] is None:
        raise UsageError("--input-len and --output-len are required", "e.g. --input-len 512 --output-len 128")
    for flag in ("input_len", "output_len"):
        if kw[flag] <= 0:
            raise UsageError(f"--{flag.replace('_', '-')} must be a positive number of tokens, got {kw[flag]}",
                             "use e.g. --input-len 512 --output-len 128")
    try:
        return BenchSpec(
            target={"base_url": kw["base_url"], "model": kw["model"], "api_key_env": kw["api_key_env"],
                    "api_key_file": kw["api_key_file"], "timeout_s": kw["timeout"]},
            workload={"api": kw["api"], "input_len": kw["input_len"], "output_len": kw["output_len"],
                      "seed": kw["seed"], "tokenizer_path": kw["tokenizer"]},
            cells=_loads(kw["concurrency"], kw["request_rate"], kw["max_concurrency"], kw["arrival"],
                         kw["num_prompts"], kw["duration"], kw["warmup_requests"]),
            slo=options.slo(kw["slo"]),
            allow_length_mismatch=kw["allow_length_mismatch"], max_error_rate=kw["max_error_rate"])
    except ValidationError as exc:
        e = exc.errors()[0]
        raise UsageError(f"invalid value for {'.'.join(map(str, e['loc']))}: {e['msg']}", "see tokenbench bench --help") from None


def _progress_cb(bar, tasks: dict):
    def cb(load: Load, phase: str, done: int, total: int) -> None:
        key = (load.label, phase)
        if key not in tasks:
            tasks[key] = bar.add_task(f"{phase:7s} {load.label}", total=total)
        bar.update(tasks[key], completed=done)
    return cb


@click.command("bench")
@click.option("--base-url", required=True, help="server root, e.g. http://127.0.0.1:8000")
@click.option("--model", default=None, help="model name (default: the first served model)")
@click.option("--api", type=click.Choice(["completions", "chat"]), default="completions", show_default=True)
@click.option("--input-len", type=int, default=None, help="exact prompt tokens")
@click.option("--output-len", type=int, default=None, help="exact output tokens (ignore_eos)")
@click.option("--concurrency", default=None, help="closed-loop cells, e.g. 1,8,32")
@click.option("--request-rate", default=None, help="open-loop cells in requests/s, e.g. 1,2,4")
@click.option("--arrival", type=click.Choice(["poisson", "constant"]), default="poisson", show_default=True)
@click.option("--max-concurrency", type=click.IntRange(min=1), default=None, help="in-flight cap for rates")
@click.option("--num-prompts", type=click.IntRange(min=1), default=None, help="requests per cell (default max(4xC,16))")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), default=None, help="seconds per cell")
@click.option("--warmup-requests", type=click.IntRange(min=0), default=None, help="default: the cell's concurrency")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--api-key-env", default=None, help="environment variable holding the API key")
@click.option("--api-key-file", default=None, help="file holding the API key")
@click.option("--slo", default=None, help="goodput SLOs, e.g. ttft=500,tpot=50,e2el=10000")
@click.option("--vocab-size", type=click.IntRange(min=2), default=None, help="when the server does not report it")
@click.option("--tokenizer", default=None, help="local tokenizer/config dir (for vocab size)")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="per-request timeout, s")
@click.option("--allow-length-mismatch", is_flag=True, help="keep cells whose token counts differ from the ask")
@click.option("--max-error-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True)
@click.option("--output", "output", default=None, type=click.Path(dir_okay=False), help="write a JSON result")
@click.option("--db", default=None, type=click.Path(dir_okay=False), help="results database (default results/)")
@click.option("--no-store", is_flag=True, help="do not write to the results database")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="client processes sharing the load (each with its own event loop)")
def command(**kw) -> None:
    """Benchmark a running OpenAI-compatible server: TTFT, TPOT, ITL, E2EL, throughput, goodput."""
    spec = build_spec(kw)
    target = resolve(spec.target, kw["tokenizer"], kw["vocab_size"])
    results, writer = measure(spec, target, sys.argv, kw["output"], kw["db"], facts_for(target.base_url).to_dict(),
                              store=not kw["no_store"], workers=kw["workers"])
    _report(results, writer)


def measure(spec: BenchSpec, target: ResolvedTarget, argv: list[str], json_path: str | None, db_path: str | None,
            facts: dict | None = None, store: bool = True, workers: int = 1) -> tuple[list[CellResult], ResultWriter]:
    """Run the spec's cells with progress bars, storing each cell as it finishes (shared with `demo`)."""
    check_context(spec.workload, target.max_model_len)
    writer = ResultWriter(spec, target, argv, json_path, db_path, facts=facts, store=store)
    console.err.print(f"[bold]tokenbench[/] {target.base_url} model={target.model} "
                      f"vocab={target.vocab.size} ({target.vocab.source}) run={writer.run_id or '-'}")
    with console.progress() as bar:
        try:
            results = asyncio.run(run_bench(spec, target, writer.add_cell, _progress_cb(bar, {}), workers))
        except KeyboardInterrupt:
            writer.finish("interrupted")
            raise
    writer.finish("done" if all(r.status == "ok" for r in results) else "failed")
    return results, writer


def _report(results: list[CellResult], writer: ResultWriter) -> None:
    console.out.print(console.cells_table([(r.key, r.summary, r.status) for r in results]))
    for where in writer.locations():
        console.err.print(where)
    failed = [r for r in results if r.status != "ok"]
    if failed:
        raise MeasurementError(f"cell {failed[0].key} failed: {failed[0].message}",
                               "results were kept; see the JSON/database for each request's error")
