"""Options of `bench` and `sweep` that say how the tool runs and where results go (not what is measured,
so not study-spec keys), and vLLM's spellings that need translating. Declared once for both commands."""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from tokenbench.cli import console, flags, options
from tokenbench.cli.flags import Flag, peers_given
from tokenbench.errors import TokenbenchError, UsageError
from tokenbench.spec.study import StudySpec
from tokenbench.store import commands, outputs
from tokenbench.store.db import Store, default_db_path
from tokenbench.study.run import Outcome, ResultFile, Study

if TYPE_CHECKING:
    from tokenbench.study.result_files import VllmOptions

PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")

OPTIONS = (
    click.option("--resume", default=None, metavar="RUN", help="continue this stored run: run only the cells "
                 "not stored yet or that did not end ok (its spec comes from the database)"),
    options.DB,
    click.option("--no-store", is_flag=True, help="do not keep a results database (a temporary one is used)"),
    click.option("--output", default=None, type=click.Path(dir_okay=False),
                 help="write tokenbench's JSON result (every cell and request), rewritten after each cell; - "
                 "prints it alone on stdout at the end (the table goes to stderr), for `| jq .`"),
    click.option("--save-result", is_flag=True, help="vLLM: write each cell as `vllm bench serve`'s result JSON"),
    click.option("--save-detailed", is_flag=True, help="vLLM: with --save-result, add the per-request lists"),
    click.option("--result-dir", default=None, type=click.Path(file_okay=False), help="vLLM: folder of the "
                 "--save-result files (default: the current folder)"),
    click.option("--result-filename", default=None, help="vLLM: name of the --save-result file (default: "
                 "{label}-{rate}qps[-concurrency{C}]-{model}-{date}.json; several cells: name-2.json, ...)"),
    click.option("--percentile-metrics", default="ttft,tpot,itl", show_default=True,
                 help="vLLM: metrics whose statistics --save-result writes (ttft, tpot, itl, e2el)"),
    click.option("--metric-percentiles", default="99", show_default=True,
                 help="vLLM: percentiles --save-result writes, e.g. 25,50,99"),
    click.option("--goodput", multiple=True, metavar="KEY:MS", help="vLLM: goodput SLOs, e.g. --goodput ttft:500 "
                 "tpot:50 (KEY in ttft, tpot, e2el); the same as --slo ttft=500,tpot=50"),
    click.option("--ignore-eos", is_flag=True, help="vLLM: accepted; tokenbench always asks exact output lengths "
                 "(ignore_eos and min_tokens on every request)"),
    click.option("--disable-tqdm", is_flag=True, help="vLLM/SGLang: no progress bars (each finished cell is still "
                 "one line)"),
    click.option("--output-file", default=None, type=click.Path(dir_okay=False), help="SGLang: append each cell as "
                 "one line of bench_serving's JSONL result to this file"),
    click.option("--output-details", is_flag=True, help="SGLang: with --output-file, add the per-request lists"),
)


def apply(f: Callable) -> Callable:
    for opt in reversed(OPTIONS):
        f = opt(f)
    return f


def peer_line(words: list[str], own: dict[str, bool], positional: bool) -> str | None:
    """peers/translate.pasted on a line that could be another tool's (it starts with a word that is not an
    option, or holds an option that is none of `own`); a line of tokenbench's own options is not read against
    the peers' tables, nor are they imported for it."""
    names = {"--" + w.partition("=")[0][2:].replace("_", "-") for w in words if w.startswith("--")}
    if (positional or not words or words[0].startswith("-")) and names <= own.keys():
        return None
    from tokenbench.peers.translate import pasted
    return pasted(words, own, positional)


