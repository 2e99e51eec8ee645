"""The options of `bench` and `sweep`, declared once. Each flag is a key of the study spec
(`spec/study.py:StudySpec`, the sweep YAML): its type, default and help come from that pydantic field,
so a flag and its YAML key cannot drift apart. vLLM's `bench serve` spellings are aliases (docs/cli.md)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, Literal, get_args, get_origin

import click
from pydantic import ValidationError

from tokenbench.cli import console, options
from tokenbench.errors import UsageError
from tokenbench.peers import serve
from tokenbench.spec.bench import DATASET_KINDS
from tokenbench.spec.fields import default_of, field_at
from tokenbench.spec.loader import Lines, validation_error
from tokenbench.spec.study import StudySpec


@dataclass(frozen=True)
class Flag:
    key: str                                     # dotted study-spec key: "workload.dataset_path"
    _: KW_ONLY                                   # the key first, by position; the rest by keyword
    names: tuple[str, ...] = ()                  # tokenbench's other spellings
    vllm: tuple[str, ...] = ()                   # `vllm bench serve` spellings
    parse: Callable[[str, str], Any] | None = None   # (flag, text) -> value: comma lists, SLO strings
    help: str | None = None                      # only where the field's own description does not fit a flag
    bare: str | None = None                      # the value the flag means when given without one
    spelled: str | None = None                   # the flag, where the key's last part would be unclear alone

    @property
    def flag(self) -> str:
        return self.spelled or "--" + self.key.rsplit(".", 1)[-1].replace("_", "-")

    @property
    def familiar(self) -> str:
        """The spelling messages use: tokenbench's older or vLLM's name where there is one (what users type)."""
        return (*self.names, *self.vllm, self.flag)[0]

    @property
    def dest(self) -> str:
        return self.key.replace(".", "__")


TYPED = "tokenbench.typed"     # click's ctx.meta key: {option name: the spelling the user typed} (run_options)


def typed() -> dict[str, str]:
    """The spellings typed on this command line (empty outside a command, or for a YAML spec)."""
    ctx = click.get_current_context(silent=True)
    return ctx.find_root().meta.get(TYPED, {}) if ctx is not None else {}


def as_typed(text: str) -> str:
    """`text` with every flag it names in the spelling the user typed (--num-warmups for --warmup-requests)."""
    said = typed()
    for flag in (*SHARED, *SWEEP_ONLY, *TUNE_ONLY):
        mine = said.get(flag.dest)
        if mine is None:
            continue
        for other in {flag.flag, *flag.names, *flag.vllm} - {mine}:
            text = re.sub(rf"(?<![\w-]){re.escape(other)}(?![\w-])", mine, text)
    return text


CLIENT_CPUS = Flag("client.cpus", spelled="--client-cpus")
TARGET = (Flag("target.base_url"), Flag("target.model"), Flag("target.api_key_env"), Flag("target.api_key_file"),
          Flag("target.timeout_s", names=("--timeout",)),
          Flag("target.connect_in_ttft", names=("--count-connect-in-ttft",)), Flag("target.final_usage_only"),
          Flag("target.no_min_tokens"), Flag("target.no_ignore_eos"), Flag("target.no_probe"),
          Flag("target.extra_body", vllm=("--extra-body",), parse=options.json_object),
          Flag("target.new_connection_per_request"), Flag("target.server_traces"), Flag("target.otlp_listen"),
          Flag("target.ports"),
          Flag("target.via_proxy"), Flag("target.server_chunks_per_write"))
WORKLOAD = (Flag("workload.kind", vllm=("--dataset-name",), parse=serve.dataset_kind,
                 help="random | text | sharegpt | jsonl | prefix | image | trace | sessions | trajectories (text: "
                      "natural-text token ids cut to the exact length; trajectories: agent traces, docs/workloads.md; "
                      "vLLM's custom is jsonl; SGLang's random-ids is random)"),
            Flag("workload.dataset_path", vllm=("--dataset-path",)),
            *(Flag(f"workload.{n}") for n in ("min_input_len", "max_input_len", "min_output_len", "max_output_len",
                                              "prefix_len", "num_groups", "image_count", "image_width",
                                              "image_height", "image_format", "time_scale",
                                              "trace_block_size")),
            Flag("workload.turns"), Flag("workload.system_prompt_len"), Flag("workload.shared_system_prompt"),
            Flag("workload.think_time_s", names=("--think-time",)), Flag("workload.think_time_dist"),
            Flag("workload.assistant_turns"), Flag("workload.session_header"),
            *(Flag(f"workload.{n}") for n in ("trajectory_format", "num_trajectories", "turns_dist", "no_salt",
                                              "unreplayable", "cache_block_size")),
            Flag("workload.tokenizer_path", vllm=("--tokenizer",)),
            Flag("workload.vocab_size"), Flag("workload.prompt_as_text"), Flag("api"), Flag("seed", vllm=("--seed",)))
LENGTHS = (Flag("workload.range_ratio", vllm=("--random-range-ratio",)), Flag("workload.range_ratio_style"),
           Flag("workload.input_len_stddev"), Flag("workload.output_len_stddev"), Flag("workload.length_histogram"))
SAMPLING = tuple(Flag(f"sampling.{n}", vllm=("--" + n.replace("_", "-"),)) for n in (
    "temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty"))
LOAD = (Flag("concurrency", parse=options.int_list),
        Flag("rates", vllm=("--request-rate",), parse=options.rate_list),
        Flag("arrival"), Flag("burstiness", vllm=("--burstiness",)), Flag("max_concurrency", vllm=("--max-concurrency",)),
        Flag("rate_cap"),
        Flag("users", parse=options.int_list), Flag("session_rates", names=("--session-rate",), parse=options.float_list),
        Flag("ramp_up_s"), Flag("window"), Flag("requests.num_sessions"),
        Flag("requests.num_prompts", vllm=("--num-prompts",)), Flag("requests.duration_s", names=("--duration",)),
        Flag("warmup_requests", vllm=("--num-warmups",)), Flag("warmup_first_prompt"), Flag("repeats"))
CHECKS = (Flag("slo", parse=options.slo_dict, help="SLOs: per-request thresholds in ms for goodput (ttft=500,"
               "tpot=50,e2el=10000) and/or limits on a statistic for --find-capacity (ttft:p99<=2000,tpot:p99<=200; "
               "metrics ttft, tpot, itl, e2el; stats mean, p50, p90, p95, p99)"),
          Flag("allow_length_mismatch"), Flag("allow_client_lag"), Flag("max_error_rate"), Flag("name",
                                                                                                vllm=("--label",)),
          Flag("series"),
          Flag("client.workers"), Flag("client.ray_address", names=("--ray",)),
          Flag("client.keep_raw"), CLIENT_CPUS, Flag("timeslice_s"), Flag("monitor_interval_s"),
          Flag("price_per_hour"), Flag("price_basis"))
SHARED = TARGET + WORKLOAD + LENGTHS + SAMPLING + LOAD + CHECKS
LIST_PARSERS = (options.int_list, options.rate_list, options.slo_dict, options.pairs,   # docs: type "list"
                options.slo_tiers)
SWEEP_ONLY = (Flag("pairs", parse=options.pairs), Flag("kv_capacity"), Flag("stop_on_saturation"),
              Flag("find_capacity", bare="concurrency"), Flag("capacity_max"), Flag("capacity_start"),
              Flag("capacity_precision"), Flag("capacity_budget"),
              Flag("slo_tiers", names=("--slo-tier",), parse=options.slo_tiers), Flag("sustain_s"),
              Flag("slo_attainment"))
TUNE_ONLY = (Flag("tune.budget_cells"), Flag("tune.budget_minutes"), Flag("tune.baseline"), Flag("tune.no_confirm"))


@dataclass(frozen=True)
class Peer:
    """A vLLM or SGLang `bench` flag whose values are not tokenbench's: its own option, whose value
    tokenbench/peers/serve.py converts into the study keys named here (docs/cli.md lists them)."""

    flag: str
    keys: tuple[str, ...]
    kind: type
    help: str

    @property
    def dest(self) -> str:
        return "peer__" + self.flag[2:].replace("-", "_")


PEERS = (
    Peer("--host", ("target.base_url",), str, "vLLM/SGLang: the server's host: the base URL is http://HOST:PORT "
         "(host 127.0.0.1 unless given) when --base-url is not given"),
    Peer("--port", ("target.base_url",), int, "vLLM/SGLang: the server's port (default 8000; SGLang's own "
         "backends 30000)"),
    Peer("--backend", ("api", "target.backend"), str, "the server kind (vLLM's/SGLang's backend names): openai, "
         "vllm, sglang, llama.cpp, tgi, tensorrt-llm, lmdeploy, mindie, transformers, gateway (docs/compatibility.md); "
         "openai, vllm, sglang, sglang-oai, lmdeploy choose /v1/completions, openai-chat, vllm-chat, sglang-oai-chat "
         "/v1/chat/completions (SGLang's native /generate is measured on /v1/completions); an SGLang-only backend "
         "gives --random-range-ratio SGLang's meaning"),
    Peer("--endpoint", ("api",), str, "vLLM: the API path, /v1/completions or /v1/chat/completions"),
    Peer("--random-prefix-len", ("workload.kind", "workload.prefix_len", "pairs"), int, "vLLM: P tokens shared by "
         "every prompt before its random ones: a prefix workload (one group) of input P + --random-input-len"),
)


def peer_options(f: Callable) -> Callable:
    """Decorator adding one click option per peer flag."""
    for peer in reversed(PEERS):
        f = click.option(peer.flag, peer.dest, type=peer.kind, default=None, help=peer.help)(f)
    return f


def _plain(annotation: Any) -> Any:
    """`X | None` -> X."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    return args[0] if get_origin(annotation) is not Literal and len(args) == 1 else annotation


