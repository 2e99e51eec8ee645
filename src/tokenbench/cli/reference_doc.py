"""docs/cli.md, generated from the declarations of the `bench` and `sweep` options (cli/flags.py,
cli/run_options.py), so the reference cannot drift from the code. Regenerate:
`python -m tokenbench.cli.reference_doc > docs/cli.md` (tests/study/test_cli_doc.py checks it is current)."""

from __future__ import annotations

from typing import get_origin

import click

from tokenbench.cli import flags, run_options, tune

HEAD = """# CLI reference: `bench`, `sweep` and `tune`

Generated from the study spec (`src/tokenbench/spec/study.py`) by `python -m tokenbench.cli.reference_doc`;
do not edit by hand. A benchmark is a study with one server configuration and no relaunch, so `bench` and
`sweep` take the same options, each the flag of one key of the sweep YAML (`tokenbench sweep --fields`
lists the keys; flags given with a SPEC.yaml override it). vLLM's `vllm bench serve` spellings are
accepted as aliases, in the third column.

Both run through the same orchestration (`study/`), so they behave alike: every cell is stored in one
transaction as it finishes (`--resume RUN` runs the cells not stored or stored not ok, with the spec it was stored with: a
spec flag given with it is refused; one process measures a run at a time), the server's Prometheus metrics
are sampled during each cell, and an engine with a prefix-cache reset endpoint (vLLM, SGLang) is reset
before each cell so no cell is served from the previous one's cache.
"""

VLLM_NOTES = """## Coming from `vllm bench serve` or SGLang's `bench_serving`

- `--random-input-len N --random-output-len M` are `--input-len` / `--output-len`: every prompt has exactly
  N tokens and every answer exactly M (`ignore_eos` and `min_tokens` on every request), so `--ignore-eos`
  is accepted and changes nothing.
- `--random-range-ratio r` draws each request's own lengths, each still asked exactly and verified
  (docs/workloads.md, "Length distributions"): vLLM's meaning by default (uniform in `[L(1-r), L(1+r)]`, 0 is
  exact); SGLang's (uniform in `[max(L r, 1), L]`, 1 is exact, 0 is 1..L) with `--range-ratio-style sglang`,
  which an SGLang-only `--backend` (sglang, sglang-oai, sglang-oai-chat, vllm-chat, lmdeploy) implies.
  SGLang's own defaults (lengths 1..L when no ratio is given, 1024 output tokens, one warmup request, port
  30000) come with `tokenbench translate -- python3 -m sglang.bench_serving ...` (docs/peers.md).
- `--host`/`--port` build the base URL, `--backend`/`--endpoint` choose the API, `--random-prefix-len P` is a
  shared prefix of P tokens before the random ones; options may be shortened to any unambiguous prefix
  (`--random-input 1024`, argparse's rule) and written with underscores (`--num_prompts`, as vLLM).
- `--request-rate R` with `--concurrency C` is refused: tokenbench's `--concurrency` is a closed-loop axis of
  its own. A rate with at most C in flight is `--request-rate R --max-concurrency C` (`--rate-cap gate` for
  AIPerf's schedule, which waits for a free slot and goes on at the rate from there, no catch-up).
- `--max-concurrency C` alone is one closed-loop cell at concurrency C (vLLM's default `--request-rate inf`
  bounded by C); `--request-rate inf --max-concurrency C` is the same; `--request-rate R` with
  `--max-concurrency C` is an open-loop cell at R requests/s with at most C in flight.
- `--request-rate R` with `--num-prompts N` sends N requests on one schedule spanning (N - 1) / R: Poisson
  gaps scaled to that length as vLLM scales its gaps (vLLM: N / R, its first request after a first gap;
  docs/metrics.md, "Open-loop schedules"), seeded per cell; the rate asked, scheduled and sent is stored
  with the cell. `--burstiness B` shapes the gaps as vLLM does (gamma of shape B, same rate: B < 1
  burstier, B > 1 more even); `--arrival constant` spaces requests exactly evenly (vLLM's `--burstiness
  inf`).
- `--goodput ttft:500 tpot:50` is `--slo ttft=500,tpot=50` (KEY in ttft, tpot, e2el; milliseconds).
- `--num-warmups N` is `--warmup-requests N`; `--label` names the study (`name`), and the result files.
- `--save-result` writes one JSON per cell with the top-level keys of vLLM's result file (`date`, `backend`,
  `model_id`, `num_prompts`, `request_rate`, `max_concurrency`, `completed`, `request_throughput`,
  `output_throughput`, `mean_ttft_ms`, `p99_tpot_ms`, ...), named as vLLM names it in `--result-dir`, or
  `--result-filename` (numbered `-2`, `-3` for later cells); `--save-detailed` adds the per-request lists.
  `--percentile-metrics` and `--metric-percentiles` choose the statistics, with vLLM's defaults.
- The API key: `--api-key-env VAR` or `--api-key-file FILE`; with neither, `OPENAI_API_KEY` is read when set.
"""


