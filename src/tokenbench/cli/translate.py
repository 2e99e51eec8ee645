"""`tokenbench translate -- <their command line>`: the tokenbench command that measures the cells a
`vllm bench serve`, SGLang bench_serving, AIPerf or GuideLLM line would have measured, and every
difference in meaning, one line each (tokenbench/peers, docs/peers.md). `--run` runs it: the command
goes through `tokenbench bench` as if typed, so it is checked, stored and reported as any bench."""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path

import click

from tokenbench.cli import console, options
from tokenbench.errors import UsageError
from tokenbench.peers.equivalent import GUIDELLM_MAX_CONCURRENCY, Equivalent
from tokenbench.peers.translate import translate
from tokenbench.store.rows import CellRow


@click.command("translate", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--run", "run_it", is_flag=True, help="run the equivalent tokenbench command after printing it")
@options.DB
@click.option("--no-store", is_flag=True, help="with --run: do not keep a results database")
@click.argument("line", nargs=-1, type=click.UNPROCESSED, required=True)
def command(run_it: bool, db: str | None, no_store: bool, line: tuple[str, ...]) -> None:
    """Print the tokenbench command equivalent to a vllm bench serve, sglang.bench_serving, aiperf profile or
    guidellm command line (give it after --), and every difference in meaning; exit 2 when it has none."""
    eq = translate(list(line))
    extra = (["--db", db] if db else []) + (["--no-store"] if no_store else [])
    for text in eq.commands():
        console.out.print(text if not extra else f"{text} {shlex.join(extra)}", markup=False, highlight=False,
                          soft_wrap=True)
    for text in eq.differences:
        console.err.print(f"difference: {text}", markup=False, highlight=False, soft_wrap=True)
    if run_it:
        _run(eq, extra)


def _bench(argv: list[str]) -> None:
    """Run `tokenbench ARGV` in this process, through the root command (as if typed)."""
    root = click.get_current_context().find_root()
    root.command.main(args=argv, standalone_mode=False, obj=root.obj)


def _run(eq: Equivalent, extra: list[str]) -> None:
    if eq.sweep is None:
        return _bench([*eq.argv(), *extra])
    with tempfile.TemporaryDirectory(prefix="tokenbench-sweep-") as tmp:
        first = Path(tmp) / "first.json"
        _bench([*eq.argv(), *extra, "--output", str(first)])
        sync, peak = measured_rates(first)
    second = eq.second(sync, peak)
    console.err.print(f"sweep: synchronous {sync:.4g} req/s, throughput {peak:.4g} req/s; then", markup=False)
    console.out.print("tokenbench " + shlex.join([*second, *extra]), markup=False, highlight=False, soft_wrap=True)
    _bench([*second, *extra])


def measured_rates(path: Path) -> tuple[float, float]:
    """The request rates the sweep's first bench measured: its 1-in-flight cell, then its widest one."""
    rows = [CellRow.from_json(c) for c in json.loads(path.read_text()).get("cells", [])]
    cells = {c.concurrency: c.summary for c in rows}
    try:
        sync, peak = cells[1], cells[GUIDELLM_MAX_CONCURRENCY]
    except KeyError:
        raise UsageError("the sweep's first bench did not store its synchronous and throughput cells",
                         "see its results above") from None
    return sync.request_throughput or 0.0, peak.request_throughput or 0.0
