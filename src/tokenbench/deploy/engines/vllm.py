"""vLLM (and vLLM-Ascend) adapter: the `vllm serve` command line and the facts its server reports.

Facts: `/metrics` `vllm:cache_config_info` carries the KV cache as labels (`num_gpu_blocks` x
`block_size` tokens; one series per engine core when data-parallel, summed); `/v1/models` carries
`max_model_len`; `/version` the release. Speculative decoding: `--speculative-config JSON` (older
releases: `--speculative-model`, `--num-speculative-tokens`), and on the server the `vllm:spec_decode_*`
counters, which exist only when it is on.
"""

from __future__ import annotations

import json
import re
import sys

from tokenbench.client import api
from tokenbench.deploy.engines import arg_of, graphs, model_arg, profile_args
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import GraphCapture, ServerFacts

PREFIX = ["vllm", "serve"]
DEFAULT_PORT = 8000      # the engine's own default: `deploy up` uses it unless it is taken
RESET_CACHE_PATH = "/reset_prefix_cache"     # emptied between cells (no cell served from the last)
_MODEL_PATH = ("an HF directory or repo id", "set model.path to the weights as the server sees them")
_SERIES = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def command_prefix(profile: Profile) -> list[str]:
    """The profile's `command` (a leading `python` means this Python, as for llama.cpp), else `vllm serve`."""
    if not profile.command:
        return list(PREFIX)
    first, *rest = profile.command
    return [sys.executable if first in ("python", "python3") and profile.runs_in == "local" else first, *rest]


def launch_argv(profile: Profile, port: int) -> list[str]:
    """The exact engine argv; every profile value is one item (no shell involved)."""
    argv = command_prefix(profile) + [model_arg(profile, "vLLM", *_MODEL_PATH)]
    if profile.model.served_name:
        argv += ["--served-model-name", profile.model.served_name]
    argv += ["--host", profile.host, "--port", str(port)]
    if profile.parallelism.tp > 1:
        argv += ["--tensor-parallel-size", str(profile.parallelism.tp)]
    if profile.parallelism.dp > 1:
        argv += ["--data-parallel-size", str(profile.parallelism.dp)]
    return argv + profile_args(profile)


def served_model(profile: Profile) -> str | None:
    return profile.model.served_name or profile.model.path


def speculative(profile: Profile) -> str | None:
    """What `--speculative-config` (or the older `--speculative-model`) turns on: "ngram, 3 draft tokens"."""
    config = arg_of(profile, "speculative-config")
    if config is None:
        model = arg_of(profile, "speculative-model")
        return None if model is None else _spec_text(str(model), arg_of(profile, "num-speculative-tokens"))
    try:
        parsed = json.loads(str(config))
    except ValueError:
        return f"on ({config})"
    if not isinstance(parsed, dict):
        return f"on ({config})"
    return _spec_text(str(parsed.get("method") or parsed.get("model") or "on"), parsed.get("num_speculative_tokens"))


def _spec_text(method: str, tokens: object) -> str:
    return method + (f", {tokens} draft tokens" if tokens not in (None, "") else "")


def cache_config(metrics_text: str) -> list[dict[str, str]]:
    """The label sets of every `vllm:cache_config_info` series in a Prometheus exposition."""
    return [dict(_LABEL.findall(m.group("labels"))) for m in _SERIES.finditer(metrics_text)]


def kv_tokens(series: list[dict[str, str]]) -> int | None:
    """Total KV tokens over engine cores (None if not reported): vLLM's own `kv_cache_size_tokens` where
    the series has it (recent releases), else num_gpu_blocks x block_size. The two differ for models
    with sliding-window layers (Gemma 3: 110,733 tokens vs 5461 x 128 = 699,008): blocks are shared by
    the layer groups, so blocks x block_size overstates what full-attention sequences can hold."""
    total = 0
    for labels in series:
        if labels.get("kv_cache_size_tokens", "").isdigit() and int(labels["kv_cache_size_tokens"]) > 0:
            total += int(labels["kv_cache_size_tokens"])
            continue
        blocks, size = labels.get("num_gpu_blocks", ""), labels.get("block_size", "")
        if not (blocks.isdigit() and size.isdigit()) or int(blocks) == 0:
            return None
        total += int(blocks) * int(size)
    return total or None


