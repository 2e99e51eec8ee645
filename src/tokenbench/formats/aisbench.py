"""AISBench perf outputs (`ais_bench --mode perf`, Huawei's benchmark for MindIE and vLLM-Ascend services) read
as one imported cell. AISBench writes, per model and dataset, into `<work>/<time>/performances/<model>/`:

    <dataset>.csv            rows E2EL, TTFT, TPOT, ITL, InputTokens, OutputTokens, OutputTokenThroughput;
                             columns Stage, Average, Min, Max, Median, P75, P90, P99, N; values with units
    <dataset>.json           totals: Benchmark Duration, Total/Failed/Success Requests, Concurrency,
                             Max Concurrency, Request Throughput, Output Token Throughput, ...
    <dataset>_details.jsonl  one line per request (success, input_tokens, output_tokens, error_info, and
                             time_points: {"__db_ref__": id} into db_data/<db_name>)
    db_data/<db_name>        SQLite table numpy_store(id, arr_blob): each request's time points, one .npy
                             float64 array of perf_counter seconds (the send, then every `data:` chunk)

Any of the three files, or the folder, names the result. The mapping onto tokenbench's (vLLM's) names is
CSV_STATS x CSV_METRICS and TOTALS; the per-request records are built by `records` (DETAIL_FIELDS);
docs/aisbench.md documents both and AISBench's definitions.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tokenbench.client.records import RequestRecord
from tokenbench.errors import UsageError
from tokenbench.metrics import request as rm
from tokenbench.metrics.request import describe

CSV_METRICS = {"TTFT": "ttft", "TPOT": "tpot", "ITL": "itl", "E2EL": "e2el"}
CSV_STATS = {"Average": "mean", "Median": "median", "Min": "min", "Max": "max", "P75": "p75", "P90": "p90",
             "P99": "p99"}
TOTALS = {"Success Requests": "completed", "Failed Requests": "failed", "Total Requests": "num_prompts",
          "Benchmark Duration": "duration", "Request Throughput": "request_throughput",
          "Output Token Throughput": "output_throughput", "Input Token Throughput": "input_throughput",
          "Total Token Throughput": "total_token_throughput", "Total Input Tokens": "total_input_tokens",
          "Total Generated Tokens": "total_output_tokens", "Concurrency": "achieved_concurrency",
          "Max Concurrency": "max_concurrency"}
# a details line's field -> the RequestRecord field it fills (docs/aisbench.md, "Per-request records")
DETAIL_FIELDS = {"id": "index", "time_points[0]": "sent_ns (= intended_ns)", "time_points[1:]": "token_times_ns",
                 "time_points[-1]": "end_ns", "input_tokens": "prompt_tokens", "output_tokens": "completion_tokens",
                 "success": "error_kind (None, or imported_error)", "error_info": "error_detail",
                 "prediction": "text"}
DB_REF = "__db_ref__"
_VALUE = re.compile(r"^\s*(-?[0-9.]+(?:e-?\d+)?)\s*([a-zA-Z/]*)\s*$")
_TO_MS = {"ms": 1.0, "s": 1000.0, "us": 0.001, "": 1.0}


@dataclass
class AisResult:
    model: str                          # AISBench's model abbr (the folder name)
    dataset: str
    summary: dict
    files: list[Path] = field(default_factory=list)
    details: list[dict] = field(default_factory=list)
    time_points: dict[tuple[str, int], list[float]] = field(default_factory=dict)   # (db_name, id) -> seconds


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
    dbs = [folder / "db_data" / name for name in sorted({str(d.get("db_name")) for d in details if d.get("db_name")})]
    dbs = [p for p in dbs if p.is_file()]
    files = [p for p in (csv_path, json_path, details_path, *dbs) if p.is_file()]
    points = {(p.name, i): arr for p in dbs for i, arr in _arrays(p).items()}
    return AisResult(model, dataset, summary, files, details, points)


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


def _arrays(path: Path) -> dict[int, list[float]]:
    """db_data/<name>: every stored array by id (AISBench keeps numpy arrays as .npy blobs in SQLite)."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            rows = conn.execute("SELECT id, arr_blob FROM numpy_store").fetchall()
    except sqlite3.Error as exc:
        raise UsageError(f"{path}: not AISBench's time-point database ({exc})",
                         "import the performances/<model>/ folder as AISBench wrote it") from None
    out = {}
    for row_id, blob in rows:
        try:
            out[int(row_id)] = [float(x) for x in np.load(io.BytesIO(blob), allow_pickle=False).ravel()]
        except ValueError:
            continue                                    # an array that is not numbers: that request has no timings
    return out


