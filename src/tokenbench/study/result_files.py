"""Other tools' result files, written as a study runs, besides the database and tokenbench's own JSON result
(that one is the runner's journal, store/journal.py): each a `study.run.ResultFile` fed every stored cell.

- `--save-result`: a cell as the result file of `vllm bench serve --save-result` (`VllmResults`, one file
  per cell, each written atomically: store/outputs.py): the same top-level keys, units and file name, so
  scripts written for vLLM's results read tokenbench's unchanged. Times in the per-request lists are
  seconds (vLLM's); the statistics are milliseconds.
- `--output-file`: a cell as one line of the JSONL file `python -m sglang.bench_serving --output-file`
  appends to (`SglangResults`, a line appended per cell): the same keys in the same order (SGLang 0.5.23),
  so scripts written for SGLang's results read tokenbench's. Statistics are milliseconds; the per-request
  lists (with --output-details) are seconds, as SGLang's. SGLang's key names differ from vLLM's
  (`e2e_latency` for `e2el`, `total_throughput` for `total_token_throughput`, always p90/p95/p99).

Formulas: docs/metrics.md. These writers read a live cell's result (its records in memory), so they sit in
study/, not formats/ (which reads only the store)."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenbench.client.records import RequestRecord
from tokenbench.load.cell import CellResult
from tokenbench.load.target import Endpoint
from tokenbench.metrics import request as rm
from tokenbench.metrics.request import percentile
from tokenbench.spec.bench import SLO
from tokenbench.spec.study import StudySpec
from tokenbench.spec.study_name import derived_name
from tokenbench.store import outputs
from tokenbench.store.records import dumps
from tokenbench.store.rows import CellRow
from tokenbench.study.plan import PlannedCell

# ---- vllm bench serve --save-result ----

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


def _vllm_header(result: CellResult, meta: CellMeta) -> dict:
    load = result.load
    rate = load.request_rate if load.request_rate is not None else "inf"
    backend = "openai-chat" if meta.api == "chat" else "openai"
    return {"date": time.strftime("%Y%m%d-%H%M%S"), "endpoint_type": backend, "backend": backend,
            "label": meta.label, "model_id": meta.model, "tokenizer_id": meta.tokenizer,
            "num_prompts": len(result.records), "request_rate": rate,
            "burstiness": "inf" if load.arrival == "constant" else load.burstiness,     # vLLM: constant gaps
            "max_concurrency": load.in_flight_cap}


def _vllm_totals(result: CellResult) -> dict:
    s, recs = result.summary, result.records
    peak, most = peak_output_rate(recs)
    return {"duration": s.duration or 0.0, "completed": s.completed, "failed": s.failed,
            "total_input_tokens": s.total_input_tokens, "total_output_tokens": s.total_output_tokens,
            "request_throughput": s.request_throughput or 0.0, "request_goodput": s.request_goodput,
            "output_throughput": s.output_throughput or 0.0, "total_token_throughput": s.total_token_throughput or 0.0,
            "latencies": [r.e2el_ns / NS for r in recs], "queue_times": [r.queue_ns / NS for r in recs],
            "max_output_tokens_per_s": peak, "max_concurrent_requests": most, "rtfx": 0.0}


def _vllm_details(recs: Sequence[RequestRecord]) -> dict:
    return {"input_lens": [r.prompt_tokens if r.prompt_tokens is not None else r.input_len for r in recs],
            "output_lens": [r.output_tokens for r in recs],
            "ttfts": [r.ttft_ns / NS if r.ttft_ns is not None else 0.0 for r in recs],
            "itls": [[v / 1000 for v in rm.itl_ms(r)] for r in recs],
            "start_times": [r.sent_ns / NS for r in recs],
            "generated_texts": [r.text for r in recs],
            "errors": [r.error_detail or (r.error_kind or "") for r in recs]}


def vllm_result(result: CellResult, meta: CellMeta, opts: VllmOptions) -> dict:
    """The cell as `vllm bench serve` writes its result JSON (per-request lists only when detailed)."""
    doc = {**_vllm_header(result, meta), **_vllm_totals(result)}
    if opts.detailed:
        doc.update(_vllm_details(result.records))
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


# ---- sglang.bench_serving --output-file ----

DATASET_NAMES = {"random": "random", "sharegpt": "sharegpt", "prefix": "generated-shared-prefix", "jsonl": "custom",
                 "image": "image", "trace": "mooncake"}
METRICS = (("e2el", "e2e_latency"), ("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"))


@dataclass(frozen=True)
class SglangMeta:
    tag: str
    backend: str
    slo: SLO
    details: bool


def _sglang_header(result: CellResult, meta: SglangMeta) -> dict:
    wl, load = result.workload, result.load
    exact = wl.draws is None and wl.input_len is not None
    ratio = 1.0 if exact else wl.range_ratio
    rate = load.request_rate if load.request_rate is not None else float("inf")
    return {"tag": meta.tag, "backend": meta.backend, "dataset_name": DATASET_NAMES.get(wl.kind, wl.kind),
            "request_rate": rate, "max_concurrency": load.in_flight_cap,
            "sharegpt_output_len": wl.output_len if wl.kind == "sharegpt" else None,
            "random_input_len": wl.input_len, "random_output_len": wl.output_len, "random_range_ratio": ratio,
            "server_info": None}


def _sglang_totals(result: CellResult) -> dict:
    s = result.summary
    duration = s.duration or 0.0
    per_s = (lambda n: n / duration if duration else 0.0)
    return {"duration": duration, "completed": s.completed, "total_input_tokens": s.total_input_tokens,
            "total_input_text_tokens": s.total_input_tokens, "total_input_vision_tokens": 0,
            "total_output_tokens": s.total_output_tokens, "total_output_tokens_retokenized": s.total_output_tokens,
            "request_throughput": s.request_throughput or 0.0, "input_throughput": per_s(s.total_input_tokens),
            "output_throughput": s.output_throughput or 0.0, "total_throughput": s.total_token_throughput or 0.0}


def _sglang_stats(ok: Sequence[RequestRecord]) -> dict:
    out = {}
    for ours, theirs in METRICS:
        for key, value in metric_stats(ok, ours, (90.0, 95.0, 99.0)).items():
            out[key.replace(f"_{ours}_", f"_{theirs}_")] = value
    return out


def _sglang_peaks(result: CellResult, ok: Sequence[RequestRecord]) -> dict:
    duration = result.summary.duration or 0.0
    peak, most = peak_output_rate(result.records)
    busy = sum(r.e2el_ns for r in ok) / NS
    return {"concurrency": busy / duration if duration else 0.0, "accept_length": None,
            "max_output_tokens_per_s": peak, "max_concurrent_requests": most}


def _sglang_goodput(result: CellResult, ok: Sequence[RequestRecord], slo: SLO) -> dict:
    """SGLang's goodput keys: the SLOs in ms, requests meeting all of them per second, and the share of
    completed requests meeting all, and each."""
    limits = slo.thresholds()
    each = {k: sum(rm.meets_slo(r, SLO(**{f"{k}_ms": v})) for r in ok) / len(ok) if ok else 0.0
            for k, v in limits.items()}
    good = sum(rm.meets_slo(r, slo) for r in ok)
    duration = result.summary.duration or 0.0
    return {"goodput_slos_ms": limits, "request_goodput": good / duration if duration else 0.0,
            "slo_attainment": good / len(ok) if ok else 0.0, "slo_attainment_by_metric": each}


def _sglang_details(recs: Sequence[RequestRecord]) -> dict:
    return {"input_lens": [r.prompt_tokens if r.prompt_tokens is not None else r.input_len for r in recs],
            "output_lens": [r.output_tokens for r in recs],
            "ttfts": [r.ttft_ns / NS if r.ttft_ns is not None else 0.0 for r in recs],
            "itls": [[v / 1000 for v in rm.itl_ms(r)] for r in recs],
            "generated_texts": [r.text for r in recs],
            "errors": [r.error_detail or (r.error_kind or "") for r in recs]}


def sglang_result(result: CellResult, meta: SglangMeta) -> dict:
    """The cell as SGLang's bench_serving writes one JSONL line (goodput keys with SLOs, lists with details)."""
    ok = [r for r in result.records if r.ok]
    doc = {**_sglang_header(result, meta), **_sglang_totals(result), **_sglang_stats(ok), **_sglang_peaks(result, ok)}
    if not meta.slo.is_empty():
        doc.update(_sglang_goodput(result, ok, meta.slo))
    if meta.details:
        doc.update(_sglang_details(result.records))
    return doc