def _row(names: list[str], key: str, vllm: str, kind: str, default: str, text: str) -> str:
    cells = [", ".join(f"`{n}`" for n in names), f"`{key}`" if key else "-", vllm or "-", kind, default or "-",
             text.replace("|", "\\|")]
    return "| " + " | ".join(cells) + " |"


def _kind(flag: flags.Flag, annotation) -> str:
    """What a flag takes, in words: nothing (a switch), a JSON object, a comma list, or its click type."""
    if annotation is bool:
        return "flag"
    if get_origin(annotation) is dict:
        return "JSON object"
    return "list" if flag.parse in flags.LIST_PARSERS else flags.click_type(annotation).name


def _flag_rows(group: tuple[flags.Flag, ...]) -> list[str]:
    rows = []
    for flag in group:
        text, default = flags.describe(flag)
        info = flags.field_at(flags.StudySpec, flag.key)
        kind = _kind(flag, info.annotation)
        names = [flag.flag, *(n for n in flag.names if n != flag.flag)]
        vllm = ", ".join(f"`{n}`" for n in flag.vllm)
        shown = default is not None and not isinstance(default, bool)
        rows.append(_row(names, flag.key, vllm, kind, str(default) if shown else "", text))
    return rows


def _default(p: click.Parameter) -> str:
    return str(p.default) if isinstance(p.default, (int, float, str)) and p.default not in (False, "") else ""


def _option_rows(decorators) -> list[str]:
    def collect(**kw) -> None:
        """Collects the options."""
    for deco in reversed(decorators):
        collect = deco(collect)
    rows = []
    for p in click.command()(collect).params:
        names = [*p.opts, *p.secondary_opts]
        ours = [n for n in names if not n.startswith("--random-")] or names
        peer = (p.help or "").startswith(("vLLM", "SGLang"))
        theirs = [n for n in names if n.startswith("--random-")] or (names if peer else [])
        rows.append(_row(ours, "", ", ".join(f"`{n}`" for n in theirs),
                         "flag" if getattr(p, "is_flag", False) else p.type.name, _default(p), p.help or ""))
    return rows


def _peer_rows() -> list[str]:
    return ["| " + " | ".join((f"`{p.flag}`", ", ".join(f"`{k}`" for k in p.keys), p.kind.__name__,
                              p.help.replace("|", "\\|"))) + " |" for p in flags.PEERS]


TABLE = ["| flag | YAML key | vLLM spelling | type | default | meaning |", "|---|---|---|---|---|---|"]