def click_type(annotation: Any) -> click.ParamType:
    ann = _plain(annotation)
    if get_origin(ann) is Literal:
        return click.Choice([str(a) for a in get_args(ann)])
    known: dict[Any, click.ParamType] = {int: click.INT, float: click.FLOAT}
    return known.get(ann, click.STRING)


def describe(flag: Flag) -> tuple[str, Any]:
    """(help, default) of a flag, from its spec field."""
    info = field_at(StudySpec, flag.key)
    return flag.help or info.description or "", default_of(info)


def _option(flag: Flag) -> Callable:
    info = field_at(StudySpec, flag.key)
    text, default = describe(flag)
    decls = [flag.flag, *dict.fromkeys(n for n in (*flag.names, *flag.vllm) if n != flag.flag), flag.dest]
    if _plain(info.annotation) is bool:
        return click.option(*decls, is_flag=True, default=None, help=text)
    if flag.bare is not None:
        return click.option(*decls, type=click_type(info.annotation), is_flag=False, flag_value=flag.bare,
                            default=None, help=f"{text}  [alone: {flag.bare}]")
    shown = default is not None and not isinstance(default, bool | list | dict)
    kind = click.STRING if flag.parse else click_type(info.annotation)
    return click.option(*decls, type=kind, default=None, help=f"{text}  [default: {default}]" if shown else text)