# ---- the writers a study feeds ----

def file_label(spec: StudySpec) -> str:
    """vLLM's --label, which starts the result file's name: the study's name when the user gave one, else
    "tokenbench" (a name made of the target and loads would repeat, with ':' and spaces, what the file's
    name says after it)."""
    return spec.name if spec.name and spec.name != derived_name(spec) else "tokenbench"


class VllmResults:
    """`--save-result`: each cell as the JSON file `vllm bench serve` would have written for it (it lists
    every request's figures, so the cells keep their records in memory)."""

    needs_records = True

    def __init__(self, spec: StudySpec, opts: VllmOptions, cells: int) -> None:
        self.spec, self.opts, self.cells = spec, opts, cells
        self.meta: CellMeta | None = None
        self.written: list[Path] = []

    def target_ready(self, endpoint: Endpoint, facts: dict) -> None:
        self.meta = CellMeta(label=file_label(self.spec), model=endpoint.model,
                             tokenizer=self.spec.workload.tokenizer_path or endpoint.model, api=self.spec.api)

    def cell_stored(self, cell: PlannedCell, row: CellRow, result: CellResult) -> None:
        assert self.meta is not None, "target_ready comes before the first cell"
        doc = vllm_result(result, self.meta, self.opts)
        path = result_path(doc, self.opts, len(self.written), self.cells)
        outputs.write_text(path, dumps(doc, indent=1), "--save-result")
        self.written.append(path)

    def finish(self, status: str) -> None:
        return None

    def locations(self) -> list[str]:
        return [f"wrote {p} (vllm bench serve format)" for p in self.written]


class SglangResults:
    """`--output-file`: each cell appended as one line of SGLang's bench_serving JSONL, as SGLang appends
    one line per run (it lists per-request figures with --output-details, so cells keep their records)."""

    needs_records = True

    def __init__(self, spec: StudySpec, path: str, details: bool, backend: str | None) -> None:
        self.path, self.lines = Path(path), 0
        api_backend = "sglang-oai-chat" if spec.api == "chat" else "sglang-oai"
        self.meta = SglangMeta(spec.name or "", backend or api_backend, spec.slo, details)

    def target_ready(self, endpoint: Endpoint, facts: dict) -> None:
        return None

    def cell_stored(self, cell: PlannedCell, row: CellRow, result: CellResult) -> None:
        outputs.append_line(self.path, dumps(sglang_result(result, self.meta)), "--output-file")
        self.lines += 1

    def finish(self, status: str) -> None:
        return None

    def locations(self) -> list[str]:
        return [f"appended {self.lines} line(s) to {self.path} (sglang.bench_serving JSONL)"] if self.lines else []