CONFLICTS = """## Options that contradict each other, or say nothing

Refused in one line naming both options (as typed), before anything is stored: one of them would be
ignored in silence (`spec/conflicts.py`, the workload's own checks, `cli/run_options.said_once`):

- two values of one thing: an option given twice with different values (under one spelling or two:
  `--dataset-name` and `--kind`); `--base-url` with `--host`/`--port` (vLLM lets `--base-url` win
  silently); `--api-key-env` with `--api-key-file`; `--backend` and `--endpoint` of different APIs;
  `--ignore-eos` with `--no-ignore-eos`; `--no-store` with `--db`; `--goodput` and `--slo` (or `--goodput`
  twice) setting one SLO to two values; `--vocab-size` and a `--tokenizer` whose config.json says another;
  `--otlp-listen` on a port outside `--ports`;
- two ends of a cell: `--duration` with `--num-prompts` (a trace alone takes both: its rows due in the
  duration, at most the count); `requests.per_concurrency` / `requests.min` beside either;
- an option for what is not asked: `--otlp-listen` with `--server-traces off`; `--price-basis` without
  `--price-per-hour`; a capacity setting (`--capacity-max`, `--capacity-start`, `--capacity-precision`,
  `--capacity-budget`, `--sustain-s`, `--slo-attainment`, `--slo-tier`) without `--find-capacity`; a load
  axis (`--concurrency`, `--request-rate`, `--users`, `--session-rate`), `--max-concurrency` (but in a rate
  search) or `--stop-on-saturation` beside `--find-capacity`, which chooses its loads; `--max-concurrency`
  with `--concurrency` and no rate (it caps rate cells); `--stop-on-saturation` without a concurrency axis;
  `--arrival constant` without a rate; `--burstiness` without Poisson arrivals; `--warmup-first-prompt`
  with no warmup request; `--prompt-as-text` with `--api chat`; a knob of another workload kind (prefix,
  image, trace, sessions: `--num-groups`, `--image-width`, `--time-scale`, `--turns`, ...);
  `--range-ratio-style` without a range ratio; two length distributions; a minimum above its maximum;
  `--resume` with `--no-store` or with a spec option; `--save-detailed`, `--result-dir`,
  `--result-filename`, `--percentile-metrics`, `--metric-percentiles` without `--save-result`;
  `--output-details` without `--output-file`; `--ports` where tokenbench opens no port (a running server with
  `--server-traces off`);
- a path that is not there: `--tokenizer`, `--dataset-path`; an empty `--backend` (named in any case:
  `TGI` is `tgi`).

Every number has the range its figure can mean: lengths up to 10,000,000 tokens, rates up to 10^6 per
second, latency bounds up to 10^9 ms, waits, ramps and timeslices up to a day, sampling penalties in
[-2, 2], a price up to $10^6 an hour; a value outside is refused naming its flag
(`tests/reliability/test_contradictions.py`).
"""


def markdown() -> str:
    parts = [HEAD, "## Options of both commands\n", *TABLE, *_flag_rows(flags.SHARED),
             "\n## Lengths (both commands)\n",
             "`--input-len N --output-len M` add the pair `[N, M]` to `pairs` (random, prefix, image); "
             "for a dataset, `--output-len` forces every answer's length (`workload.output_len`).\n", *TABLE,
             *_option_rows([flags.length_options]),
             "\n## How the tool runs and where results go (both commands; not YAML keys)\n", *TABLE,
             *_option_rows(run_options.OPTIONS),
             "\n## vLLM's and SGLang's flags with their own values (both commands; not YAML keys)\n",
             "Each sets the YAML keys named, converted from the peer's meaning (`tokenbench/peers/serve.py`).\n",
             "| flag | sets | type | meaning |", "|---|---|---|---|", *_peer_rows(),
             "\n## `sweep` only\n",
             "`sweep [SPEC.yaml]` also takes `--dry-run`, `--set KEY=VALUE` and `--fields`. `--set` sets any key "
             "of the sweep YAML, with or without a SPEC.yaml (the YAML, then `--set`, then the flags on top); an "
             "unknown key is an error.\n",
             *TABLE, *_flag_rows(flags.SWEEP_ONLY),
             "\n## `tune` only\n",
             "`tune PROFILE` takes every `sweep` option (the capacity search's among them: `--find-capacity` defaults "
             "to concurrency) and these; docs/metrics.md, \"Tune\", says how it decides.\n",
             *TABLE, *_flag_rows(flags.TUNE_ONLY), *_option_rows(tune.OPTIONS), "", VLLM_NOTES, CONFLICTS]
    return "\n".join(parts)


if __name__ == "__main__":
    print(markdown(), end="")
