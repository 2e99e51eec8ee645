"""What the reference server tells about itself: its counters, the /metrics text, /get_server_info and
the /v1/models entry. Pure: built from the config, the admission gate's state and the counters."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tokenbench import __version__
from tokenbench.testing.config import ReferenceConfig
from tokenbench.testing.spans import ROLES, Histograms


@dataclass(slots=True, kw_only=True)
class Totals:
    """Counters since the server started (what /metrics reports)."""

    requests: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0            # prompt tokens looked up in the prefix cache
    prefix_hits: int = 0               # of those, tokens found
    spec_drafts: int = 0               # decode steps that drafted
    spec_draft_tokens: int = 0
    spec_accepted: int = 0
    spec_accepted_per_pos: list[int] = field(default_factory=list)
    times: Histograms = field(default_factory=Histograms)    # answered requests' own timings

    def add_spec(self, k: int, accepted_per_step: list[int]) -> None:
        if len(self.spec_accepted_per_pos) < k:
            self.spec_accepted_per_pos += [0] * (k - len(self.spec_accepted_per_pos))
        self.spec_drafts += len(accepted_per_step)
        self.spec_draft_tokens += k * len(accepted_per_step)
        self.spec_accepted += sum(accepted_per_step)
        for a in accepted_per_step:
            for pos in range(a):
                self.spec_accepted_per_pos[pos] += 1


@dataclass(frozen=True, slots=True)
class Load:
    """The admission gate's state at a scrape."""

    running: int
    waiting: int
    kv_usage: float


def _series(prefix: str, label: str, rows: list[tuple[str, str, float]]) -> str:
    return "".join(f"# TYPE {prefix}{name} {kind}\n{prefix}{name}{label} {v}\n" for name, kind, v in rows)


def metrics_text(cfg: ReferenceConfig, load: Load, t: Totals) -> str:
    """Prometheus text: `reference:*` always; vLLM's names too when the prefix cache or speculative
    decoding is on (docs/reference-server.md, "Endpoints")."""
    model = json.dumps(cfg.model)
    text = _series("reference:", f"{{model_name={model}}}", [
        ("num_requests_running", "gauge", load.running), ("num_requests_waiting", "gauge", load.waiting),
        ("kv_cache_usage_perc", "gauge", load.kv_usage), ("requests_total", "counter", t.requests),
        ("prompt_tokens_total", "counter", t.prompt_tokens),
        ("generation_tokens_total", "counter", t.generation_tokens)])
    if cfg.prefix_cache_blocks is None and not cfg.spec_tokens and not cfg.vllm_metrics:
        return text
    return text + _vllm_text(cfg, load, t, f'engine="0",model_name={model}')


def _vllm_text(cfg: ReferenceConfig, load: Load, t: Totals, labels: str) -> str:
    rows = [("num_requests_running", "gauge", load.running), ("num_requests_waiting", "gauge", load.waiting),
            ("kv_cache_usage_perc", "gauge", load.kv_usage), ("prompt_tokens_total", "counter", t.prompt_tokens),
            ("generation_tokens_total", "counter", t.generation_tokens)]
    if cfg.prefix_cache_blocks is not None:
        rows += [("prefix_cache_queries_total", "counter", t.prefix_queries),
                 ("prefix_cache_hits_total", "counter", t.prefix_hits)]
    if cfg.spec_tokens:
        rows += [("spec_decode_num_drafts_total", "counter", t.spec_drafts),
                 ("spec_decode_num_draft_tokens_total", "counter", t.spec_draft_tokens),
                 ("spec_decode_num_accepted_tokens_total", "counter", t.spec_accepted)]
    text = _series("vllm:", f"{{{labels}}}", rows)
    if cfg.vllm_metrics:
        text += _histograms(t.times, labels)
    if cfg.spec_tokens:
        per_pos = t.spec_accepted_per_pos + [0] * (cfg.spec_tokens - len(t.spec_accepted_per_pos))
        name = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
        text += f"# TYPE {name} counter\n" + "".join(
            f'{name}{{{labels},position="{i}"}} {v}\n' for i, v in enumerate(per_pos))
    return text


HISTOGRAMS = {"queue": "request_queue_time_seconds", "prefill": "request_prefill_time_seconds",
              "decode": "request_decode_time_seconds", "inference": "request_inference_time_seconds",
              "ttft": "time_to_first_token_seconds", "e2e": "e2e_request_latency_seconds"}


def _histograms(times: Histograms, labels: str) -> str:
    """vLLM's request-time histograms, with their sums and counts (one +Inf bucket: the counts are all)."""
    sums = times.sums or dict.fromkeys(ROLES, 0.0)
    return "".join(f"# TYPE vllm:{HISTOGRAMS[r]} histogram\n"
                   f'vllm:{HISTOGRAMS[r]}_bucket{{{labels},le="+Inf"}} {times.count}\n'
                   f"vllm:{HISTOGRAMS[r]}_sum{{{labels}}} {sums[r]!r}\n"
                   f"vllm:{HISTOGRAMS[r]}_count{{{labels}}} {times.count}\n" for r in ROLES)


def server_info(cfg: ReferenceConfig) -> dict:
    """/get_server_info, SGLang-style: SGLang's key names where SGLang has the setting."""
    info = {"engine": "reference", "version": __version__, "model_path": cfg.model,
            "max_total_num_tokens": cfg.kv_capacity_tokens, "context_length": cfg.max_model_len,
            "max_running_requests": cfg.max_running, "vocab_size": cfg.vocab_size,
            "ttft_ms": cfg.ttft_ms, "itl_ms": cfg.itl_ms, "tokens_per_chunk": cfg.tokens_per_chunk}
    if not cfg.report_vocab:
        del info["vocab_size"]
    if cfg.chunks_per_write > 1:
        info["chunks_per_write"] = cfg.chunks_per_write
    if cfg.itl_end_ms is not None:
        info |= {"itl_end_ms": cfg.itl_end_ms, "ramp_s": cfg.ramp_s}
    if cfg.load_model:
        info |= {"itl_per_running_ms": cfg.itl_per_running_ms, "prefill_ms_per_token": cfg.prefill_ms_per_token}
    if cfg.captured_batch_sizes:
        info |= graph_info(cfg) | {"disable_cuda_graph": False, "eager_itl_factor": cfg.eager_itl_factor,
                                   "eager_itl_ms": cfg.eager_itl_ms}
    if cfg.prefix_cache_blocks is not None:
        info |= {"disable_radix_cache": False, "page_size": cfg.block_size,
                 "prefix_cache_blocks": cfg.prefix_cache_blocks}
    if cfg.spec_tokens:
        info |= {"speculative_algorithm": "REFERENCE", "speculative_num_draft_tokens": cfg.spec_tokens}
    return info


def graph_info(cfg: ReferenceConfig) -> dict:
    """The captured batch sizes under SGLang's names (`cuda_graph_bs`, `cuda_graph_max_bs`)."""
    sizes = list(cfg.captured_batch_sizes or ())
    return {"cuda_graph_bs": sizes, "cuda_graph_max_bs": max(sizes)} if sizes else {}


def model_entry(cfg: ReferenceConfig) -> dict:
    entry = {"id": cfg.model, "object": "model", "created": 0, "owned_by": "tokenbench",
             "max_model_len": cfg.max_model_len}
    if cfg.captured_batch_sizes:
        entry["meta"] = graph_info(cfg)
    return entry
