"""Entry point. The one place that maps TokenbenchError to a one-line message and an exit code
(errors.EXIT_CODES, documented in docs/reliability.md). Anything else is still one line: an OSError
names its path, any other exception is an internal error (exit 70); `--debug` shows the traceback."""

from __future__ import annotations

import errno
import gc
import importlib
import resource
import signal
import sys
import threading
import traceback
from dataclasses import dataclass

import click

from tokenbench import __version__
from tokenbench.errors import InternalError, Interrupted, TokenbenchError, UsageError, escape_breaks


# Each command lives in its own module under tokenbench.cli and exposes `command` (a click command or
# group). Listed here once, in the order of `tokenbench --help`, with the first sentence of its help: the
# root's help is printed from this table without loading a command module (loading them all cost
# `tokenbench --help` about 0.8 s of CPU; docs/architecture.md, "Start-up"). tests/cli/test_cli_commands.py
# holds each line equal to its command's own help.
@dataclass(frozen=True)
class Entry:
    name: str
    module: str
    summary: str


COMMANDS = [
    Entry("demo", "demo", "Deploy a real engine (llama.cpp + SmolLM2-135M on the CPU by default), smoke-test it, "
          "benchmark a small grid, store it as one run, write its report, then stop the server."),
    Entry("deploy", "deploy", "Start, inspect and stop inference servers described by profiles."),
    Entry("profiles", "profiles", "List deployment profiles (use a name with `tokenbench deploy up NAME`)."),
    Entry("smoke", "smoke", "Send one chat and one completions request to TARGET: a URL, or a PROFILE deployed "
          "for the test."),
    Entry("bench", "bench", "Benchmark a running OpenAI-compatible server: TTFT, TPOT, ITL, E2EL, throughput, "
          "goodput. vLLM's `bench serve` spellings are accepted (docs/cli.md)."),
    Entry("sweep", "sweep", "Run a sweep from SPEC.yaml (or flags), storing every cell as it finishes."),
    Entry("tune", "tune", "Find the server config of PROFILE with the highest capacity under the SLOs, with its "
          "confidence."),
    Entry("translate", "translate", "Print the tokenbench command equivalent to a vllm bench serve, "
          "sglang.bench_serving, aiperf profile or guidellm command line (give it after --), and every "
          "difference in meaning; exit 2 when it has none."),
    Entry("calibrate", "calibrate", "Measure the reference server (known truth) at the planned load; show where "
          "the client breaks down."),
    Entry("setup", "setup", "Install engines into the tokenbench cache (separate venvs, converted models)."),
    Entry("agree", "agree", "Agreement with an engine's own benchmark client on the same server, workload and "
          "concurrency."),
    Entry("runs", "runs", "List stored runs: id, date, study name, kind, target, cells done/total, verdict "
          "(running, interrupted, failed, empty, marked or ok), status."),
    Entry("report", "report", "Render a stored run as a report: environment, baseline, scaling, matrix, "
          "comparison, plots."),
    Entry("compare", "compare", "Compare runs side by side (RUN, or RUN:CONFIG for one server config of a run)."),
    Entry("gate", "gate", "Gate a candidate against a baseline: per cell and figure regressed, improved, no change "
          "or inconclusive, at a stated false-alarm rate; exit 0 pass, 10 regressed, 11 inconclusive, 12 refused."),
    Entry("history", "history", "A series' runs over time: each figure with the noise band learned from its "
          "earlier launches."),
    Entry("import", "import_", "Import results of vllm bench serve, SGLang bench_serving, AISBench, a CSV of "
          "published figures, or a file tokenbench wrote (--output JSON, recovery file, export JSON or CSV)."),
    Entry("export", "export", "Export a stored run's cells (and requests) for other tools."),
    Entry("reference-server", "reference_server", "Serve /v1/completions and /v1/chat/completions with tokens "
          "at exact deadlines."),
    Entry("parse", "parse", "Parse a captured npu-smi / nvidia-smi (CSV, table, -q, dmon) / Prometheus output "
          "and print its samples as JSON."),
    Entry("monitor", "monitor", "Show accelerator (npu-smi / nvidia-smi), server /metrics and host signals, "
          "refreshed live."),
    Entry("doctor", "doctor", "Check CPU governor, swappiness, NUMA balancing, sched migration cost, /dev/shm "
          "and hugepages against PROFILE's host_tuning (a built-in name or a YAML file); on an NVIDIA host (or "
          "profile) the GPUs too: driver and CUDA, persistence, clocks, power limit, ECC, MIG, topology "
          "(nvidia-smi)."),
    Entry("flaggems", "flaggems", "Report the FlagGems operator log LOG (written with SGLANG_FLAGGEMS_RECORD=1 "
          "at SGLANG_FLAGGEMS_LOG_PATH): operators served, log lines each, blacklist and per-op routing."),
]
_BY_NAME = {e.name: e for e in COMMANDS}


