"""A cell as one line of the JSONL file `python -m sglang.bench_serving --output-file` appends to: the
same keys in the same order (SGLang 0.5.23), so scripts written for SGLang's results read tokenbench's.
Statistics are milliseconds; the per-request lists (with --output-details) are seconds, as SGLang's.
Formulas: docs/metrics.md; SGLang's key names differ from vLLM's (`e2e_latency` for `e2el`,
`total_throughput` for `total_token_throughput`, always p90/p95/p99)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenbench.client.records import RequestRecord
from tokenbench.load.cell import CellResult
from tokenbench.metrics import request as rm
from tokenbench.spec.bench import SLO
from tokenbench.study.vllm_result import NS, metric_stats, peak_output_rate

DATASET_NAMES = {"random": "random", "sharegpt": "sharegpt", "prefix": "generated-shared-prefix", "jsonl": "custom",
                 "image": "image", "trace": "mooncake"}
METRICS = (("e2el", "e2e_latency"), ("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"))


@dataclass(frozen=True)
class SglangMeta:
    tag: str
    backend: str
    slo: SLO
    details: bool


def _header(result: CellResult, meta: SglangMeta) -> dict:
    wl, load = result.workload, result.load
    exact = wl.draws is None and wl.input_len is not None
    ratio = 1.0 if exact else wl.range_ratio
    rate = load.request_rate if load.request_rate is not None else float("inf")
    return {"tag": meta.tag, "backend": meta.backend, "dataset_name": DATASET_NAMES.get(wl.kind, wl.kind),
            "request_rate": rate, "max_concurrency": load.in_flight_cap,
            "sharegpt_output_len": wl.output_len if wl.kind == "sharegpt" else None,
            "random_input_len": wl.input_len, "random_output_len": wl.output_len, "random_range_ratio": ratio,
            "server_info": None}


def _totals(result: CellResult) -> dict:
    s = result.summary
    duration = s.duration or 0.0
    per_s = (lambda n: n / duration if duration else 0.0)
    return {"duration": duration, "completed": s.completed, "total_input_tokens": s.total_input_tokens,
            "total_input_text_tokens": s.total_input_tokens, "total_input_vision_tokens": 0,
            "total_output_tokens": s.total_output_tokens, "total_output_tokens_retokenized": s.total_output_tokens,
            "request_throughput": s.request_throughput or 0.0, "input_throughput": per_s(s.total_input_tokens),
            "output_throughput": s.output_throughput or 0.0, "total_throughput": s.total_token_throughput or 0.0}


def _stats(ok: Sequence[RequestRecord]) -> dict:
    out = {}
    for ours, theirs in METRICS:
        for key, value in metric_stats(ok, ours, (90.0, 95.0, 99.0)).items():
            out[key.replace(f"_{ours}_", f"_{theirs}_")] = value
    return out


def _peaks(result: CellResult, ok: Sequence[RequestRecord]) -> dict:
    duration = result.summary.duration or 0.0
    peak, most = peak_output_rate(result.records)
    busy = sum(r.e2el_ns for r in ok) / NS
    return {"concurrency": busy / duration if duration else 0.0, "accept_length": None,
            "max_output_tokens_per_s": peak, "max_concurrent_requests": most}


def _goodput(result: CellResult, ok: Sequence[RequestRecord], slo: SLO) -> dict:
    """SGLang's goodput keys: the SLOs in ms, requests meeting all of them per second, and the share of
    completed requests meeting all, and each."""
    limits = {k.removesuffix("_ms"): v for k, v in slo.model_dump(exclude_none=True).items()}
    each = {k: sum(rm.meets_slo(r, SLO(**{f"{k}_ms": v})) for r in ok) / len(ok) if ok else 0.0
            for k, v in limits.items()}
    good = sum(rm.meets_slo(r, slo) for r in ok)
    duration = result.summary.duration or 0.0
    return {"goodput_slos_ms": limits, "request_goodput": good / duration if duration else 0.0,
            "slo_attainment": good / len(ok) if ok else 0.0, "slo_attainment_by_metric": each}


def _details(recs: Sequence[RequestRecord]) -> dict:
    return {"input_lens": [r.prompt_tokens if r.prompt_tokens is not None else r.input_len for r in recs],
            "output_lens": [r.output_tokens for r in recs],
            "ttfts": [r.ttft_ns / NS if r.ttft_ns is not None else 0.0 for r in recs],
            "itls": [[v / 1000 for v in rm.itl_ms(r)] for r in recs],
            "generated_texts": [r.text for r in recs],
            "errors": [r.error_detail or (r.error_kind or "") for r in recs]}


def sglang_result(result: CellResult, meta: SglangMeta) -> dict:
    """The cell as SGLang's bench_serving writes one JSONL line (goodput keys with SLOs, lists with details)."""
    ok = [r for r in result.records if r.ok]
    doc = {**_header(result, meta), **_totals(result), **_stats(ok), **_peaks(result, ok)}
    if not meta.slo.is_empty():
        doc.update(_goodput(result, ok, meta.slo))
    if meta.details:
        doc.update(_details(result.records))
    return doc
