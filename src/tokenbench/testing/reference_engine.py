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
"""

from __future__ import annotations

import dataclasses
import sys

from tokenbench.errors import TokenbenchError
from tokenbench.spec.profile_args import flag_pairs
from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.reference_server import run_blocking

PROG = "python -m tokenbench.testing.reference_engine"
SGLANG_NAMES = {"max_running_requests": "max_running", "max_total_tokens": "kv_capacity_tokens",
                "context_length": "max_model_len", "served_model_name": "model", "otlp_traces_endpoint": "otlp_endpoint"}
IGNORED = ("model_path", "tp", "data_parallel_size", "enable_trace")
FIELDS = {f.name: f for f in dataclasses.fields(ReferenceConfig) if f.name not in ("faults", "api_key")}


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
    pairs = _pairs(argv)
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
    return ReferenceConfig(**fields), host, port  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> None:
    try:
        cfg, host, port = config(sys.argv[1:] if argv is None else argv)
    except TokenbenchError as exc:
        _refuse(f"ValueError: {exc.one_line()}")
        return
    print(f"{PROG}: serving {cfg.model} on {host}:{port} (max_running {cfg.max_running}, itl {cfg.itl_ms} ms "
          f"+ {cfg.itl_per_running_ms} ms per running request)", flush=True)
    run_blocking(cfg, host, port)


if __name__ == "__main__":
    main()
