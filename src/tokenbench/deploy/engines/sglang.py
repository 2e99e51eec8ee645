"""SGLang adapter: the `sglang.launch_server` command line and the facts its server reports.

Facts: `/get_server_info` (older releases: `/server_info`) carries `max_total_num_tokens` (the KV pool of
one data-parallel replica, in tokens), `context_length` (null unless set at launch), `version`,
`dp_size` and `disable_radix_cache` (the prefix-cache state; Study A ran with the radix cache off);
`/v1/models` carries `max_model_len` on releases that have it. With `--enable-metrics`, /metrics has the
gauges named in METRIC_NAMES (running and queued requests, KV pool use as a fraction: FACT_SIGNALS).
Speculative decoding: `--speculative-algorithm` (EAGLE, EAGLE3, NEXTN, NGRAM, STANDALONE ...) with
`--speculative-num-draft-tokens`; the server tells it in `/get_server_info` `speculative_algorithm`, and
its acceptance only as gauges per decode log window (`sglang:spec_accept_rate`, `sglang:spec_accept_length`,
present and 0 even when it is off).
"""

from __future__ import annotations

import sys
from typing import Any

from tokenbench.client import api
from tokenbench.deploy.engines import arg_of, graphs, model_arg, profile_args
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import GraphCapture, ServerFacts

PREFIX = ["python", "-m", "sglang.launch_server"]
DEFAULT_PORT = 30000      # the engine's own default: `deploy up` uses it unless it is taken
RESET_CACHE_PATH = "/flush_cache"            # emptied between cells (no cell served from the last)
_MODEL_PATH = ("an HF directory", "set model.path to the weights directory as the server sees it")
FACT_SIGNALS = ("running", "waiting", "kv_usage")   # the gauges of METRIC_NAMES the facts list when exposed


def command_prefix(profile: Profile) -> list[str]:
    """The profile's `command` (a leading `python` of a local profile means this Python), else PREFIX."""
    first, *rest = profile.command or PREFIX
    return [sys.executable if first in ("python", "python3") and profile.runs_in == "local" and profile.command
            else first, *rest]


def speculative(profile: Profile) -> str | None:
    """What `--speculative-algorithm` turns on: "EAGLE3, 4 draft tokens"."""
    algorithm = arg_of(profile, "speculative-algorithm")
    if algorithm is None:
        return None
    drafts = arg_of(profile, "speculative-num-draft-tokens")
    return str(algorithm) + (f", {drafts} draft tokens" if drafts is not None else "")


def launch_argv(profile: Profile, port: int) -> list[str]:
    """The exact engine argv; every profile value is one item (no shell involved)."""
    argv = command_prefix(profile) + ["--model-path", model_arg(profile, "SGLang", *_MODEL_PATH)]
    if profile.model.served_name:
        argv += ["--served-model-name", profile.model.served_name]
    argv += ["--host", profile.host, "--port", str(port)]
    if profile.parallelism.tp > 1:
        argv += ["--tp", str(profile.parallelism.tp)]
    if profile.parallelism.dp > 1:
        argv += ["--data-parallel-size", str(profile.parallelism.dp)]
    return argv + profile_args(profile)


def served_model(profile: Profile) -> str | None:
    return profile.model.served_name or profile.model.path


def read_facts(base_url: str, api_key: str | None = None) -> ServerFacts:
    facts = ServerFacts(engine="sglang")
    info, path = _server_info(base_url, api_key)
    if info:
        _from_server_info(facts, info, path)
    models = api.get_json(base_url, "/v1/models", api_key)
    entry = _first_model(models)
    if entry:
        facts.model, facts.source["model"] = entry.get("id"), "/v1/models"
        if facts.ctx_per_seq is None and isinstance(entry.get("max_model_len"), int):
            facts.ctx_per_seq, facts.source["ctx_per_seq"] = entry["max_model_len"], "/v1/models max_model_len"
    _metric_names(facts, api.get_text(base_url, "/metrics") or "")
    return facts