def read_facts(base_url: str, api_key: str | None = None) -> ServerFacts:
    facts = ServerFacts(engine="vllm")
    exposition = api.get_text(base_url, "/metrics") or ""
    if SPEC_COUNTER in exposition:
        facts.speculative, facts.source["speculative"] = "on", f"/metrics {SPEC_COUNTER}_total present"
    series = cache_config(exposition)
    if series:
        facts.raw["cache_config_info"] = series
        tokens = kv_tokens(series)
        if tokens is not None:
            facts.kv_capacity_tokens = tokens
            how = ("kv_cache_size_tokens" if all("kv_cache_size_tokens" in x for x in series)
                   else "num_gpu_blocks x block_size")
            facts.source["kv_capacity_tokens"] = (f"/metrics vllm:cache_config_info {how}"
                                                  + (f" (sum of {len(series)} engines)" if len(series) > 1 else ""))
    models = api.get_json(base_url, "/v1/models", api_key)
    entries = models.get("data") if isinstance(models, dict) and isinstance(models.get("data"), list) else []
    if entries and isinstance(entries[0], dict):
        facts.model, facts.source["model"] = entries[0].get("id"), "/v1/models"
        if isinstance(entries[0].get("max_model_len"), int):
            facts.ctx_per_seq = entries[0]["max_model_len"]
            facts.source["ctx_per_seq"] = "/v1/models max_model_len"
    version = api.get_json(base_url, "/version", api_key)
    if isinstance(version, dict) and version.get("version"):
        facts.version, facts.source["version"] = str(version["version"]), "/version"
    facts.with_graphs(_server_graphs(base_url, api_key))
    return facts


# ---- /metrics names -> tokenbench's common server signals (format: monitor/prometheus.py) ----

SPEC_COUNTER = "vllm:spec_decode_num_drafts"      # registered only when speculative decoding is on

