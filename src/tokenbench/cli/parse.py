"""`tokenbench parse npu-smi|nvidia-smi|prometheus FILE`: a captured tool output -> samples as JSON.

For captures sent from machines without tokenbench. Offline samples have no clock: `t_ns` is 0.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import click

from tokenbench.deploy.engines import metric_names
from tokenbench.errors import UsageError
from tokenbench.inputs import check_readable
from tokenbench.monitor import npu_smi, nvidia_smi, nvidia_text, prometheus
from tokenbench.monitor.samples import Sample

Parser = Callable[[str, str | None, str | None], tuple[list[Sample], dict]]


def _npu(text: str, engine: str | None, query: str | None) -> tuple[list[Sample], dict]:
    info = npu_smi.parse_npu_smi(text)
    meta = {"version": info.version, "chips": len(info.chips), "processes": len(info.processes),
            "idle_npus": list(info.idle_npus)}
    return npu_smi.npu_samples(info, 0), meta


def _gpu(text: str, engine: str | None, query: str | None) -> tuple[list[Sample], dict]:
    columns = tuple(q.strip() for q in query.split(",")) if query else nvidia_smi.QUERY
    form, readings = nvidia_text.parse_any(text, columns)
    if not readings:
        raise UsageError(f"no GPU found in this nvidia-smi {form} capture",
                         "pass the output of `nvidia-smi`, `nvidia-smi -q`, `nvidia-smi dmon` or `--query-gpu=... "
                         "--format=csv`")
    driver, cuda = nvidia_text.table_versions(text) if form == "table" else (None, None)
    if form == "query":
        log = nvidia_text.parse_query_log(text)
        driver, cuda = log.driver, log.cuda
    versions = {k: v for k, v in {"driver": driver, "cuda": cuda}.items() if v}
    return nvidia_smi.gpu_samples(readings, 0), {"format": form, **versions, "gpus": len({r.index for r in readings})}


def _server(text: str, engine: str | None, query: str | None) -> tuple[list[Sample], dict]:
    metrics = prometheus.parse_prometheus(text, metric_names(), None if engine in (None, "auto") else engine)
    return prometheus.server_samples(metrics, 0), {"engine": metrics.engine, "signals": metrics.signals}


PARSERS: dict[str, Parser] = {"npu-smi": _npu, "nvidia-smi": _gpu, "prometheus": _server}


@click.command("parse")
@click.argument("kind", type=click.Choice(sorted(PARSERS)))
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--engine", type=click.Choice([*sorted(metric_names()), "auto"]), default=None,
              help="prometheus: whose metric names to map (default: detected from the metric prefixes)")
@click.option("--query", default=None, metavar="FIELDS",
              help="nvidia-smi CSV: the --query-gpu list of a capture made with noheader "
                   f"(default: {','.join(nvidia_smi.QUERY)})")
def command(kind: str, file: str, engine: str | None, query: str | None) -> None:
    """Parse a captured npu-smi / nvidia-smi (CSV, table, -q, dmon) / Prometheus output and print its samples as
    JSON."""
    if engine is not None and kind != "prometheus":
        raise UsageError("--engine applies to prometheus captures only", f"drop --engine for {kind}")
    if query is not None and kind != "nvidia-smi":
        raise UsageError("--query applies to nvidia-smi captures only", f"drop --query for {kind}")
    samples, meta = PARSERS[kind](_read(file), engine, query)
    document = {"kind": kind, "file": file, **meta, "samples": [s.to_dict() for s in samples]}
    click.echo(json.dumps(document, indent=1))


def _read(file: str) -> str:
    if file == "-":
        return sys.stdin.read()
    check_readable(file, "capture")
    try:
        with open(file, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror}", "check the path and its permissions") from exc
