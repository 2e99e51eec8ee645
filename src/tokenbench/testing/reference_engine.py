"""The reference server as a stand-in engine a profile can launch: it takes SGLang's launch command line (the
`sglang` adapter renders it, so facts come from the reference server's SGLang-style /get_server_info) and
sets the reference server's load model from its flags, so configs of a profile change the load model in a
known way (`tokenbench tune reference-sglang --vary args.max-running-requests=4,8`, the built-in profile).

    python -m tokenbench.testing.reference_engine --model-path P --host H --port N [--served-model-name M]
        [--max-running-requests N] [--max-total-tokens N] [--context-length N] [--ttft-ms X] [--itl-ms X]
        [--itl-per-running-ms X] [--prefill-ms-per-token X] [--captured-batch-sizes 1,2,4] [any other
        ReferenceConfig field as --field-name VALUE]

SGLang's own names map to the reference server's fields (max-running-requests -> max_running,
max-total-tokens -> kv_capacity_tokens, context-length -> max_model_len, otlp-traces-endpoint -> otlp_endpoint,
over gRPC as SGLang exports, so a study that traces the engine gets the reference server's spans);
--model-path is accepted and not read (the reference server has its own tokenizer), --enable-trace, --tp and
--data-parallel-size are accepted and change nothing. A flag it does not know ends it at once with argparse's `unrecognized arguments` line, as an engine
does, and so does a refused value (exit 2).

A fault of the engine itself, for studies that must survive a config whose engine dies under load (a tune):
`--die-after-s S` ends the process S seconds after it started with an out-of-memory line in its log (exit 1),
as an engine whose memory grows with its work runs out; with `--die-if-running-above N` only an engine whose
`--max-running-requests` is above N does (a bigger batch needs more memory), so one profile's configs differ;
`--die-after-s inf` never dies (a value of a varied axis that is no death).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time

import psutil

from tokenbench.errors import TokenbenchError
from tokenbench.spec.profile_args import flag_pairs
from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.reference_server import run_blocking

PROG = "python -m tokenbench.testing.reference_engine"
SGLANG_NAMES = {"max_running_requests": "max_running", "max_total_tokens": "kv_capacity_tokens",
                "context_length": "max_model_len", "served_model_name": "model", "otlp_traces_endpoint": "otlp_endpoint"}
IGNORED = ("model_path", "tp", "data_parallel_size", "enable_trace")
FIELDS = {f.name: f for f in dataclasses.fields(ReferenceConfig) if f.name not in ("faults", "api_key")}
DEATH = ("RuntimeError: out of memory: the reference engine's --die-after-s fault ended it {after:g} s after its "
         "start (max_running {running})")


@dataclasses.dataclass(frozen=True)
class Death:
    """The engine's own fault: it dies `after_s` seconds after its start, when its batch cap is above
    `above` (None: whatever its cap)."""

    after_s: float
    above: int | None = None

    def applies(self, cfg: ReferenceConfig) -> bool:
        """Whether this engine dies: a finite time (inf: never, so one value of a varied axis can be no death)
        and a batch cap above `above`."""
        capped = self.above is None or cfg.max_running is None or cfg.max_running > self.above
        return capped and self.after_s != float("inf")


def _death(pairs: dict[str, str | bool]) -> Death | None:
    """The --die-after-s fault, taken out of the engine's flags (None: not asked)."""
    after, above = pairs.pop("die_after_s", None), pairs.pop("die_if_running_above", None)
    if after is None:
        if above is not None:
            _refuse("argument --die-if-running-above: needs --die-after-s")
        return None
    try:
        death = Death(float(str(after)), None if above is None else int(str(above)))
    except ValueError:
        _refuse(f"argument --die-after-s/--die-if-running-above: invalid value: '{after}', '{above}'")
        raise
    if death.after_s <= 0:
        _refuse(f"ValueError: --die-after-s must be greater than 0 (got {after})")
    return death


def _pairs(argv: list[str]) -> dict[str, str | bool]:
    """`--name value` and bare `--name` (true) pairs; anything else is refused as argparse would."""
    try:
        return flag_pairs(argv)
    except ValueError:
        _refuse(f"unrecognized arguments: {' '.join(w for w in argv if not w.startswith('--'))}")
        raise


def _refuse(line: str) -> None:
    print(f"{PROG}: error: {line}", file=sys.stderr, flush=True)
    sys.exit(2)


def _value(name: str, raw: str | bool) -> object:
    kind = str(FIELDS[name].type)
    if "bool" in kind:
        return raw if isinstance(raw, bool) else raw.strip().lower() in ("1", "true", "yes", "on")
    text = str(raw)
    if "tuple" in kind:
        return tuple(int(x) for x in text.split(","))
    return int(text) if kind.startswith("int") else float(text) if kind.startswith("float") else text


def config(argv: list[str]) -> tuple[ReferenceConfig, str, int]:
    """The reference server's config, host and port from the engine's command line."""
    cfg, host, port, _ = engine(argv)
    return cfg, host, port


def engine(argv: list[str]) -> tuple[ReferenceConfig, str, int, Death | None]:
    """The reference server's config, host and port from the engine's command line, and its death fault."""
    pairs = _pairs(argv)
    death = _death(pairs)
    host, port = str(pairs.pop("host", "127.0.0.1")), int(str(pairs.pop("port", "0")))
    fields: dict[str, object] = {"ttft_ms": 10.0, "itl_ms": 10.0}
    for name, raw in pairs.items():
        if name in IGNORED:
            continue
        field = SGLANG_NAMES.get(name, name)
        if field not in FIELDS:
            _refuse(f"unrecognized arguments: --{name.replace('_', '-')}")
        try:
            fields[field] = _value(field, raw)
        except ValueError:
            _refuse(f"argument --{name.replace('_', '-')}: invalid value: '{raw}'")
    if "otlp_endpoint" in fields and "otlp_protocol" not in fields:      # SGLang exports its spans over gRPC
        fields["otlp_protocol"] = "http" if str(fields["otlp_endpoint"]).startswith("http") else "grpc"
    return ReferenceConfig(**fields), host, port, death  # type: ignore[arg-type]


def _die_later(death: Death, cfg: ReferenceConfig) -> None:
    """End the process `after_s` seconds after it started (its imports included), with the line an engine
    out of memory leaves in its log."""
    def die() -> None:
        print(DEATH.format(after=death.after_s, running=cfg.max_running), file=sys.stderr, flush=True)
        os._exit(1)
    age = time.time() - psutil.Process().create_time()
    timer = threading.Timer(max(death.after_s - age, 0.0), die)
    timer.daemon = True
    timer.start()


def main(argv: list[str] | None = None) -> None:
    try:
        cfg, host, port, death = engine(sys.argv[1:] if argv is None else argv)
    except TokenbenchError as exc:
        _refuse(f"ValueError: {exc.one_line()}")
        return
    if death is not None and death.applies(cfg):
        _die_later(death, cfg)
    print(f"{PROG}: serving {cfg.model} on {host}:{port} (max_running {cfg.max_running}, itl {cfg.itl_ms} ms "
          f"+ {cfg.itl_per_running_ms} ms per running request)", flush=True)
    run_blocking(cfg, host, port)


if __name__ == "__main__":
    main()