class Root(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [e.name for e in COMMANDS]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """The command's own module only (loading the others first cost a bench about 0.4 s of CPU)."""
        entry = _BY_NAME.get(name)
        return load(entry.module) if entry is not None else None

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """The command, loaded. Started by `run` (the console script: its collector is off while it starts),
        what start-up built is now frozen out of the collector's reach and the collector turned on."""
        found = super().resolve_command(ctx, args)
        if not gc.isenabled():
            gc.freeze()
            gc.enable()
        return found

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their first lines, from the table (as click prints them, no module loaded)."""
        limit = formatter.width - 6 - max(len(e.name) for e in COMMANDS)
        with formatter.section("Commands"):
            formatter.write_dl([(e.name, click.Command(e.name, help=e.summary).get_short_help_str(limit))
                                for e in COMMANDS])


def load(module: str) -> click.Command:
    """The command that module tokenbench.cli.MODULE defines."""
    return importlib.import_module(f"tokenbench.cli.{module}").command


@click.group(cls=Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tokenbench")
@click.option("--debug", is_flag=True, help="show tracebacks for errors")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Deploy LLM inference servers and benchmark them exactly."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _sigterm_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)   # same clean teardown as Ctrl-C
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        _no_nul(argv)
        # not argv[0]: `python -m ...` in-process; outside standalone mode click returns a command's ctx.exit(N)
        # (`setup X --check`: 1 when a step is not done) as the value, not as an exception
        code = cli.main(args=argv, prog_name="tokenbench", standalone_mode=False)
        return code if type(code) is int else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:
        click.echo(f"error: {_one_line(exc.format_message())} (see `{_command_path(exc, argv)} --help`)", err=True)
        return 2
    except click.Abort as exc:                # click's form of a KeyboardInterrupt inside a command
        stored = isinstance(exc.__context__, KeyboardInterrupt)
        click.echo("error: interrupted" + ("; what was stored before is kept" if stored else ""), err=True)
        return Interrupted.exit_code
    except KeyboardInterrupt:
        click.echo("error: interrupted; what was stored before is kept", err=True)
        return Interrupted.exit_code
    except TokenbenchError as exc:
        return _render(exc, debug)
    except click.ClickException as exc:
        click.echo(f"error: {_one_line(exc.format_message())}", err=True)
        return exc.exit_code
    except OSError as exc:                   # a path the user gave that no command checked first
        return _render(_os_error(exc), debug)
    except Exception as exc:                 # a bug: still one line, and --debug shows where
        return _render(InternalError(f"internal error: {type(exc).__name__}: {str(exc)[:300]}",
                                     "rerun with --debug and report it"), debug)


def _os_error(exc: OSError) -> TokenbenchError:
    """An OS error no command turned into its own: the process's limit on open files names `ulimit -n`."""
    where = f"{exc.filename or 'a file'}: {exc.strerror or exc}"
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return TokenbenchError(f"{where}: this process may open {soft} files (ulimit -n) and had them all open",
                               "lower --concurrency / --max-concurrency, or raise the limit (`ulimit -n N` in the "
                               "shell that runs tokenbench)")
    return TokenbenchError(where, "check the path, its permissions and free space")


def _no_nul(argv: list[str] | None) -> None:
    """A NUL byte fits no path, URL or value (a shell cannot pass one; a caller of main() can)."""
    bad = next((a for a in argv or () if "\x00" in a), None)
    if bad is not None:
        raise UsageError(f"the argument {bad!r} holds a NUL byte, which no path, URL or value can",
                         "remove the NUL byte from that argument")


def _command_path(exc: click.UsageError, argv: list[str] | None) -> str:
    """The command whose --help answers a usage error (click leaves ctx unset for some parser errors)."""
    if exc.ctx is not None:
        return exc.ctx.command_path
    words = argv if argv is not None else sys.argv[1:]
    name = next((w for w in words if not w.startswith("-")), "")
    return f"tokenbench {name}" if name and name in cli.list_commands(click.Context(cli)) else "tokenbench"


def _one_line(text: str) -> str:
    return escape_breaks(text)


def _render(exc: TokenbenchError, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    click.echo(f"error: {exc.one_line()}", err=True)
    return exc.exit_code


def run() -> None:
    """The console script. Start-up allocates some 10^6 objects that live as long as the process; the
    collector is off while it imports them (its passes over them cost a bench 0.08 s of CPU) and they are
    frozen once the command is loaded (`Root.resolve_command`), and again at the exit, so the interpreter's
    last collections do not walk the heap either (0.15 s; docs/architecture.md, "Start-up")."""
    gc.disable()
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