def apply(flags: tuple[Flag, ...]) -> Callable:
    """Decorator adding one click option per flag (in the order given)."""
    def wrap(f: Callable) -> Callable:
        for flag in reversed(flags):
            f = _option(flag)(f)
        return f
    return wrap


def given(flags: tuple[Flag, ...], kw: dict) -> dict[str, Any]:
    """{dotted key: value} of the flags the user gave (parsed), in declaration order."""
    out = {}
    for flag in flags:
        raw = kw.get(flag.dest)
        if raw is None:
            continue
        out[flag.key] = flag.parse(flag.familiar, raw) if flag.parse else raw
    return out


def set_key(data: dict, dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        data = data.setdefault(part, {})
    data[leaf] = value


def spellings(key: str) -> str:
    """Every flag spelling of a study key, for `sweep --fields` ("" when the key has no flag)."""
    for flag in (*SHARED, *SWEEP_ONLY, *TUNE_ONLY):
        if key == flag.key or key.startswith(flag.key + "."):
            return ", ".join(dict.fromkeys((flag.flag, *flag.names, *flag.vllm)))
    return ""


def flag_for(key: str) -> str | None:
    """The flag spelling of a study key, for error messages in the user's terms."""
    for flag in (*SHARED, *SWEEP_ONLY, *TUNE_ONLY):
        if key == flag.key or key.startswith(flag.key + "."):
            return flag.familiar
    return {"pairs": "--input-len/--output-len", "workload.output_len": "--output-len"}.get(key)


def length_options(f: Callable) -> Callable:
    """--input-len / --output-len (vLLM: --random-input-len / --random-output-len): one [input, output]
    pair for random, prefix and image workloads; --output-len alone forces a dataset's output lengths."""
    from tokenbench.spec.bench import Workload
    for name in ("output_len", "input_len"):
        dash = name.replace("_", "-")
        f = click.option(f"--{dash}", f"--random-{dash}", name, type=int, default=None,
                         help=Workload.model_fields[name].description)(f)
    return f


def _file_lengths(input_len: int | None, output_len: int | None) -> None:
    """A trajectories dataset gives every turn's lengths."""
    if input_len is not None or output_len is not None:
        raise UsageError("--input-len/--output-len do not apply to a trajectories dataset: every turn's lengths "
                         "come from the file", "drop them (or drop --dataset-path to generate trajectories)")


def _lengths(data: dict, input_len: int | None, output_len: int | None) -> None:
    kind = data.get("workload", {}).get("kind", "random")
    for flag, value in (("--input-len", input_len), ("--output-len", output_len)):
        if value is not None and value <= 0:
            raise UsageError(f"{flag} must be a positive number of tokens, got {value}",
                             "use e.g. --input-len 512 --output-len 128")
    if kind == "trajectories" and data.get("workload", {}).get("dataset_path"):
        _file_lengths(input_len, output_len)
        return
    if kind in DATASET_KINDS:
        if input_len is not None:
            raise UsageError(f"--input-len: input_len does not apply to {kind}: prompt lengths come from the "
                             "dataset", "filter them with --min-input-len / --max-input-len")
        if output_len is not None:
            set_key(data, "workload.output_len", output_len)
        return
    if input_len is not None and output_len is not None:
        data["pairs"] = [*data.get("pairs", []), (input_len, output_len)]
    elif data.get("workload", {}).get("length_histogram") is not None and input_len is None and output_len is None:
        return
    elif not data.get("pairs") or input_len is not None or output_len is not None:
        raise UsageError("--input-len and --output-len are required", "e.g. --input-len 512 --output-len 128 "
                         "(sweep: --pairs 512:128,1024:256)")


def study_data(kw: dict, flags: tuple[Flag, ...], base: dict | None = None) -> dict:
    """The study spec's raw mapping: `base` (a YAML file's) with every given flag set on top."""
    data = copy.deepcopy(base or {})
    for key, value in given(flags, kw).items():
        set_key(data, key, value)
    _lengths(data, kw.get("input_len"), kw.get("output_len"))
    peers = peers_given(kw)
    for note in serve.fold(data, peers) if peers else ():
        console.err.print(f"note: {note}", markup=False, highlight=False)
    return data


def peers_given(kw: dict) -> dict[str, Any]:
    """{spelling: value} of the peer flags the user gave."""
    return {p.flag: kw[p.dest] for p in PEERS if kw.get(p.dest) is not None}


def validate(data: dict, source: str = "command line", overridden: Lines | None = None) -> StudySpec:
    """The study spec; an invalid value is named by its flag, or by the `--set` item that gave it
    (`overridden`, from spec.loader.apply_overrides: an unknown key is named as in a YAML file)."""
    try:
        return StudySpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(x for x in err["loc"] if not str(x).startswith("function-"))
        if any(loc[:len(path)] == path for path in overridden or {}):
            raise validation_error(exc, source, overridden or {}, StudySpec) from None
        key = ".".join(str(x) for x in err["loc"] if not str(x).startswith("function-"))
        where = flag_for(key) or key or source
        msg = err["msg"].removeprefix("Value error, ")
        raise UsageError(f"{where}: {msg}" if key else msg, "see --help for each option") from None
