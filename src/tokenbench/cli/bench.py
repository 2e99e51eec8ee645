"""`tokenbench bench`: measure a running OpenAI-compatible server over one or more cells."""

from __future__ import annotations

import asyncio
import sys

import click
from pydantic import ValidationError

from tokenbench.cli import console, options
from tokenbench.deploy import facts_for
from tokenbench.errors import MeasurementError, UsageError
from tokenbench.load.bench import run_bench
from tokenbench.load.cell import CellResult
from tokenbench.load.target import ResolvedTarget, check_context, resolve
from tokenbench.spec.bench import FIXED_LENGTH_KINDS, BenchSpec, Load, Workload
from tokenbench.store.writer import ResultWriter

# --dataset-name's knobs: flag -> Workload field (the help text is the field's description)
WORKLOAD_FLAGS = ("dataset_path", "min_input_len", "max_input_len", "min_output_len", "max_output_len",
                  "prefix_len", "num_groups", "image_count", "image_width", "image_height", "image_format",
                  "time_scale")


def _wl_help(name: str) -> str:
    return Workload.model_fields[name].description or ""


def _trace_loads(concurrency: str | None, rate: str | None, max_conc: int | None, num_prompts: int | None,
                 duration: float | None, warmup: int | None) -> list[Load]:
    if concurrency or rate:
        raise UsageError("a trace replays its own arrival times: --concurrency and --request-rate do not apply",
                         "drop them; speed the replay up or down with --time-scale")
    return [Load(arrival="trace", max_concurrency=max_conc, num_prompts=num_prompts, duration_s=duration,
                 warmup_requests=warmup)]


def _loads(concurrency: str | None, rate: str | None, max_conc: int | None, arrival: str,
           num_prompts: int | None, duration: float | None, warmup: int | None) -> list[Load]:
    if arrival == "trace":
        return _trace_loads(concurrency, rate, max_conc, num_prompts, duration, warmup)
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


def _workload(kw: dict) -> dict:
    kind = kw["dataset_name"]
    extra = {k: kw[k] for k in WORKLOAD_FLAGS if kw[k] is not None}
    return {"kind": kind, "api": kw["api"] or ("chat" if kind == "image" else "completions"),
            "input_len": kw["input_len"], "output_len": kw["output_len"], "seed": kw["seed"],
            "tokenizer_path": kw["tokenizer"], **extra}


def build_spec(kw: dict) -> BenchSpec:
    if kw["dataset_name"] in FIXED_LENGTH_KINDS and (kw["input_len"] is None or kw["output_len"] is None):
        raise UsageError("--input-len and --output-len are required", "e.g. --input-len 512 --output-len 128")
    if kw["dataset_name"] == "trace" and (kw["workers"] > 1 or kw.get("ray_address")):
        raise UsageError("a trace replay runs in one client process (its arrivals are one schedule)",
                         "drop --workers / --ray for --dataset-name trace")
    for flag in ("input_len", "output_len"):
        if kw[flag] is not None and kw[flag] <= 0:
            raise UsageError(f"--{flag.replace('_', '-')} must be a positive number of tokens, got {kw[flag]}",
                             "use e.g. --input-len 512 --output-len 128")
    try:
        return BenchSpec(
            target={"base_url": kw["base_url"], "model": kw["model"], "api_key_env": kw["api_key_env"],
                    "api_key_file": kw["api_key_file"], "timeout_s": kw["timeout"]},
            workload=_workload(kw),
            cells=_loads(kw["concurrency"], kw["request_rate"], kw["max_concurrency"],
                         "trace" if kw["dataset_name"] == "trace" else kw["arrival"],
                         kw["num_prompts"], kw["duration"], kw["warmup_requests"]),
            slo=options.slo(kw["slo"]),
            allow_length_mismatch=kw["allow_length_mismatch"], max_error_rate=kw["max_error_rate"])
    except ValidationError as exc:
        e = exc.errors()[0]
        msg = e["msg"].removeprefix("Value error, ")
        raise UsageError(f"invalid value for {'.'.join(map(str, e['loc']))}: {msg}", "see tokenbench bench --help") from None


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
@click.option("--api", type=click.Choice(["completions", "chat"]), default=None,
              help="default: completions (chat for --dataset-name image)")
@click.option("--dataset-name", type=click.Choice(["random", "sharegpt", "jsonl", "prefix", "image", "trace"]),
              default="random", show_default=True, help="workload kind (docs/workloads.md)")
@click.option("--dataset-path", default=None, type=click.Path(exists=True), help=_wl_help("dataset_path"))
@click.option("--input-len", type=int, default=None, help="exact prompt tokens (random, prefix: prefix + suffix; "
              "image: the text)")
@click.option("--output-len", type=int, default=None,
              help="exact output tokens (ignore_eos); sharegpt/jsonl/trace: forces it (default: the dataset's)")
