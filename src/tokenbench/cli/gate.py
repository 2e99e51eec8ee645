"""`tokenbench gate --baseline RUNS|FILES --candidate RUNS|FILES`: the regression gate. Prints a one-screen
summary, writes the JSON, JUnit XML and report asked for, then exits 0 (pass) or with the outcome's code
(errors.GateRegressed, GateInconclusive, GateRefused) for a CI job to branch on."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table as RichTable

from tokenbench import __version__
from tokenbench.cli import console, options
from tokenbench.errors import GateInconclusive, GateNotPassed, GateRefused, GateRegressed, UsageError
from tokenbench.formats.junit import junit_xml
from tokenbench.judge.gate import GATE_METRICS, GateResult, Policy, result_dict
from tokenbench.metrics.uncertainty import MIN_EFFECT
from tokenbench.report import gate as words
from tokenbench.report import render
from tokenbench.report.i18n import LANGS
from tokenbench.store import outputs
from tokenbench.store.db import db_path
from tokenbench.store.outputs import write_text
from tokenbench.study.gate import GateRequest, gate, runs_of

OUTCOMES: dict[str, type[GateNotPassed]] = {"regressed": GateRegressed, "inconclusive": GateInconclusive,
                                            "refused": GateRefused}


def print_summary(result: GateResult, lang: str) -> None:
    for line in words.summary_lines(result, lang):
        console.out.print(escape(line))
    listed = words.shown(result)
    if listed:
        table = RichTable(*[escape(h) for h in words.headers(lang)], header_style="bold")
        for f in listed:
            table.add_row(*[escape(c) for c in words.row(f, lang)])
        console.out.print(table)
    rest = len([f for f in result.figures if f.decision != "no change"]) - len(listed)
    if rest > 0:
        console.out.print(f"  (+{rest} more in the JSON and the report)")


def _outputs(result: GateResult, given: dict, lang: str) -> None:
    if given["json_path"]:
        write_text(given["json_path"], json.dumps(result_dict(result), indent=1) + "\n", "--json")
        console.err.print(f"wrote {given['json_path']}")
    if given["junit"]:
        write_text(given["junit"], junit_xml(result), "--junit")
        console.err.print(f"wrote {given['junit']}")
    if given["out_dir"]:
        doc = words.document(result, lang, __version__)
        for path in render.write(doc, given["out_dir"], render.parse_formats(given["formats"]), stem="gate"):
            console.err.print(f"wrote {path}")


@click.command("gate")
@click.option("--baseline", "baseline", multiple=True, required=True,
              help="the baseline's runs: RUN, RUN:CONFIG or a result file (--output JSON); repeat or comma-separate")
@click.option("--candidate", "candidate", multiple=True, required=True, help="the candidate's runs, as --baseline")
@options.DB
@click.option("--alpha", type=click.FloatRange(min=0, max=0.5, min_open=True), default=0.05, show_default=True,
              help="false-alarm rate over the whole gate (every figure of every cell, and every look)")
@click.option("--min-effect", type=click.FloatRange(min=0, max=1), default=MIN_EFFECT, show_default=True,
              help="smallest relative change that counts: a smaller one is 'no change' when shown to be within it")
@click.option("--power", type=click.FloatRange(min=0.5, max=0.999), default=0.8, show_default=True,
              help="the power at which the smallest detectable change is stated")
@click.option("--figures", "figure_list", default=None,
              help="figures to gate, e.g. ttft:p50,tpot:mean,output_throughput, or an agents run's job figures "
                   "job:p95,job_ttft:p95 (default: throughputs and TTFT, TPOT, ITL, E2EL mean, p50, p99)")
@click.option("--allow-client-lag", is_flag=True, help="judge figures the client's delays may have moved (marked ~)")
@click.option("--repeat-until-decided", is_flag=True,
              help="measure the candidate again (and a baseline that deploys a profile) until every figure is "
                   "decided or --max-runs is reached; alpha is spent over the looks")
@click.option("--max-runs", type=click.IntRange(min=2), default=None, help="with --repeat-until-decided: the most "
              "runs a side may reach")
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="write the gate as JSON")
@click.option("--junit", default=None, type=click.Path(dir_okay=False),
              help="write JUnit XML: one testcase per cell x figure, a regression a failure")
@click.option("-o", "--output", "out_dir", default=None, type=click.Path(file_okay=False),
              help="write the gate's report (gate.md / gate.html) into this directory")
@click.option("--format", "formats", default="md,html", show_default=True, help="md, html or md,html")
@click.option("--lang", type=click.Choice(LANGS), default="en", show_default=True)
def command(baseline: tuple[str, ...], candidate: tuple[str, ...], db: str | None, alpha: float,  # noqa: PLR0913 (a click command)
            min_effect: float, power: float, figure_list: str | None, allow_client_lag: bool,
            repeat_until_decided: bool, max_runs: int | None, json_path: str | None, junit: str | None,
            out_dir: str | None, formats: str, lang: str) -> None:
    """Gate a candidate against a baseline: per cell and figure regressed, improved, no change or
    inconclusive, at a stated false-alarm rate; exit 0 pass, 10 regressed, 11 inconclusive, 12 refused."""
    if repeat_until_decided != (max_runs is not None):
        raise UsageError("--repeat-until-decided and --max-runs go together",
                         "give both (e.g. --repeat-until-decided --max-runs 6), or neither")
    render.parse_formats(formats)
    for path, flag in ((json_path, "--json"), (junit, "--junit")):
        if path:
            outputs.check(path, flag, probe=True)          # a path it cannot write fails before any run
    policy = Policy(alpha, min_effect, power, allow_client_lag, options.figures("--figures", figure_list, GATE_METRICS))
    request = GateRequest(runs_of(baseline), runs_of(candidate), policy, max_runs)
    result = gate(request, db_path(db), log=lambda m: console.err.print(escape(m)))
    print_summary(result, lang)
    _outputs(result, {"json_path": json_path, "junit": junit, "out_dir": out_dir, "formats": formats}, lang)
    if result.outcome in OUTCOMES:
        raise OUTCOMES[result.outcome](f"gate {result.outcome}: {words.counts(result, 'en')}",
                                       "see the summary above, the JSON or the report for each figure")
