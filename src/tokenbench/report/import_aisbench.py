"""AISBench perf outputs (`ais_bench --mode perf`, Huawei's benchmark for MindIE and vLLM-Ascend services) read
as one imported cell. AISBench writes, per model and dataset, into `<work>/<time>/performances/<model>/`:

    <dataset>.csv            rows E2EL, TTFT, TPOT, ITL, InputTokens, OutputTokens, OutputTokenThroughput;
                             columns Stage, Average, Min, Max, Median, P75, P90, P99, N; values with units
    <dataset>.json           totals: Benchmark Duration, Total/Failed/Success Requests, Concurrency,
                             Max Concurrency, Request Throughput, Output Token Throughput, ...
    <dataset>_details.jsonl  one line per request (success, input_tokens, output_tokens, error_info)

Any of the three files, or the folder, names the result. The mapping onto tokenbench's (vLLM's) names is
CSV_STATS x CSV_METRICS and TOTALS; docs/aisbench.md documents it and AISBench's definitions.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tokenbench.errors import UsageError

CSV_METRICS = {"TTFT": "ttft", "TPOT": "tpot", "ITL": "itl", "E2EL": "e2el"}
CSV_STATS = {"Average": "mean", "Median": "median", "Min": "min", "Max": "max", "P75": "p75", "P90": "p90",
             "P99": "p99"}
TOTALS = {"Success Requests": "completed", "Failed Requests": "failed", "Total Requests": "num_prompts",
          "Benchmark Duration": "duration", "Request Throughput": "request_throughput",
          "Output Token Throughput": "output_throughput", "Input Token Throughput": "input_throughput",
          "Total Token Throughput": "total_token_throughput", "Total Input Tokens": "total_input_tokens",
          "Total Generated Tokens": "total_output_tokens", "Concurrency": "achieved_concurrency",
          "Max Concurrency": "max_concurrency"}
_VALUE = re.compile(r"^\s*(-?[0-9.]+(?:e-?\d+)?)\s*([a-zA-Z/]*)\s*$")
_TO_MS = {"ms": 1.0, "s": 1000.0, "us": 0.001, "": 1.0}


@dataclass
class AisResult:
    model: str                          # AISBench's model abbr (the folder name)
    dataset: str
    summary: dict
    files: list[Path] = field(default_factory=list)
    details: list[dict] = field(default_factory=list)


def is_aisbench(path: Path) -> bool:
    """A folder holding AISBench outputs, a `*_details.jsonl`, or a CSV/JSON of AISBench's shape."""
    if path.is_dir():
        return any(path.glob("*_details.jsonl")) or any(_is_perf_csv(p) for p in path.glob("*.csv"))
    if path.name.endswith("_details.jsonl"):
        return True
    if path.suffix.lower() == ".csv":
        return _is_perf_csv(path)
    if path.suffix.lower() == ".json":
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(doc, dict) and "Benchmark Duration" in doc
    return False


def _is_perf_csv(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8-sig") as handle:
            return handle.readline().startswith("Performance Parameters")
    except OSError:
        return False


def locate(path: Path) -> tuple[Path, str, str]:
    """(folder, model, dataset) of an AISBench result named by any of its files or its folder."""
    folder = path if path.is_dir() else path.parent
    if path.is_dir():
        names = sorted(p.name for p in folder.glob("*.csv") if _is_perf_csv(p))
        if len(names) != 1:
            found = ", ".join(names) or "none"
            raise UsageError(f"{folder} holds {len(names)} AISBench datasets ({found})",
                             "import one file of the dataset you mean, e.g. performances/<model>/<dataset>.csv")
        dataset = names[0][:-4]
    else:
        dataset = path.name.removesuffix("_details.jsonl").removesuffix(".csv").removesuffix(".json")
    return folder, folder.name, dataset


def value(raw: object) -> tuple[float | None, str]:
    """'104.4 ms' -> (104.4, 'ms'); 8 -> (8.0, '')."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw), ""
    m = _VALUE.match(str(raw))
    return (float(m.group(1)), m.group(2)) if m else (None, "")


def read(path: Path) -> AisResult:
    folder, model, dataset = locate(path)
    csv_path, json_path = folder / f"{dataset}.csv", folder / f"{dataset}.json"
    details_path = folder / f"{dataset}_details.jsonl"
    if not csv_path.is_file() and not json_path.is_file():
        raise UsageError(f"no {dataset}.csv or {dataset}.json in {folder}", "import AISBench's performances/<model>/ "
                         "folder as it was written")
    summary: dict = {}
    if csv_path.is_file():
        summary.update(_csv_summary(csv_path))
    if json_path.is_file():
        summary.update(_totals(json_path))
    details = _details(details_path) if details_path.is_file() else []
    files = [p for p in (csv_path, json_path, details_path) if p.is_file()]
    return AisResult(model, dataset, summary, files, details)


def _csv_summary(path: Path) -> dict:
    out = {}
    for row in csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))):
        name = CSV_METRICS.get(row.get("Performance Parameters", ""))
        if name is None or row.get("Stage", "total") != "total":
            continue
        for column, stat in CSV_STATS.items():
            number, unit = value(row.get(column, ""))
            if number is not None:
                out[f"{stat}_{name}_ms"] = number * _TO_MS.get(unit, 1.0)
    return out


def _totals(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UsageError(f"{path}: not JSON ({exc})", "import the file AISBench wrote") from None
    out = {}
    for key, name in TOTALS.items():
        raw = doc.get(key, {})
        number, unit = value(raw.get("total") if isinstance(raw, dict) else raw)
        if number is None:
            continue
        out[name] = number * _TO_MS.get(unit, 1.0) / 1000.0 if name == "duration" else number
    for name in ("completed", "failed", "num_prompts", "total_input_tokens", "total_output_tokens",
                 "max_concurrency"):
        if name in out:
            out[name] = int(out[name])
    return out


def _details(path: Path) -> list[dict]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                raise UsageError(f"{path}:{n}: not JSON", "import the file AISBench wrote") from None
    return out