def points_of(res: AisResult, detail: dict) -> list[float] | None:
    """A request's time points (seconds), or None when the details line or the database lacks them."""
    ref = detail.get("time_points")
    if isinstance(ref, list):
        return [float(x) for x in ref]
    if isinstance(ref, dict) and isinstance(ref.get(DB_REF), int):
        return res.time_points.get((str(detail.get("db_name")), ref[DB_REF]))
    return None


def records(res: AisResult, input_len: int, output_len: int) -> list[RequestRecord]:
    """One RequestRecord per details line, on the times AISBench stamped: sent = its first time point (taken
    before the request is sent), one token time per later point (every `data:` chunk, usage-only ones
    included), end = the last. Empty when no request has time points (a details file without db_data)."""
    timed = [(d, points_of(res, d)) for d in res.details]
    starts = [p[0] for _, p in timed if p]
    if not starts:
        return []
    t0 = min(starts)
    return [_record(n, d, p, t0, input_len, output_len) for n, (d, p) in enumerate(timed)]


def _record(n: int, d: dict, points: list[float] | None, t0: float, input_len: int,
            output_len: int) -> RequestRecord:
    ns = [round((t - t0) * 1e9) for t in points or []]
    ok = bool(d.get("success")) and len(ns) >= 2
    given = d.get("id")
    index = given if isinstance(given, int) else n
    sent = ns[0] if ns else 0
    return RequestRecord(
        index=index, phase="measure", input_len=input_len, output_len=output_len, intended_ns=sent, sent_ns=sent,
        end_ns=ns[-1] if ns else sent, token_times_ns=ns[1:] if ok else [], token_counts=[1] * (len(ns) - 1) if ok else [],
        prompt_tokens=_int(d.get("input_tokens")), completion_tokens=_int(d.get("output_tokens")) if ok else None,
        usage_source="server" if ok and d.get("output_tokens") is not None else "none",
        error_kind=None if ok else "imported_error",
        error_detail="" if ok else (str(d.get("error_info") or "no time points") if d.get("success") else
                                    str(d.get("error_info") or "failed"))[:500],
        text=str(d.get("prediction") or ""), count_source="aisbench")


def _int(v: object) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def filled(summary: dict, recs: list[RequestRecord]) -> dict:
    """The summary with the statistics AISBench does not print (std, p95, p99.9 ...) computed from its time
    points by tokenbench's formulas; AISBench's own figures are kept as they are. Marked as derived."""
    ok = [r for r in recs if r.ok]
    if not ok:
        return summary
    values = {"ttft": [v for r in ok if (v := rm.ttft_ms(r)) is not None],
              "tpot": [v for r in ok if (v := rm.tpot_ms(r)) is not None],
              "itl": [v for r in ok for v in rm.itl_ms(r)], "e2el": [rm.e2el_ms(r) for r in ok]}
    added = {k: v for name, vals in values.items() if vals for k, v in describe(vals, name).items()
             if k not in summary}
    if not added:
        return summary
    note = "statistics AISBench does not print (std, p95 ...) from its per-request time points"
    return {**summary, **added, "derived": [*summary.get("derived", []), note]}