METRIC_NAMES = {
    "prefix": "vllm:",
    "signals": {
        "running": {"metrics": ["vllm:num_requests_running"], "reduce": "sum"},
        "waiting": {"metrics": ["vllm:num_requests_waiting"], "reduce": "sum"},
        "kv_usage": {"metrics": ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"], "reduce": "max"},
        "preemptions": {"metrics": ["vllm:num_preemptions_total", "vllm:num_preemptions"], "reduce": "sum"},
        "prompt_tokens": {"metrics": ["vllm:prompt_tokens_total"], "reduce": "sum"},
        "generation_tokens": {"metrics": ["vllm:generation_tokens_total"], "reduce": "sum"},
        # vLLM's own token count first: blocks x block size over-counts models with sliding-window layers
        "kv_capacity_tokens": {"info": "vllm:cache_config_info",
                               "products": [["kv_cache_size_tokens"], ["num_gpu_blocks", "block_size"]],
                               "reduce": "max"},
    },
    # read over a cell (monitor/counters.py): speculative decoding and prefix-cache hits, in tokens
    "counters": {
        "spec_drafts": f"{SPEC_COUNTER}_total",
        "spec_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
        "spec_accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
        "prefix_queries": "vllm:prefix_cache_queries_total",
        "prefix_hits": "vllm:prefix_cache_hits_total",
    },
    # the server's request-time histograms (their _sum and _count): its own means over a cell without tracing
    "histograms": {
        "queue": "vllm:request_queue_time_seconds", "prefill": "vllm:request_prefill_time_seconds",
        "decode": "vllm:request_decode_time_seconds", "inference": "vllm:request_inference_time_seconds",
        "ttft": "vllm:time_to_first_token_seconds", "e2e": "vllm:e2e_request_latency_seconds",
    },
}


def traced(profile: Profile, address: str) -> Profile:
    """The profile with its request spans (`llm_request`, one per request that carries a traceparent) exported
    to the OTLP receiver at HOST:PORT, over HTTP/protobuf, in batches every 100 ms (the SDK waits 5 s)."""
    env = {**profile.env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "100"}
    args = {**profile.args, "otlp-traces-endpoint": f"http://{address}/v1/traces"}
    return profile.model_copy(update={"env": env, "args": args})


# ---- captured decode graphs (docs/deploy.md "Graph capture") ----

MAX_CAPTURE = 512            # vLLM's ceiling on the default largest capture size


def default_sizes(top: int) -> list[int]:
    """vLLM's default capture list up to `top` (config/vllm.py `_set_cudagraph_sizes`): 1, 2, 4, then 8..248
    by 8, then 256.. by 16."""
    return [s for s in (1, 2, 4, *range(8, min(top + 1, 256), 8), *range(256, top + 1, 16)) if s <= top]


def graph_capture(profile: Profile) -> GraphCapture:
    """The CUDA (Ascend: ACL) graphs a profile's flags give: --enforce-eager or cudagraph_mode NONE (none);
    cudagraph_capture_sizes (that list) or max_cudagraph_capture_size (the default list up to it), as flags
    or in --compilation-config/-cc; else the default: the largest is min(max_num_seqs x 2, 512) (vLLM-Ascend:
    min(max_num_seqs, 512)), capped by --max-num-batched-tokens, when --max-num-seqs is given; otherwise
    vLLM picks max_num_seqs from the accelerator's memory at launch."""
    f = graphs.flags(profile)
    cc = {**graphs.json_arg(f.get("compilation-config")), **graphs.json_arg(f.get("cc")),
          **graphs.json_arg(f.get("O"))}
    if "enforce-eager" in f or str(cc.get("cudagraph_mode", "")).upper() in ("NONE", "0"):
        return GraphCapture((), 0, "profile: --enforce-eager (no graphs)")
    listed = graphs.sizes(f.get("cudagraph-capture-sizes") or f.get("cuda-graph-sizes")) or \
        tuple(x for x in cc.get("cudagraph_capture_sizes") or [] if isinstance(x, int))
    if listed:
        return graphs.capture(listed, "profile: cudagraph_capture_sizes " + " ".join(map(str, listed)))
    top = graphs.as_int(f.get("max-cudagraph-capture-size")) or \
        (cc.get("max_cudagraph_capture_size") if isinstance(cc.get("max_cudagraph_capture_size"), int) else None)
    if top:
        return graphs.capture(default_sizes(top), f"profile: max_cudagraph_capture_size {top} (vLLM's list up to it)")
    return _default(profile, f)


def _default(profile: Profile, f: dict[str, str | None]) -> GraphCapture:
    seqs = graphs.as_int(f.get("max-num-seqs"))
    if seqs is None:
        return GraphCapture((), None, "vLLM's default: max_num_seqs is chosen at launch from the accelerator's "
                            "memory (256 or 1024); the largest capture size is min(2 x max_num_seqs, 512)")
    ascend = profile.accelerator == "ascend"
    top = min(seqs if ascend else 2 * seqs, MAX_CAPTURE)
    tokens = graphs.as_int(f.get("max-num-batched-tokens"))
    top = min(top, tokens) if tokens else top
    extra = {x for x in (seqs, tokens) if x is not None and x <= top}
    rule = "min(max_num_seqs, 512) (vLLM-Ascend)" if ascend else "min(2 x max_num_seqs, 512)"
    return graphs.capture(sorted(set(default_sizes(top)) | extra), f"vLLM's default from --max-num-seqs {seqs}: {rule}",
                          "with speculative decoding the sizes count tokens (1 + draft tokens per request)")


def _server_graphs(base_url: str, api_key: str | None) -> GraphCapture | None:
    """The compilation config /server_info shows when the server runs with VLLM_SERVER_DEV_MODE=1."""
    status, body = api.call(base_url, "/server_info?config_format=json", api_key=api_key, timeout=10, quiet=True)
    return server_info_graphs(graphs.json_arg(body.decode("utf-8", "replace")) if status == 200 else {})


def server_info_graphs(info: dict) -> GraphCapture | None:
    """`vllm_config.compilation_config` of /server_info?config_format=json: the captured sizes, or none
    when the mode is NONE; None when the answer has no compilation config (not in dev mode)."""
    config = info.get("vllm_config")
    cc = config.get("compilation_config") if isinstance(config, dict) else None
    if not isinstance(cc, dict) or "cudagraph_capture_sizes" not in cc:
        return None
    source = "/server_info compilation_config"
    if cc.get("cudagraph_mode") in (0, "NONE"):
        return GraphCapture((), 0, f"{source} cudagraph_mode NONE")
    return graphs.capture([x for x in cc["cudagraph_capture_sizes"] if isinstance(x, int)], source)