@click.option("--prefix-len", type=click.IntRange(min=1), default=None, help=_wl_help("prefix_len"))
@click.option("--num-groups", type=click.IntRange(min=1), default=None, help=_wl_help("num_groups"))
@click.option("--image-count", type=click.IntRange(min=1), default=None, help=_wl_help("image_count"))
@click.option("--image-width", type=click.IntRange(min=1), default=None, help=_wl_help("image_width"))
@click.option("--image-height", type=click.IntRange(min=1), default=None, help=_wl_help("image_height"))
@click.option("--image-format", type=click.Choice(["png", "bmp"]), default=None, help=_wl_help("image_format"))
@click.option("--time-scale", type=click.FloatRange(min=0, min_open=True), default=None,
              help=_wl_help("time_scale"))
@click.option("--min-input-len", type=click.IntRange(min=1), default=None, help=_wl_help("min_input_len"))
@click.option("--max-input-len", type=click.IntRange(min=1), default=None, help=_wl_help("max_input_len"))
@click.option("--min-output-len", type=click.IntRange(min=1), default=None, help=_wl_help("min_output_len"))
@click.option("--max-output-len", type=click.IntRange(min=1), default=None, help=_wl_help("max_output_len"))
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
@click.option("--tokenizer", default=None, help="local Hugging Face tokenizer dir (tokenizer.json): chat prompts and dataset counts "
              "without the server's /tokenize; its config.json gives the vocab size")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="per-request timeout, s")
@click.option("--allow-length-mismatch", is_flag=True, help="keep cells whose token counts differ from the ask")
@click.option("--max-error-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True)
@click.option("--output", "output", default=None, type=click.Path(dir_okay=False), help="write a JSON result")
@click.option("--db", default=None, type=click.Path(dir_okay=False), help="results database (default: $TOKENBENCH_RESULTS/tokenbench.db, else ~/.local/share/tokenbench/tokenbench.db)")
@click.option("--no-store", is_flag=True, help="do not write to the results database")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="client processes sharing the load (each with its own event loop)")
@click.option("--ray", "ray_address", default=None, help="run the workers as Ray actors on this cluster (ADDRESS)")
def command(**kw) -> None:
    """Benchmark a running OpenAI-compatible server: TTFT, TPOT, ITL, E2EL, throughput, goodput."""
    spec = build_spec(kw)
    target = resolve(spec.target, kw["tokenizer"], kw["vocab_size"])
    results, writer = measure(spec, target, sys.argv, kw["output"], kw["db"], facts_for(target.base_url, target.api_key).to_dict(),
                              store=not kw["no_store"], workers=kw["workers"], ray_address=kw["ray_address"])
    _report(results, writer)


def measure(spec: BenchSpec, target: ResolvedTarget, argv: list[str], json_path: str | None, db_path: str | None,
            facts: dict | None = None, store: bool = True, workers: int = 1,
            ray_address: str | None = None) -> tuple[list[CellResult], ResultWriter]:
    """Run the spec's cells with progress bars, storing each cell as it finishes (shared with `demo`)."""
    if spec.workload.fixed_lengths:
        check_context(spec.workload, target.max_model_len)      # dataset kinds drop what does not fit
    writer = ResultWriter(spec, target, argv, json_path, db_path, facts=facts, store=store)
    console.err.print(f"[bold]tokenbench[/] {target.base_url} model={target.model} "
                      f"vocab={target.vocab.size} ({target.vocab.source}) run={writer.run_id or '-'}")
    with console.progress() as bar:
        try:
            results = asyncio.run(run_bench(spec, target, writer.add_cell, _progress_cb(bar, {}), workers, ray_address))
        except KeyboardInterrupt:
            writer.finish("interrupted")
            raise
    writer.finish("done" if all(r.status == "ok" for r in results) else "failed")
    return results, writer


WORKLOAD_FACTS = (("chat_template_overhead_tokens", "chat template overhead {} tokens"),
                  ("image_tokens_per_image", "{:.1f} prompt tokens per image"),
                  ("total_images", "{} images sent"), ("server_counted_images", "{} counted by the server"),
                  ("cache_hit_rate", "prefix-cache hit rate {:.1%}"), ("input_len_mean", "mean input {:.1f} tokens"),
                  ("output_len_mean", "mean output {:.1f} tokens"), ("p99_queue_ms", "send lateness p99 {:.2f} ms"))


def _workload_lines(r: CellResult) -> list[str]:
    """What the table does not show: template/image overheads, cache hits, dataset means, notes."""
    keys = [(k, f) for k, f in WORKLOAD_FACTS if r.summary.get(k) is not None]
    keys = [(k, f) for k, f in keys if k != "p99_queue_ms" or r.load.arrival == "trace"]
    facts = ", ".join(f.format(r.summary[k]) for k, f in keys)
    return ([f"{r.key}: {facts}"] if facts else []) + [f"{r.key}: {n}" for n in r.notes]


def _report(results: list[CellResult], writer: ResultWriter) -> None:
    console.out.print(console.cells_table([(r.key, r.summary, r.status) for r in results]))
    for r in results:
        for line in _workload_lines(r):
            console.out.print(line, highlight=False)
    for where in writer.locations():
        console.err.print(where)
    failed = [r for r in results if r.status != "ok"]
    if failed:
        raise MeasurementError(f"cell {failed[0].key} failed: {failed[0].message}",
                               "results were kept; see the JSON/database for each request's error")