class StudyCommand(click.Command):
    """Command lines as vLLM's and SGLang's parsers read them: an option may be abbreviated to any
    unambiguous prefix (`--random-input` is `--random-input-len`, argparse's rule) and vLLM's underscores
    are dashes (`--num_prompts`); vLLM's `--goodput ttft:500 tpot:50` takes several values, and as click
    options take one, each value after --goodput becomes its own `--goodput VALUE` before parsing."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        spelled = {name: p.name or "" for p in self.params for name in (*p.opts, *p.secondary_opts)
                   if name.startswith("--")}
        takes = {name: isinstance(p, click.Option) and not p.is_flag and not p.count
                 for p in self.params for name in (*p.opts, *p.secondary_opts) if name.startswith("--")}
        peer = peer_line(args, takes, positional=any(isinstance(p, click.Argument) for p in self.params))
        if peer is not None:
            why, _, hint = peer.partition(": run ")
            raise UsageError(f"a command line of another tool given to tokenbench {self.name}: {why}", f"run {hint}")
        expanded = expand_spellings(args, spelled)
        ctx.meta[flags.TYPED] = _typed_and_once(args, expanded, self.params)
        out, taking = [], False
        for arg in expanded:
            if arg == "--goodput":
                taking = True
                continue
            if taking and not arg.startswith("-"):
                out += ["--goodput", arg]
                continue
            taking = False
            out.append(arg)
        return super().parse_args(ctx, out)

    def invoke(self, ctx: click.Context):
        """The command; an error it raises names each option in the spelling typed (flags.as_typed)."""
        try:
            return super().invoke(ctx)
        except TokenbenchError as exc:
            exc.message, exc.hint = flags.as_typed(exc.message), flags.as_typed(exc.hint)
            raise


def _typed_and_once(typed_args: list[str], args: list[str], params: list[click.Parameter]) -> dict[str, str]:
    """{option's name: the spelling typed} (`typed_args`: as typed; `args`: the same, spelled out); an option
    that takes one value given twice with different values (under one spelling or two: --dataset-name and
    --kind) is refused, as click would keep the last in silence."""
    by_spelling = {s: p for p in params if isinstance(p, click.Option) for s in (*p.opts, *p.secondary_opts)}
    typed: dict[str, str] = {}
    values: dict[str, tuple[str, str]] = {}
    for i, arg in enumerate(args):
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        p = by_spelling.get(name)
        if p is None or p.name is None:
            continue
        name = typed_args[i].partition("=")[0]
        typed.setdefault(p.name, name)
        if p.multiple or p.is_flag or p.count:
            continue
        given = value if eq else (args[i + 1] if i + 1 < len(args) else "")
        first = values.setdefault(p.name, (name, given))
        if first[1] != given:
            raise UsageError(f"{first[0]} {first[1]} and {name} {given}: the same option twice, one value would be "
                             "ignored", "give it once")
    return typed


def expand_spellings(args: list[str], spelled: dict[str, str]) -> list[str]:
    """Each `--name[=value]` written out as an option of the command (`spelled`: spelling -> option); the
    rest as given. An ambiguous prefix is an error; an unknown name is left for click to report."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        name, eq, value = arg.partition("=")
        out.append(_spelled(name, spelled) + eq + value if arg.startswith("--") else arg)
    return out


def _spelled(name: str, spelled: dict[str, str]) -> str:
    dashed = "--" + name[2:].replace("_", "-")
    for exact in (name, dashed):
        if exact in spelled:
            return exact
    matches = sorted(n for n in spelled if n.startswith(dashed))
    if len({spelled[n] for n in matches}) > 1:
        raise UsageError(f"{name} is ambiguous: it could be {', '.join(matches)}", "spell the option out")
    return matches[0] if matches else name


def _rate_and_concurrency(kw: dict) -> None:
    """AIPerf's `--request-rate R --concurrency C` is ONE cell (rate R, at most C in flight); tokenbench's
    --concurrency is a closed-loop axis of its own, so the two together would be two kinds of cells."""
    if kw.get("concurrency") and kw.get("rates"):
        raise UsageError(f"--request-rate {kw['rates']} with --concurrency {kw['concurrency']}: these are two "
                         "kinds of cells here (closed loop at C, open loop at R), not a rate with a cap",
                         "for a rate with at most C in flight give --request-rate R --max-concurrency C "
                         "(--rate-cap gate: AIPerf's schedule, no catch-up); for both kinds, run them apart")


def _infinite_rate(data: dict) -> None:
    """vLLM's `--request-rate inf`: every request at once, at most --max-concurrency in flight, which is a
    closed loop at that concurrency (all --num-prompts requests at once without a cap)."""
    rates = data.get("rates") or []
    if not any(math.isinf(r) for r in rates):
        return
    width = data.get("max_concurrency") or (data.get("requests") or {}).get("num_prompts")
    if not width:
        raise UsageError("--request-rate inf sends every request at once: it needs --max-concurrency or "
                         "--num-prompts", "e.g. --request-rate inf --max-concurrency 8")
    data["rates"] = [r for r in rates if not math.isinf(r)]
    data["concurrency"] = [*data.get("concurrency", []), width]
    if not data["rates"]:
        data.pop("max_concurrency", None)        # it became the closed loop's width: no rate is left to cap


def translate(data: dict, kw: dict) -> dict:
    """Apply the vLLM spellings that are not plain aliases to the study mapping."""
    _rate_and_concurrency(kw)
    if kw["goodput"]:
        given, goodput = data.get("slo", {}), options.goodput(kw["goodput"])
        clash = next((k for k in goodput if k in given and given[k] != goodput[k]), None)
        if clash:
            raise UsageError(f"--goodput and --slo both set {clash}, to {goodput[clash]:g} and {given[clash]:g}",
                             "give it once (--goodput ttft:500 is --slo ttft=500)")
        data["slo"] = {**given, **goodput}
    _infinite_rate(data)
    return data


def bench_spec(kw: dict) -> StudySpec:
    """The study spec of `bench`'s options (cli/bench.py; cli/translate.py checks a command with it)."""
    if not kw["target__base_url"] and kw.get("peer__host") is None and kw.get("peer__port") is None:
        raise UsageError("--base-url is required (or vLLM's --host/--port)",
                         "e.g. tokenbench bench --base-url http://127.0.0.1:8000 ...")
    return flags.validate(translate(flags.study_data(kw, flags.SHARED), kw))


def refuse_spec_with_resume(kw: dict, flags: tuple[Flag, ...], others: Sequence[str] = ()) -> None:
    """A resumed run keeps its stored spec: a flag (or --set, or a SPEC.yaml) that would change it is refused,
    never silently ignored. How the tool runs (--db, --output, vLLM result files) may differ."""
    spelled = [f.familiar for f in flags if kw.get(f.dest) is not None]
    spelled += [f"--{n.replace('_', '-')}" for n in ("input_len", "output_len") if kw.get(n) is not None]
    spelled += list(peers_given(kw))
    spelled += list(others)
    if spelled:
        raise UsageError(f"{spelled[0]} with --resume: a resumed run keeps the spec it was stored with",
                         f"drop {spelled[0]} to resume {kw['resume']}, or start a new run with it")


def vllm_options(kw: dict) -> VllmOptions:
    metrics = tuple(m.strip() for m in kw["percentile_metrics"].split(",") if m.strip())
    bad = [m for m in metrics if m not in PERCENTILE_METRICS]
    if bad:
        raise UsageError(f"--percentile-metrics: '{bad[0]}' is not one of {', '.join(PERCENTILE_METRICS)}",
                         "write e.g. --percentile-metrics ttft,tpot,itl,e2el")
    pcts = tuple(options.float_list("--metric-percentiles", kw["metric_percentiles"]))
    if any(p > 100 for p in pcts):
        raise UsageError(f"--metric-percentiles '{kw['metric_percentiles']}': percentiles are in (0, 100]",
                         "write e.g. --metric-percentiles 50,90,99")
    from tokenbench.study.result_files import VllmOptions  # --save-result's: only when it is asked for
    return VllmOptions(kw["result_dir"], kw["result_filename"], metrics, pcts, kw["save_detailed"])


@contextlib.contextmanager
def opened_store(kw: dict) -> Iterator[Store]:
    """The results database; with --no-store a temporary one, removed afterwards."""
    if not kw["no_store"]:
        yield Store(kw["db"] or default_db_path())
        return
    folder = tempfile.mkdtemp(prefix="tokenbench-")
    try:
        store = Store(f"{folder}/results.db")
        store.kept = False
        yield store
    finally:
        shutil.rmtree(folder, ignore_errors=True)


SAVE_RESULT_ONLY = (("save_detailed", "--save-detailed"), ("result_dir", "--result-dir"),
                    ("result_filename", "--result-filename"))


def said_once(kw: dict) -> None:
    """Options of how the tool runs that contradict each other, or say nothing without another (refused in one
    line: one of them would be ignored in silence)."""
    pairs = [(kw["no_store"] and kw["db"], "--no-store with --db: a temporary database, or this one; give one"),
             (kw["no_store"] and kw["resume"], "--resume with --no-store: a run is resumed from its database; "
                                               "drop --no-store"),
             (kw["ignore_eos"] and kw.get("target__no_ignore_eos"), "--ignore-eos with --no-ignore-eos: give one"),
             (kw["output_details"] and not kw["output_file"], "--output-details says what --output-file writes, "
                                                               "and there is none; add --output-file FILE or drop it")]
    pairs += [(kw[name] and not kw["save_result"], f"{flag} shapes --save-result's file, and it is not asked; add "
               "--save-result or drop it") for name, flag in SAVE_RESULT_ONLY]
    pairs += [(kw[name] != default and not kw["save_result"], f"{flag} chooses what --save-result writes, and it is "
               "not asked; add --save-result or drop it") for name, flag, default in
              (("percentile_metrics", "--percentile-metrics", "ttft,tpot,itl"),
               ("metric_percentiles", "--metric-percentiles", "99"))]
    said = next((text for bad, text in pairs if bad), None)
    if said:
        cause, _, fix = said.rpartition("; ")
        raise UsageError(cause, fix)


def precheck(kw: dict) -> None:
    """Result paths and vLLM result options are checked before a run is stored or anything measured."""
    said_once(kw)
    if kw["output"]:
        outputs.check(kw["output"], probe=True)
    if kw.get("client__keep_raw"):
        outputs.check(kw["client__keep_raw"], "--keep-raw", probe=True)
    if kw["output_file"]:
        outputs.check(kw["output_file"], "--output-file", probe=True)
    if kw["save_result"]:
        opts = vllm_options(kw)
        target = Path(opts.result_dir or ".") / (opts.result_filename or "result.json")
        outputs.check(target, "--save-result", probe=True)


def result_files(kw: dict, planned: Study) -> list[ResultFile]:
    """The result files asked for besides tokenbench's JSON (--output, the runner's journal)."""
    files: list[ResultFile] = []
    if kw["save_result"]:
        from tokenbench.study.result_files import VllmResults  # other tools' result files: only when asked for
        files.append(VllmResults(planned.plan.spec, vllm_options(kw), len(planned.plan.cells)))
    if kw["output_file"]:
        from tokenbench.study.result_files import SglangResults
        files.append(SglangResults(planned.plan.spec, kw["output_file"], kw["output_details"],
                                   kw.get("peer__backend")))
    return files


def table_console(kw: dict) -> Console:
    """Where the results table goes: stdout, unless stdout carries the JSON result (`--output -`), so
    `--output - | jq .` reads JSON only."""
    return console.err if kw["output"] == outputs.STDOUT else console.out


def locations(kw: dict, out: Outcome, files: list[ResultFile]) -> list[str]:
    """Where the run was kept, preceded, for a resume that found nothing to measure, by saying so."""
    idle = [f"nothing to resume in run {out.run_id}: every cell is stored ok (or skipped on purpose), every "
            "search complete"] if kw["resume"] and not out.measured else []
    stored = [] if kw["no_store"] else [f"stored run {out.run_id} in {out.store.path}; "
                                        f"report with `{commands.tokenbench(out.store.path, 'report', out.run_id)}`"]
    return idle + stored + out.files + [line for f in files for line in f.locations()]
