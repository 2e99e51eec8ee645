"""Options and warnings shared by the commands that render reports (report, compare, import, demo)."""

from __future__ import annotations

from pathlib import Path

import click

from tokenbench import __version__
from tokenbench.cli import console
from tokenbench.judge import history, plausibility
from tokenbench.judge.views import load_run
from tokenbench.report import render
from tokenbench.report.build import build_report
from tokenbench.report.history import REPORT_METRICS
from tokenbench.store.db import Store


def default_dir(db: str | None, name: str) -> Path:
    from tokenbench.store.db import default_db_path
    return (Path(db) if db else default_db_path()).parent / "reports" / name


def warn_flagged(checks: list[plausibility.ConfigCheck], run_id: str) -> None:
    n = plausibility.flagged(checks)
    if n:
        console.err.print(f"[bold red]warning:[/] run {run_id}: {n} result(s) beyond the decode roofline "
                          "(physically impossible); the report's plausibility section shows the arithmetic")


def plausibility_options(fn):
    for opt in reversed((
        click.option("--hardware", default=None, help="device for the roofline, e.g. ascend-910b4, h100, cpu"),
        click.option("--hardware-file", default=None, type=click.Path(dir_okay=False, exists=True),
                     help="YAML with extra/overriding devices (format of judge/hardware.yaml)"),
        click.option("--params-b", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="model parameters, billions (when the run did not store them)"),
        click.option("--bytes-per-param", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="bytes per weight: 2 for BF16"),
        click.option("--devices", type=click.IntRange(min=1), default=None, help="devices serving the model"),
    )):
        fn = opt(fn)
    return fn


def overrides(kw: dict) -> plausibility.Overrides:
    return plausibility.Overrides(hardware=kw["hardware"], hardware_file=kw["hardware_file"], params_b=kw["params_b"],
                                  bytes_per_param=kw["bytes_per_param"], devices=kw["devices"])


def write_report(store: Store, run_id: str, formats: tuple[str, ...] = ("md", "html")) -> list[Path]:
    """Render a stored run's report next to its database (reports/RUN), in English."""
    run = load_run(store, run_id)
    checks = plausibility.check_run(run, plausibility.Overrides())
    doc = build_report(run, "en", checks, __version__, series=history.of_run(store, run, REPORT_METRICS))
    return render.write(doc, store.path.parent / "reports" / run_id, list(formats))
