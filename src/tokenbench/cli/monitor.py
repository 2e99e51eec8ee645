"""`tokenbench monitor`: a live terminal view of the accelerator, server and host signals."""

from __future__ import annotations

import time

import click
from rich.live import Live
from rich.table import Table

from tokenbench.cli import console
from tokenbench.deploy.engines import metric_names
from tokenbench.monitor.runner import Monitor
from tokenbench.monitor.samplers import default_samplers
from tokenbench.monitor.samples import Sample

_LABEL_ORDER = ("device", "chip", "name", "zone", "pid", "process", "engine")


@click.command("monitor")
@click.option("--base-url", default=None, help="inference server whose /metrics to read (e.g. http://127.0.0.1:8000)")
@click.option("--engine", type=click.Choice([*sorted(metric_names()), "auto"]), default="auto", show_default=True,
              help="whose metric names the server uses")
@click.option("--interval", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="seconds between samples and refreshes")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="stop after this many refreshes (default: until Ctrl-C)")
@click.option("--pid", type=int, default=None, help="also show CPU and memory of this process and its children")
def command(base_url: str | None, engine: str, interval: float, count: int | None, pid: int | None) -> None:
    """Show accelerator (npu-smi / nvidia-smi), server /metrics and host signals, refreshed live."""
    monitor = Monitor(default_samplers(base_url, engine, pid, metric_names()), interval_s=interval, on_warning=_warn)
    with monitor, Live(_table([]), console=console.out, auto_refresh=False) as live:
        t0 = time.perf_counter()
        n = 0
        while count is None or n < count:
            n += 1
            time.sleep(max(0.0, t0 + n * interval - time.perf_counter()))
            live.update(_table(_latest(monitor.snapshot())), refresh=True)


def _warn(message: str) -> None:
    console.err.print(message, markup=False, style="yellow")


def _latest(samples: list[Sample]) -> list[Sample]:
    """The newest sample of each signal; raw engine metrics (names with ':') are left out."""
    newest: dict[tuple, Sample] = {}
    for sample in samples:
        if ":" not in sample.name:
            newest[(sample.source, sample.name, tuple(sorted(sample.labels.items())))] = sample
    return sorted(newest.values(), key=lambda s: (s.source, _where(s), s.name))


def _where(sample: Sample) -> str:
    parts = [f"{key}={sample.labels[key]}" for key in _LABEL_ORDER if sample.labels.get(key)]
    return " ".join(parts)


def _table(samples: list[Sample]) -> Table:
    table = Table(title="tokenbench monitor (Ctrl-C to stop)")
    for name in ("source", "where", "signal"):
        table.add_column(name)
    table.add_column("value", justify="right")
    for sample in samples:
        table.add_row(sample.source, _where(sample), sample.name, console.fmt(sample.value))
    return table