def _metric_names(facts: ServerFacts, exposition: str) -> None:
    """The FACT_SIGNALS gauges that this server's /metrics exposes (none without --enable-metrics)."""
    names = {role: METRIC_NAMES["signals"][role]["metrics"][0] for role in FACT_SIGNALS}
    found = {role: name for role, name in names.items() if f"\n{name}{{" in f"\n{exposition}"}
    if found:
        facts.metrics, facts.source["metrics"] = found, "/metrics"


def _server_info(base_url: str, api_key: str | None) -> tuple[dict | None, str]:
    for path in ("/get_server_info", "/server_info"):
        data = api.get_json(base_url, path, api_key)
        if isinstance(data, dict):
            return data, path
    return None, ""


def _from_server_info(facts: ServerFacts, info: dict, path: str) -> None:
    states = info.get("internal_states") if isinstance(info.get("internal_states"), list) else []
    first_state = states[0] if states and isinstance(states[0], dict) else {}
    pool = _int(info.get("max_total_num_tokens")) or _int(first_state.get("max_total_num_tokens"))
    dp = _int(info.get("dp_size")) or 1
    if pool is not None:
        facts.kv_capacity_tokens = pool * dp
        facts.source["kv_capacity_tokens"] = f"{path} max_total_num_tokens" + (f" x dp_size {dp}" if dp > 1 else "")
    ctx = _int(info.get("context_length")) or _int(first_state.get("context_length"))
    if ctx is not None:
        facts.ctx_per_seq, facts.source["ctx_per_seq"] = ctx, f"{path} context_length"
    if info.get("version"):
        facts.version, facts.source["version"] = str(info["version"]), f"{path} version"
    radix = info.get("disable_radix_cache", first_state.get("disable_radix_cache"))
    if isinstance(radix, bool):
        facts.prefix_cache = "disabled" if radix else "enabled"
        facts.source["prefix_cache"] = f"{path} disable_radix_cache={str(radix).lower()} (radix cache)"
    if info.get("speculative_algorithm"):
        drafts = _int(info.get("speculative_num_draft_tokens"))
        facts.speculative = str(info["speculative_algorithm"]) + (f", {drafts} draft tokens" if drafts else "")
        facts.source["speculative"] = f"{path} speculative_algorithm"
    slots = _int(info.get("max_running_requests"))
    if slots is not None:
        facts.slots, facts.source["slots"] = slots, f"{path} max_running_requests"
    keep = ("version", "max_total_num_tokens", "max_req_input_len", "context_length", "max_running_requests",
            "tp_size", "dp_size", "chunked_prefill_size", "cuda_graph_max_bs", "disable_radix_cache", "device",
            "dtype", "mem_fraction_static", "served_model_name", "model_path", "speculative_algorithm",
            "speculative_num_draft_tokens", "speculative_num_steps")
    facts.raw["server_info"] = {k: info[k] for k in keep if k in info}
    facts.with_graphs(graphs.from_server_info(info, path))


def _first_model(models: object) -> dict | None:
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        first = models["data"][0]
        return first if isinstance(first, dict) else None
    return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---- /metrics names -> tokenbench's common server signals (format: monitor/prometheus.py) ----

