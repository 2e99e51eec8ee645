"""`tokenbench bench`: measure a running OpenAI-compatible server over one or more cells. A bench is a
study with one server configuration and no relaunch: its options are the sweep's (cli/flags.py)."""

from __future__ import annotations

import sys

import click

from tokenbench.cli import flags, progress, run_options
from tokenbench.study import run as study
from tokenbench.study.settings import RunSettings

build_spec = run_options.bench_spec       # the study spec of bench's options (translate checks with it too)


@click.command("bench", cls=run_options.StudyCommand)
@flags.apply(flags.SHARED)
@flags.length_options
@flags.peer_options
@run_options.apply
def command(**kw) -> None:
    """Benchmark a running OpenAI-compatible server: TTFT, TPOT, ITL, E2EL, throughput, goodput.
    vLLM's `bench serve` spellings are accepted (docs/cli.md)."""
    if kw["resume"]:
        run_options.refuse_spec_with_resume(kw, flags.SHARED)
    given = None if kw["resume"] else build_spec(kw)      # bad flags fail before a database is opened
    run_options.precheck(kw)
    with run_options.opened_store(kw) as store:
        spec = given or study.stored_spec(store, kw["resume"], "bench")
        planned = study.start(spec, store, RunSettings(kind="bench", output=kw["output"]), sys.argv, kw["resume"])
        files = run_options.result_files(kw, planned)
        out, display = progress.run(planned, files, quiet=kw["disable_tqdm"])
        progress.report(out, display, run_options.locations(kw, out, files), run_options.table_console(kw))
    study.check(out, "bench")
