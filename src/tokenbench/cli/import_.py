"""`tokenbench import FILE`: other tools' results as a run of kind "import" (reportable, comparable, checked)."""

from __future__ import annotations

import sys

import click

from tokenbench.cli import console, options
from tokenbench.cli.report_options import overrides, warn_flagged
from tokenbench.formats.importers import FORMATS, ImportOptions, import_file
from tokenbench.judge import plausibility
from tokenbench.judge.views import load_run
from tokenbench.report.explain import unknown_text
from tokenbench.report.i18n import t
from tokenbench.store.db import Store, default_db_path


@click.command("import")
@click.argument("file", type=click.Path(exists=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="vllm (bench serve JSON), sglang (bench_serving JSONL), csv (published figures), aisbench (the "
                   "performances/<model>/ folder or a file of it) or tokenbench (its --output JSON, a recovery file, "
                   "export JSON or CSV); default: told from the content")
@options.DB
@click.option("--engine", default=None, help="engine that served the results (vllm, sglang, ...)")
@click.option("--engine-version", default=None)
@click.option("--model", default=None, help="model name")
@click.option("--config", default=None, help="server config name for all imported cells")
@click.option("--hardware", default=None, help="device, e.g. ascend-910b4, h100 (for the plausibility check)")
@click.option("--devices", type=click.IntRange(min=1), default=None, help="devices serving the model")
@click.option("--params-b", type=click.FloatRange(min=0, min_open=True), default=None, help="parameters, billions")
@click.option("--bytes-per-param", type=click.FloatRange(min=0, min_open=True), default=None,
              help="bytes per weight: 2 for BF16")
def command(file: str, fmt: str | None, db: str | None, **kw) -> None:
    """Import results of vllm bench serve, SGLang bench_serving, AISBench, a CSV of published figures, or a
    file tokenbench wrote (--output JSON, recovery file, export JSON or CSV)."""
    opts = ImportOptions(engine=kw["engine"], engine_version=kw["engine_version"], model=kw["model"],
                         hardware=kw["hardware"], devices=kw["devices"], params_b=kw["params_b"],
                         bytes_per_param=kw["bytes_per_param"], config=kw["config"])
    store = Store(db or default_db_path())
    run_id = import_file(store, file, fmt, opts, ["tokenbench", *sys.argv[1:]])
    run = load_run(store, run_id, requests=False)
    console.out.print(run_id)
    console.err.print(f"imported {len(run.cells)} cell(s) from {file} as run {run_id} in {store.path}")
    checks = plausibility.check_run(run, overrides({**kw, "hardware_file": None}))
    for chk in checks:
        if chk.roofline is None:
            reason = unknown_text(chk.skipped, "en") if chk.skipped else "-"
            console.err.print(t("en", "plaus.skipped", config=chk.config.name, reason=reason), markup=False)
    warn_flagged(checks, run_id)
