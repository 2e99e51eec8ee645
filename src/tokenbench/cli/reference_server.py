"""`tokenbench reference-server`: run the ground-truth OpenAI-compatible server until SIGINT/SIGTERM."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import click

from tokenbench.errors import UsageError
from tokenbench.testing.config import REASONING_FIELDS
from tokenbench.testing.faults import FAULT_KINDS, parse_fault
from tokenbench.testing.reference_server import ReferenceConfig, RunningReference, run_blocking

_FIELDS = {f.name: f for f in dataclasses.fields(ReferenceConfig)}


def _opt(flag: str, name: str, type_: Any = None, **extra: Any):
    """A click option whose default and help come from the ReferenceConfig field (declared once)."""
    f = _FIELDS[name]
    if f.default is dataclasses.MISSING:
        return click.option(flag, name, type=type_, required=True, help=f.metadata["help"], **extra)
    return click.option(flag, name, type=type_, default=f.default, show_default=True,
                        help=f.metadata["help"], **extra)


def _sizes(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    """`1,2,4,8` -> (1, 2, 4, 8): the captured batch sizes."""
    if value is None:
        return None
    try:
        sizes = tuple(int(part) for part in value.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise click.BadParameter(f"{value!r} is not a list of batch sizes; write e.g. 1,2,4,8,16")
    return sizes


@click.command("reference-server")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="port to listen on (0 = a free one, printed at start)")
@_opt("--ttft-ms", "ttft_ms", click.FloatRange(min=0))
@_opt("--itl-ms", "itl_ms", click.FloatRange(min=0))
@_opt("--tokens-per-chunk", "tokens_per_chunk", click.IntRange(min=1))
@_opt("--chunks-per-write", "chunks_per_write", click.IntRange(min=1))
@_opt("--itl-end-ms", "itl_end_ms", click.FloatRange(min=0))
@_opt("--ramp-s", "ramp_s", click.FloatRange(min=0, min_open=True))
@_opt("--vocab-size", "vocab_size", click.IntRange(min=4))
@click.option("--report-vocab/--no-report-vocab", "report_vocab", default=True, show_default=True,
              help=_FIELDS["report_vocab"].metadata["help"])
@_opt("--model", "model", str)
@_opt("--max-model-len", "max_model_len", click.IntRange(min=2))
@_opt("--kv-capacity", "kv_capacity_tokens", click.IntRange(min=1))
@_opt("--max-running", "max_running", click.IntRange(min=1))
@click.option("--honor-ignore-eos/--no-honor-ignore-eos", "honor_ignore_eos", default=True,
              show_default=True, help=_FIELDS["honor_ignore_eos"].metadata["help"])
@click.option("--usage/--no-usage", "send_usage", default=True, show_default=True,
              help=_FIELDS["send_usage"].metadata["help"])
@_opt("--send-log", "send_log", click.Path(dir_okay=False))
@_opt("--recording", "recording", click.Path(dir_okay=False, exists=True))
@click.option("--continuous-usage/--no-continuous-usage", "continuous_usage", default=True, show_default=True,
              help=_FIELDS["continuous_usage"].metadata["help"])
@click.option("--usage-chunk/--no-usage-chunk", "usage_chunk", default=False, show_default=True,
              help=_FIELDS["usage_chunk"].metadata["help"])
@click.option("--token-ids/--no-token-ids", "token_ids", default=True, show_default=True,
              help=_FIELDS["token_ids"].metadata["help"])
@click.option("--tokenize/--no-tokenize", "tokenize_endpoint", default=True, show_default=True,
              help=_FIELDS["tokenize_endpoint"].metadata["help"])
@_opt("--reasoning-tokens", "reasoning_tokens", click.IntRange(min=0))
@_opt("--reasoning-field", "reasoning_field", click.Choice(REASONING_FIELDS))
@_opt("--empty-every", "empty_every", click.IntRange(min=0))
@click.option("--tool-calls/--no-tool-calls", "tool_calls", default=False, show_default=True,
              help=_FIELDS["tool_calls"].metadata["help"])
@click.option("--api-key-env", metavar="VAR", help="require `Authorization: Bearer $VAR`")
@click.option("--fault", "fault_specs", multiple=True, metavar="NAME=RATE",
              help=f"inject a fault in this share of requests (repeatable); NAME is one of "
                   f"{', '.join(FAULT_KINDS)}")
@_opt("--seed", "seed", int)
@_opt("--stall-s", "stall_s", click.FloatRange(min=0))
@_opt("--slow-headers-s", "slow_headers_s", click.FloatRange(min=0))
@_opt("--slow-end-s", "slow_end_s", click.FloatRange(min=0))
@_opt("--proxy-buffer-bytes", "proxy_buffer_bytes", click.IntRange(min=1))
@_opt("--itl-per-running-ms", "itl_per_running_ms", click.FloatRange(min=0))
@_opt("--prefill-ms-per-token", "prefill_ms_per_token", click.FloatRange(min=0))
@_opt("--captured-batch-sizes", "captured_batch_sizes", str, metavar="N,N,...", callback=_sizes)
@_opt("--eager-itl-factor", "eager_itl_factor", click.FloatRange(min=1))
@_opt("--eager-itl-ms", "eager_itl_ms", click.FloatRange(min=0))
@_opt("--prefix-cache-blocks", "prefix_cache_blocks", click.IntRange(min=1))
@_opt("--block-size", "block_size", click.IntRange(min=1))
@_opt("--spec-tokens", "spec_tokens", click.IntRange(min=0))
@_opt("--spec-accept-text", "spec_accept_text", click.FloatRange(0, 1))
@_opt("--spec-accept-random", "spec_accept_random", click.FloatRange(0, 1))
@_opt("--otlp-endpoint", "otlp_endpoint", str, metavar="URL")
@_opt("--otlp-protocol", "otlp_protocol", click.Choice(["http", "grpc"]))
@_opt("--span-clock-offset-ms", "span_clock_offset_ms", float)
@click.option("--vllm-metrics/--no-vllm-metrics", "vllm_metrics", default=False, show_default=True,
              help=_FIELDS["vllm_metrics"].metadata["help"])
def command(host: str, port: int, api_key_env: str | None, fault_specs: tuple[str, ...],
            **fields: Any) -> None:
    """Serve /v1/completions and /v1/chat/completions with tokens at exact deadlines.

    Token i of a request is written at admission + TTFT + i*ITL; --send-log records every write.
    See docs/reference-server.md.
    """
    try:
        faults = dict(parse_fault(spec) for spec in fault_specs)
    except UsageError as exc:
        raise click.BadParameter(exc.one_line(), param_hint="--fault") from None
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise UsageError(f"environment variable {api_key_env} is not set or empty",
                             hint=f"export {api_key_env}=<key> or drop --api-key-env")
    config = ReferenceConfig(**fields, api_key=api_key, faults=faults)

    def ready(ref: RunningReference) -> None:
        click.echo(f"reference server listening on {ref.url} (model {config.model}); Ctrl-C stops it")

    try:
        run_blocking(config, host, port, ready)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                         hint="choose another --port (0 picks a free one)") from None