METRIC_NAMES: dict[str, Any] = {
    "prefix": "sglang:",
    "signals": {
        "running": {"metrics": ["sglang:num_running_reqs"], "reduce": "sum"},
        "waiting": {"metrics": ["sglang:num_queue_reqs"], "reduce": "sum"},
        "kv_usage": {"metrics": ["sglang:token_usage"], "reduce": "max"},
        "preemptions": {"metrics": ["sglang:num_retracted_requests_total"], "reduce": "sum"},
        "prompt_tokens": {"metrics": ["sglang:prompt_tokens_total"], "reduce": "sum"},
        "generation_tokens": {"metrics": ["sglang:generation_tokens_total"], "reduce": "sum"},
        "kv_capacity_tokens": {"metrics": ["sglang:max_total_num_tokens"], "reduce": "max"},
    },
    # read over a cell (monitor/counters.py): prefix-cache hits in tokens (counters: cached tokens are counted
    # per source, device / host / storage, or without details as source "total", so every series is summed);
    # speculative acceptance only as gauges per decode log window (means over the cell's scrapes)
    "counters": {
        "prefix_queries": "sglang:prompt_tokens_total",
        "prefix_hits": "sglang:cached_tokens_total",
    },
    "gauges": {"spec_accept_rate": "sglang:spec_accept_rate", "spec_accept_length": "sglang:spec_accept_length"},
    # the server's request-time histograms (their _sum and _count): its own means over a cell without tracing
    "histograms": {
        "queue": "sglang:queue_time_seconds",
        "prefill": {"metric": "sglang:per_stage_req_latency_seconds", "labels": {"stage": "prefill_forward"}},
        "ttft": "sglang:time_to_first_token_seconds", "e2e": "sglang:e2e_request_latency_seconds",
    },
}


def traced(profile: Profile, address: str) -> Profile:
    """The profile with tracing on (`--enable-trace`, needs SGLang's OpenTelemetry exporters, which `tokenbench
    setup sglang-cpu` installs): each request's `Req` span and its slices exported over gRPC to the OTLP receiver at
    HOST:PORT, in batches every 100 ms (SGLang's default 500 ms)."""
    env = {**profile.env, "SGLANG_OTLP_EXPORTER_SCHEDULE_DELAY_MILLIS": "100"}
    args = {**profile.args, "enable-trace": True, "otlp-traces-endpoint": address}
    return profile.model_copy(update={"env": env, "args": args})


# ---- captured decode graphs (docs/deploy.md "Graph capture") ----

NEW_FLAGS_FROM = "0.5.20"      # SGLang from this release refuses --cuda-graph-max-bs / --cuda-graph-bs


def default_sizes(max_bs: int, padding: bool = True) -> list[int]:
    """SGLang's decode capture list for a max batch (server_args `_generate_cuda_graph_batch_sizes`):
    1, 2, 4, 8, 12, then 16..256 by 8, 272..496 by 16, 512.. by 32, cut at max_bs, plus max_bs; every size
    1..max_bs with --disable-cuda-graph-padding."""
    if not padding:
        return list(range(1, max_bs + 1))
    base = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    return sorted({b for b in base if b <= max_bs} | {max_bs})


def graph_capture(profile: Profile) -> GraphCapture:
    """The decode graphs a profile's flags give: --disable-cuda-graph or a disabled decode backend (none),
    --cuda-graph-bs(-decode) (that list), --cuda-graph-max-bs(-decode) (the default list up to it); else
    SGLang picks the max at launch from the accelerator's memory, and only the server can tell."""
    f = graphs.flags(profile)
    if "disable-cuda-graph" in f or "disable-decode-cuda-graph" in f or f.get("cuda-graph-backend-decode") == "disabled":
        return GraphCapture((), 0, "profile: graphs disabled (--disable-cuda-graph)")
    for name in ("cuda-graph-bs-decode", "cuda-graph-bs"):
        listed = graphs.sizes(f.get(name))
        if listed:
            return graphs.capture(listed, f"profile --{name} {' '.join(map(str, listed))}", _old(name))
    for name in ("cuda-graph-max-bs-decode", "cuda-graph-max-bs"):
        top = graphs.as_int(f.get(name))
        if top:
            padding = "disable-cuda-graph-padding" not in f
            return graphs.capture(default_sizes(top, padding), f"profile --{name} {top} (SGLang's list up to it)",
                                  _old(name))
    return GraphCapture((), None, "SGLang's default: the max batch is chosen at launch from the accelerator's "
                        "memory (8 to 512); the server's /server_info tells it")


def _old(name: str) -> str:
    if name.endswith("-decode"):
        return ""
    return (f"--{name} is refused by SGLang {NEW_FLAGS_FROM} and later (ambiguous option): they spell it "
            f"--{name}-decode")
