"""Entry point. The one place that maps TokenbenchError to a one-line message and an exit code
(errors.EXIT_CODES, documented in docs/reliability.md). Anything else is still one line: an OSError
names its path, any other exception is an internal error (exit 70); `--debug` shows the traceback."""

from __future__ import annotations

import errno
import importlib
import resource
import signal
import sys
import threading
import traceback

import click

from tokenbench import __version__
from tokenbench.errors import InternalError, Interrupted, TokenbenchError, UsageError, escape_breaks

# Each command lives in its own module under tokenbench.cli and exposes `command` (a click command
# or group). Listed here once; the order is the order of `tokenbench --help`.
COMMAND_MODULES = [
    "demo",
    "deploy",
    "profiles",
    "smoke",
    "bench",
    "sweep",
    "tune",
    "translate",
    "calibrate",
    "setup",
    "agree",
    "runs",
    "report",
    "compare",
    "gate",
    "history",
    "import_",
    "export",
    "reference_server",
    "parse",
    "monitor",
    "doctor",
    "flaggems",
]


class Root(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [self._load(m).name or m for m in COMMAND_MODULES]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """The command's own module only (loading the others first cost a bench about 0.4 s of CPU)."""
        for mod in (name.replace("-", "_"), name + "_"):
            if mod in COMMAND_MODULES and (cmd := self._load(mod)).name == name:
                return cmd
        return None

    @staticmethod
    def _load(module: str) -> click.Command:
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
    sys.exit(main())


if __name__ == "__main__":
    run()
