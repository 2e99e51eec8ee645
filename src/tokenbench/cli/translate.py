"""`tokenbench translate -- <their command line>`: the tokenbench command that measures the cells a
`vllm bench serve`, SGLang bench_serving, AIPerf or GuideLLM line would have measured, and every
difference in meaning, one line each, with the peer version it was checked on (tokenbench/peers,
docs/peers.md). `--run` runs it: the command goes through `tokenbench bench` as if typed, so it is checked,
stored and reported as any bench. Options before `--` are tokenbench's: translate's own, and any other
`bench` option, added to the command (after the translated ones, so it wins)."""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path

import click

from tokenbench.cli import console, options, run_options
from tokenbench.errors import UsageError
from tokenbench.peers.equivalent import GUIDELLM_MAX_CONCURRENCY, Equivalent
from tokenbench.peers.translate import help_of, translate
from tokenbench.store.rows import CellRow

OWN = {"--run": 0, "--db": 1, "--no-store": 0, "--help": 0, "-h": 0}     # translate's options, by values taken


class TranslateCommand(click.Command):
    """Before `--`, tokenbench's options (translate's own, then `bench` options to add); after it, the
    peer's line. Without `--`, the line starts at the first word that is not translate's option."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" not in args:
            return super().parse_args(ctx, args)
        at = args.index("--")
        own, added = _tokenbench_options(args[:at])
        ctx.meta["translate.bench_options"] = added
        return super().parse_args(ctx, [*own, "--", *args[at + 1:]])


def _bench_command() -> click.Command:
    """The `bench` command, as the root command holds it (commands import no other command)."""
    root = click.get_current_context().find_root()
    found = root.command.get_command(root, "bench") if isinstance(root.command, click.Group) else None
    assert found is not None, "translate runs under the tokenbench command, which has bench"
    return found


def _bench_options() -> dict[str, click.Option]:
    """`bench`'s options by every spelling."""
    return {o: p for p in _bench_command().params if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)}


def _tokenbench_options(words: list[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """(translate's own options, `bench` options as (spelling, value)) among the words before `--`; a word
    that is neither is a one-line error (a peer's option belongs after `--`)."""
    bench = _bench_options()
    own: list[str] = []
    added: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        name, eq, value = words[i].partition("=")
        if name not in OWN and name not in bench:
            raise UsageError(f"{words[i]} before `--` is not a tokenbench option (options before `--` are "
                             "tokenbench's, the peer's line comes after it)",
                             "move it after `--` if it is the peer's, or see `tokenbench bench --help`")
        takes = OWN[name] if name in OWN else 0 if bench[name].is_flag else 1
        if takes and not eq and i + 1 >= len(words):
            raise UsageError(f"{name} before `--` needs a value", f"write {name} VALUE before `--`")
        step = 1 if eq else 1 + takes
        if name in OWN:
            own.extend(words[i:i + step])
        else:
            added.append((name, value if eq else words[i + 1] if takes and i + 1 < len(words) else None))
        i += step
    return own, added


def _add(eq: Equivalent, added: list[tuple[str, str | None]]) -> None:
    """The `bench` options given before `--`, each replacing a translated option of the same meaning; the
    command is then checked as `bench` would check it (a bad value: one line, before anything runs)."""
    if not added:
        return
    options = _bench_options()
    for flag, value in added:
        for f in [f for f in eq.options if f in options and options[f].name == options[flag].name]:
            del eq.options[f]
        eq.set(flag, value)
    try:
        run_options.bench_spec(_bench_command().make_context("bench", eq.argv()[1:]).params)
    except click.UsageError as exc:
        raise UsageError(f"{exc.format_message()} (an option given before `--`)",
                         "see `tokenbench bench --help`") from None


@click.command("translate", cls=TranslateCommand,
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--run", "run_it", is_flag=True, help="run the equivalent tokenbench command after printing it")
@options.DB
@click.option("--no-store", is_flag=True, help="with --run: do not keep a results database")
@click.argument("line", nargs=-1, type=click.UNPROCESSED, required=True)
def command(run_it: bool, db: str | None, no_store: bool, line: tuple[str, ...]) -> None:
    """Print the tokenbench command equivalent to a vllm bench serve, sglang.bench_serving, aiperf profile or
    guidellm command line (give it after --), and every difference in meaning; exit 2 when it has none.
    Options before -- are tokenbench's: any `bench` option given there is added to the command."""
    told = help_of(list(line))
    if told is not None:
        console.out.print(told, markup=False, highlight=False, soft_wrap=True)
        return
    eq = translate(list(line))
    _add(eq, click.get_current_context().meta.get("translate.bench_options", []))
    extra = (["--db", db] if db else []) + (["--no-store"] if no_store else [])
    for text in eq.commands():
        console.out.print(text if not extra else f"{text} {shlex.join(extra)}", markup=False, highlight=False,
                          soft_wrap=True)
    for text in eq.differences:
        console.err.print(f"difference ({eq.checked_on}): {text}", markup=False, highlight=False, soft_wrap=True)
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
