"""A cell as the result file of `vllm bench serve --save-result`: the same top-level keys, units and
file name, so scripts written for vLLM's results read tokenbench's unchanged. Times in the per-request
lists are seconds (vLLM's); the statistics are milliseconds. Formulas: docs/metrics.md."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenbench.client.records import RequestRecord
from tokenbench.load.cell import CellResult
from tokenbench.metrics import request as rm
from tokenbench.metrics.request import percentile

NS = 1e9
DETAIL_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors")


@dataclass(frozen=True)
class VllmOptions:
    """`--save-result` and its companions, with vLLM's defaults."""

    result_dir: str | None = None
    result_filename: str | None = None
    percentile_metrics: tuple[str, ...] = ("ttft", "tpot", "itl")
    metric_percentiles: tuple[float, ...] = (99.0,)
    detailed: bool = False


@dataclass(frozen=True)
class CellMeta:
    label: str
    model: str
    tokenizer: str
    api: str


def _samples(ok: Sequence[RequestRecord], metric: str) -> list[float]:
    if metric == "itl":
        return [v for r in ok for v in rm.itl_ms(r)]
    fn = {"ttft": rm.ttft_ms, "tpot": rm.tpot_ms, "e2el": rm.e2el_ms}[metric]
    return [v for v in (fn(r) for r in ok) if v is not None]


def metric_stats(ok: Sequence[RequestRecord], metric: str, percentiles: Sequence[float]) -> dict[str, float]:
    """mean/median/std and the asked percentiles of one metric, named as vLLM names them."""
    vals = sorted(_samples(ok, metric))
    mean = sum(vals) / len(vals) if vals else 0.0
    out = {f"mean_{metric}_ms": mean, f"median_{metric}_ms": percentile(vals, 50) if vals else 0.0,
           f"std_{metric}_ms": math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals)) if vals else 0.0}
    for p in percentiles:
        word = str(int(p)) if int(p) == p else str(p)
        out[f"p{word}_{metric}_ms"] = percentile(vals, p) if vals else 0.0
    return out


def peak_output_rate(recs: Sequence[RequestRecord]) -> tuple[float, int]:
    """vLLM's peak figures over 1-second buckets from the first successful send: the most output tokens
    received in one bucket (tokens, where vLLM counts chunks: equal at one token per chunk), and the most
    successful requests active during one bucket."""
    ok = [r for r in recs if r.ok]
    if not ok:
        return 0.0, 0
    t0, second = min(r.sent_ns for r in ok), 1_000_000_000
    tokens: Counter[int] = Counter()
    active: Counter[int] = Counter()
    for r in ok:
        for t, n in zip(r.token_times_ns, r.token_counts, strict=False):
            tokens[(t - t0) // second] += n
        active.update(range((r.sent_ns - t0) // second, (r.end_ns - t0) // second + 1))
    return float(max(tokens.values(), default=0)), max(active.values(), default=0)


def _header(result: CellResult, meta: CellMeta) -> dict:
    load = result.load
    rate = load.request_rate if load.request_rate is not None else "inf"
    backend = "openai-chat" if meta.api == "chat" else "openai"
    return {"date": time.strftime("%Y%m%d-%H%M%S"), "endpoint_type": backend, "backend": backend,
            "label": meta.label, "model_id": meta.model, "tokenizer_id": meta.tokenizer,
            "num_prompts": len(result.records), "request_rate": rate,
            "burstiness": "inf" if load.arrival == "constant" else load.burstiness,     # vLLM: constant gaps
            "max_concurrency": load.in_flight_cap}


def _totals(result: CellResult) -> dict:
    s, recs = result.summary, result.records
    peak, most = peak_output_rate(recs)
    return {"duration": s.duration or 0.0, "completed": s.completed, "failed": s.failed,
            "total_input_tokens": s.total_input_tokens, "total_output_tokens": s.total_output_tokens,
            "request_throughput": s.request_throughput or 0.0, "request_goodput": s.request_goodput,
            "output_throughput": s.output_throughput or 0.0, "total_token_throughput": s.total_token_throughput or 0.0,
            "latencies": [r.e2el_ns / NS for r in recs], "queue_times": [r.queue_ns / NS for r in recs],
            "max_output_tokens_per_s": peak, "max_concurrent_requests": most, "rtfx": 0.0}


def _details(recs: Sequence[RequestRecord]) -> dict:
    return {"input_lens": [r.prompt_tokens if r.prompt_tokens is not None else r.input_len for r in recs],
            "output_lens": [r.output_tokens for r in recs],
            "ttfts": [r.ttft_ns / NS if r.ttft_ns is not None else 0.0 for r in recs],
            "itls": [[v / 1000 for v in rm.itl_ms(r)] for r in recs],
            "start_times": [r.sent_ns / NS for r in recs],
            "generated_texts": [r.text for r in recs],
            "errors": [r.error_detail or (r.error_kind or "") for r in recs]}


def vllm_result(result: CellResult, meta: CellMeta, opts: VllmOptions) -> dict:
    """The cell as `vllm bench serve` writes its result JSON (per-request lists only when detailed)."""
    doc = {**_header(result, meta), **_totals(result)}
    if opts.detailed:
        doc.update(_details(result.records))
    ok = [r for r in result.records if r.ok]
    for metric in opts.percentile_metrics:
        doc.update(metric_stats(ok, metric, opts.metric_percentiles))
    return doc


def result_path(doc: dict, opts: VllmOptions, index: int, cells: int) -> Path:
    """vLLM's name `{label}-{rate}qps[-concurrency{C}]-{model}-{date}.json` in --result-dir; a given
    --result-filename is used as is for one cell and numbered (`name-2.json`) for the later ones."""
    if opts.result_filename:
        p = Path(opts.result_filename)
        name = p.name if index == 0 else f"{p.stem}-{index + 1}{p.suffix}"
    else:
        conc = f"-concurrency{doc['max_concurrency']}" if doc["max_concurrency"] is not None else ""
        model = str(doc["model_id"]).split("/")[-1]
        number = f"-{index + 1}" if cells > 1 else ""
        name = f"{doc['label']}-{doc['request_rate']}qps{conc}-{model}-{doc['date']}{number}.json"
    if opts.result_dir:
        return Path(opts.result_dir) / name
    return (Path(opts.result_filename).parent if opts.result_filename else Path(".")) / name
