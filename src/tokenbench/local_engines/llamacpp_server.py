"""The llama.cpp HTTP server (C++, through the xllamacpp wheel) as a process of its own.

    python -m tokenbench.local_engines.llamacpp_server --model PATH --host H --port P \
        [--slots N] [--ctx C] [--threads T] [--alias NAME] [--any_common_param VALUE ...]

Any further `--name value` (or bare `--name`, meaning true) sets `xllamacpp.CommonParams.name`
(dotted names reach nested params, e.g. `--sampling.seed 1`), so a profile's `args` pass straight
through. /metrics, /slots and /props are on, the web UI off. It serves until SIGTERM or SIGINT
and then stops the server: at once when idle, within EXIT_WATCHDOG_S with requests in flight.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from tokenbench.spec.profile_args import flag_pairs

PROG = "python -m tokenbench.local_engines.llamacpp_server"
EXIT_WATCHDOG_S = 1    # whole seconds (alarm)


def parse(argv: list[str]) -> tuple[argparse.Namespace, dict[str, str | bool]]:
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("--model", required=True, help="path to the .gguf file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--slots", type=int, default=None, help="parallel sequences (n_parallel)")
    parser.add_argument("--ctx", type=int, default=None, help="total context, split over the slots")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for generation and prompt")
    parser.add_argument("--alias", default=None, help="model id listed by /v1/models")
    parser.add_argument("--api-key", action="append", default=[], help="require this key (repeatable), as llama-server")
    args, rest = parser.parse_known_args(argv)
    return args, _pairs(parser, rest)


def _pairs(parser: argparse.ArgumentParser, rest: list[str]) -> dict[str, str | bool]:
    try:
        return flag_pairs(rest)
    except ValueError as exc:
        parser.error(str(exc))


def _coerce(current: object, raw: str | bool) -> object:
    if isinstance(current, bool):
        return raw if isinstance(raw, bool) else raw.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(current, (int, float, str)):
        return type(current)(raw)
    raise TypeError(f"a {type(current).__name__} cannot be set from the command line")


def _set(params: object, dotted: str, raw: str | bool) -> None:
    *parents, leaf = dotted.split(".")
    target = params
    for name in parents:
        target = getattr(target, name)
    if not hasattr(target, leaf):
        raise AttributeError(f"xllamacpp.CommonParams has no parameter '{dotted}'")
    setattr(target, leaf, _coerce(getattr(target, leaf), raw))


def build_params(args: argparse.Namespace, extra: dict[str, str | bool]):
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = args.model
    p.hostnames = [args.host]
    p.port = args.port
    if args.slots:
        p.n_parallel = args.slots
    if args.ctx:
        p.n_ctx = args.ctx
    if args.threads:
        p.cpuparams.n_threads = args.threads
        p.cpuparams_batch.n_threads = args.threads
    if args.alias:
        p.model_alias = {args.alias}
    if args.api_key:
        p.api_keys = list(args.api_key)
    p.endpoint_metrics = p.endpoint_slots = p.endpoint_props = True
    p.ui = False
    for name, raw in extra.items():
        _set(p, name, raw)
    return p


def serve(args: argparse.Namespace, extra: dict[str, str | bool]) -> int:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    import xllamacpp

    try:
        params = build_params(args, extra)
    except (AttributeError, TypeError, ValueError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        return 2
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:
        print(f"{PROG}: llama.cpp server did not start: {exc} (see the lines above)", file=sys.stderr, flush=True)
        return 1
    print(f"{PROG}: serving {args.model} on http://{args.host}:{args.port} "
          f"(xllamacpp {_version()})", file=sys.stderr, flush=True)
    while not stop.wait(1.0):
        pass
    # llama.cpp's shutdown returns at once when idle but can wait forever on streams still in
    # flight, inside C++ and holding the GIL; the kernel ends it then (SIGALRM's default action).
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(EXIT_WATCHDOG_S)
    del server
    signal.alarm(0)
    print(f"{PROG}: stopped", file=sys.stderr, flush=True)
    return 0


def _version() -> str:
    from importlib.metadata import version

    return version("xllamacpp")


def main(argv: list[str] | None = None) -> int:
    args, extra = parse(sys.argv[1:] if argv is None else argv)
    return serve(args, extra)


if __name__ == "__main__":
    sys.exit(main())
