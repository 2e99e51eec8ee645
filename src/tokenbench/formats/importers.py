"""Results of other tools as runs of kind "import": reportable, comparable and checked like our own.

Formats (details and the CSV columns in docs/reports.md):
  vllm    the JSON file `vllm bench serve --save-result` writes (one cell per file)
  sglang  the JSONL file `python -m sglang.bench_serving --output-file` appends to (one cell per line)
  csv     published figures, one row per cell (columns in CSV_COLUMNS)
  aisbench  AISBench perf outputs: the performances/<model>/ folder or its CSV/JSON/details file
            (formats/aisbench.py)
  tokenbench  files tokenbench wrote: its --output JSON, a recovery file, `export` JSON or CSV (formats/own.py)

The format is told from the file's content (`detect`), or given.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenbench.client.records import RequestRecord
from tokenbench.errors import UsageError
from tokenbench.formats import aisbench, own
from tokenbench.formats.parsed import Parsed
from tokenbench.inputs import check_readable
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.spec.bench import Load, Workload
from tokenbench.spec.keys import cell_key as own_cell_key
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow

FORMATS = ("vllm", "sglang", "csv", "aisbench", "tokenbench")
KNOWN = ("a result of vllm bench serve (JSON), SGLang bench_serving (JSONL) or AISBench, a CSV of published "
         "figures, or a file tokenbench wrote (its --output JSON, a recovery file, export JSON or CSV)")
METRIC_RE = re.compile(r"^(mean|median|std|min|max|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")
VLLM_SCALARS = ("duration", "completed", "failed", "num_prompts", "total_input_tokens", "total_output_tokens",
                "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
                "max_output_tokens_per_s", "max_concurrent_requests")
SGLANG_RENAME = {"mean_e2e_latency_ms": "mean_e2el_ms", "median_e2e_latency_ms": "median_e2el_ms",
                 "std_e2e_latency_ms": "std_e2el_ms", "p90_e2e_latency_ms": "p90_e2el_ms",
                 "p95_e2e_latency_ms": "p95_e2el_ms", "p99_e2e_latency_ms": "p99_e2el_ms",
                 "concurrency": "achieved_concurrency", "total_throughput": "total_token_throughput"}
SGLANG_SCALARS = ("duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput",
                  "input_throughput", "output_throughput", "total_token_throughput", "achieved_concurrency")
ENGINE_OF_BACKEND = {"vllm": "vllm", "vllm-chat": "vllm", "sglang": "sglang", "sglang-native": "sglang",
                     "sglang-oai": "sglang", "sglang-oai-chat": "sglang", "lmdeploy": "lmdeploy", "tgi": "tgi"}

# CSV of published figures: one row per cell. Required columns first.
CSV_REQUIRED = ("engine", "model", "input_len", "output_len")
CSV_FACTS = ("config", "engine", "engine_version", "model", "hardware", "devices", "params_b", "bytes_per_param",
             "kv_capacity_tokens", "temperature", "ignore_eos", "prefix_cache")
CSV_CELL = ("input_len", "output_len", "concurrency", "request_rate", "max_concurrency", "num_prompts", "completed",
            "failed",
            "duration", "request_throughput", "output_throughput", "total_token_throughput", "over_capacity",
            "source", "notes")
CSV_COLUMNS = tuple(dict.fromkeys(CSV_REQUIRED + CSV_FACTS + CSV_CELL))


@dataclass(kw_only=True)
class ImportOptions:
    """Facts the file does not carry (flags of `tokenbench import`); they override the file's."""

    engine: str | None = None
    engine_version: str | None = None
    model: str | None = None
    hardware: str | None = None
    devices: int | None = None
    params_b: float | None = None
    bytes_per_param: float | None = None
    config: str | None = None

    def facts(self) -> dict:
        keys = ("engine", "model", "hardware", "devices", "params_b", "bytes_per_param")
        out = {k: getattr(self, k) for k in keys if getattr(self, k) is not None}
        if self.engine_version:
            out["version"] = self.engine_version
        return out


def detect(path: Path) -> str:
    """The format of a file (or an AISBench folder) from its content."""
    return "aisbench" if aisbench.is_aisbench(path) else sniff(path, _read(path))[0]


def sniff(path: Path, text: str) -> tuple[str, Any]:
    """The format of a file's text, and its JSON document when the whole file is one. A CSV with a column
    of published figures is one (its header is checked when it is read, naming what is wrong)."""
    doc = _whole_json(text)
    if doc is not None:
        return _json_format(path, doc), doc
    first = next((line for line in text.splitlines() if line.strip()), "")
    line = _whole_json(first)
    if isinstance(line, dict) and "output_throughput" in line:
        return "sglang", None
    header = [c.strip() for c in next(csv.reader([first]), [])]
    if own.csv_kind(header):
        return "tokenbench", None
    if any(c in CSV_COLUMNS or METRIC_RE.match(c) for c in header):
        return "csv", None
    raise _unknown(path)


def _json_format(path: Path, doc: Any) -> str:
    if own.json_kind(doc):
        return "tokenbench"
    if isinstance(doc, dict) and ("mean_e2e_latency_ms" in doc or "dataset_name" in doc):
        return "sglang"
    if isinstance(doc, dict) and "request_throughput" in doc:
        return "vllm"
    raise _unknown(path)


def _whole_json(text: str) -> Any:
    if not text.lstrip().startswith("{"):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _unknown(path: Path) -> UsageError:
    return UsageError(f"cannot tell the format of {path} from its content: it is not {KNOWN}",
                      f"pass --format {', '.join(FORMATS[:-1])} or {FORMATS[-1]} if it is one of them, "
                      "or import a file of one of these")


def _num(v) -> float | None:
    if v is None or isinstance(v, bool) or v == "" or v == "inf":
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) or math.isinf(x) else x


def cell_key(il: int, ol: int, load: Load) -> str:
    """An imported cell keyed exactly as tokenbench keys its own (spec/keys.py)."""
    return own_cell_key(Workload.model_construct(input_len=il, output_len=ol), load)   # other tools' values as given


def plain_load(conc: int | None, rate: float | None, cap: int | None = None) -> Load:
    """A concurrency, or a rate (Poisson) with an optional in-flight cap, as the file gave it (not validated)."""
    if conc is not None:
        return Load.model_construct(concurrency=conc)
    return Load.model_construct(request_rate=rate, max_concurrency=cap)


def _load_keys(load: Load) -> dict:
    """The summary's keys of the load (metrics/tally.py writes the same for a measured cell)."""
    if load.concurrency is not None:
        return {"concurrency": load.concurrency, "request_rate": None}
    shape = {"burstiness": load.burstiness} if load.burstiness != 1.0 else {}
    return {"concurrency": None, "request_rate": load.request_rate, "max_concurrency": load.max_concurrency,
            "arrival": load.arrival, **shape}


def _cell(lengths: tuple[int, int], load: Load, summary: dict, kv: int | None = None,
          over: bool | None = None) -> CellRow:
    """An imported cell: its figures as the other tool gave them, under tokenbench's (vLLM's) names, and
    its load as the tool ran it (a rate keeps its --max-concurrency cap: never a closed loop)."""
    il, ol = lengths
    cap = load.in_flight_cap
    demand = cap * (il + ol) if cap else None
    if over is None:
        over = bool(kv and demand and demand > kv)
    typed = CellSummary.from_dict({**summary, "input_len": il, "output_len": ol, **_load_keys(load)})
    return CellRow(key=cell_key(il, ol, load), input_len=il, output_len=ol,
                   status="ok" if typed.completed != 0 else "failed", summary=typed, concurrency=load.concurrency,
                   request_rate=load.request_rate, kv_demand=demand, kv_capacity=kv, over_capacity=over)


def _lengths(doc: dict, asked_in: int | None = None, asked_out: int | None = None) -> tuple[int, int]:
    done = doc.get("completed") or 0
    il = asked_in or (round(doc["total_input_tokens"] / done) if done and doc.get("total_input_tokens") else None)
    ol = asked_out or (round(doc["total_output_tokens"] / done) if done and doc.get("total_output_tokens") else None)
    if not il or not ol:
        raise UsageError("cannot tell the input/output length of the imported result (no completed requests)",
                         "import a result with completed requests")
    return il, ol


def _count(v) -> int | None:
    x = _num(v)
    return int(x) if x else None


def _arrival(burstiness) -> dict:
    """vLLM's --burstiness as tokenbench's arrival: 1 (or not told) Poisson, inf constant gaps of 1 / rate
    (vLLM's meaning of an infinite burstiness), else gamma gaps of that shape."""
    b = _num(burstiness)
    if b is None and str(burstiness).lower() in ("inf", "infinity"):
        return {"arrival": "constant"}
    if isinstance(burstiness, float) and math.isinf(burstiness):
        return {"arrival": "constant"}
    return {"arrival": "poisson", "burstiness": b or 1.0}


def _load(doc: dict) -> Load:
    """How the tool sent, from `request_rate`, `max_concurrency` and `burstiness` (vLLM's keys; SGLang
    writes the first two, and "trace" for a replay). A finite rate stays a rate, capped by
    max_concurrency when given; an infinite rate sends every request at once, as many as the cap lets in
    flight: a closed loop of that width (of every request without a cap)."""
    rate, cap = doc.get("request_rate"), _count(doc.get("max_concurrency"))
    if rate == "trace":
        return Load.model_construct(arrival="trace", max_concurrency=cap)
    if _num(rate) is None:
        return Load.model_construct(concurrency=cap or _count(doc.get("num_prompts") or doc.get("completed")))
    return Load.model_construct(request_rate=_num(rate), max_concurrency=cap, **_arrival(doc.get("burstiness")))


# vLLM bench serve ---------------------------------------------------------------------------------
def _vllm_records(doc: dict) -> list[RequestRecord]:
    starts, lat, ttfts = doc.get("start_times"), doc.get("latencies"), doc.get("ttfts")
    if not (starts and lat and ttfts) or not len(starts) == len(lat) == len(ttfts):
        return []
    itls, ins, outs = doc.get("itls") or [[]] * len(lat), doc.get("input_lens") or [], doc.get("output_lens") or []
    errors, texts = doc.get("errors") or [""] * len(lat), doc.get("generated_texts") or [""] * len(lat)
    t0, out = min(starts), []
    for i, (s, e2e, ttft) in enumerate(zip(starts, lat, ttfts, strict=False)):
        sent = int((s - t0) * 1e9)
        times = [sent + int(ttft * 1e9)] if ttft else []
        for gap in itls[i] if i < len(itls) else []:
            times.append(times[-1] + int(gap * 1e9))
        failed = bool(errors[i]) if i < len(errors) else False
        out.append(RequestRecord(
            index=i, phase="measure", input_len=ins[i] if i < len(ins) else 0,
            output_len=outs[i] if i < len(outs) else 0, intended_ns=sent, sent_ns=sent,
            end_ns=sent + int(e2e * 1e9), token_times_ns=times if not failed else [],
            token_counts=[1] * len(times) if not failed else [], prompt_tokens=ins[i] if i < len(ins) else None,
            completion_tokens=outs[i] if i < len(outs) and not failed else None, usage_source="none",
            error_kind="server_error" if failed else None, error_detail=str(errors[i])[:500] if failed else "",
            text=texts[i] if i < len(texts) and texts[i] else ""))
    return out


def parse_vllm(doc: dict, opts: ImportOptions) -> Parsed:
    if isinstance(doc, dict) and ("mean_e2e_latency_ms" in doc or "dataset_name" in doc):
        raise UsageError("this JSON is not a `vllm bench serve` result: it has SGLang bench_serving keys",
                         "pass --format sglang")
    if not isinstance(doc, dict) or "request_throughput" not in doc:
        raise UsageError("this JSON is not a `vllm bench serve` result (no request_throughput key)",
                         "pass --format sglang or csv, or save the result with `vllm bench serve --save-result`")
    summary = {k: doc[k] for k in VLLM_SCALARS if _num(doc.get(k)) is not None}
    summary.update({k: v for k, v in doc.items() if METRIC_RE.match(k) and _num(v) is not None})
    if doc.get("failed"):
        summary["failed_by_kind"] = {"imported_error": doc["failed"]}
    ins, outs = doc.get("input_lens"), doc.get("output_lens")
    il, ol = _lengths(doc, round(sum(ins) / len(ins)) if ins else None,
                      round(sum(outs) / len(outs)) if outs and any(outs) else None)
    load = _load(doc)
    engine = opts.engine or ENGINE_OF_BACKEND.get(str(doc.get("backend")), "unknown")
    name = opts.config or engine
    facts = {"engine": engine, "model": doc.get("model_id"), "tokenizer": doc.get("tokenizer_id"),
             "workload": {"temperature": _num(doc.get("temperature")), "ignore_eos": _bool(doc.get("ignore_eos"))},
             **opts.facts()}
    return Parsed({name: facts}, [(name, _cell((il, ol), load, summary), _vllm_records(doc))])


# SGLang bench_serving ------------------------------------------------------------------------------
def parse_sglang_line(doc: dict) -> tuple[dict, int, int, Load]:
    if not isinstance(doc, dict) or "output_throughput" not in doc:
        raise UsageError("this line is not an SGLang bench_serving result (no output_throughput key)",
                         "pass --format vllm or csv")
    renamed = {SGLANG_RENAME.get(k, k): v for k, v in doc.items()}
    summary = {k: renamed[k] for k in SGLANG_SCALARS if _num(renamed.get(k)) is not None}
    summary.update({k: v for k, v in renamed.items() if METRIC_RE.match(k) and _num(v) is not None})
    if "total_token_throughput" not in summary and _num(doc.get("input_throughput")) is not None:
        summary["total_token_throughput"] = doc["input_throughput"] + doc["output_throughput"]
    exact = str(doc.get("dataset_name", "")).startswith("random") and _num(doc.get("random_range_ratio")) == 1.0
    il, ol = _lengths(doc, doc.get("random_input_len") if exact else None,
                      doc.get("random_output_len") if exact else None)
    return summary, il, ol, _load(doc)


def parse_sglang(lines: list[tuple[int, dict]], opts: ImportOptions, path: Path) -> Parsed:
    parsed = Parsed()
    for lineno, doc in lines:
        try:
            summary, il, ol, load = parse_sglang_line(doc)
        except UsageError as exc:
            raise UsageError(f"{path}:{lineno}: {exc.message}", exc.hint) from None
        engine = opts.engine or ENGINE_OF_BACKEND.get(str(doc.get("backend")), "unknown")
        name = opts.config or engine
        parsed.configs.setdefault(name, {"engine": engine, "workload": {"temperature": None, "ignore_eos": None},
                                         **opts.facts()})
        parsed.cells.append((name, _cell((il, ol), load, summary), []))
    return parsed


# CSV of published figures --------------------------------------------------------------------------
def _bool(v) -> bool | None:
    if v is None or v == "":
        return None
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "y", "*"):
        return True
    if s in ("0", "false", "no", "n"):
        return False
    return None


def _csv_value(col: str, raw: str, where: str):
    raw = raw.strip()
    if raw == "":
        return None
    if col in ("engine", "engine_version", "model", "hardware", "config", "source", "notes", "prefix_cache"):
        return raw
    if col in ("ignore_eos", "over_capacity"):
        flag = _bool(raw)
        if flag is None:
            raise UsageError(f"{where}: column {col} is '{raw}', not a yes/no value", "write 1/0, true/false or *")
        return flag
    try:
        v = float(raw.replace(",", "").replace("_", ""))
    except ValueError:
        raise UsageError(f"{where}: column {col} is '{raw}', not a number",
                         "write plain numbers, e.g. 6452.2") from None
    ints = ("input_len", "output_len", "concurrency", "max_concurrency", "num_prompts", "completed", "failed",
            "devices", "kv_capacity_tokens")
    return int(v) if col in ints else v


def _check_header(cols: list[str], path: Path) -> None:
    unknown = [c for c in cols if c not in CSV_COLUMNS and not METRIC_RE.match(c)]
    if unknown:
        raise UsageError(f"{path}:1: unknown column(s) {', '.join(unknown)}",
                         f"known columns: {', '.join(CSV_COLUMNS)}, and <stat>_<ttft|tpot|itl|e2el>_ms")
    missing = [c for c in CSV_REQUIRED if c not in cols]
    if missing:
        raise UsageError(f"{path}:1: missing column(s) {', '.join(missing)}", "see docs/reports.md, 'CSV columns'")


def _csv_row(row: dict, where: str, opts: ImportOptions) -> tuple[str, dict, dict]:
    v = {k: _csv_value(k, raw or "", where) for k, raw in row.items() if k is not None}
    for col in CSV_REQUIRED:
        if v.get(col) is None:
            raise UsageError(f"{where}: column {col} is empty", "every row needs engine, model, input_len, output_len")
    if (v.get("concurrency") is None) == (v.get("request_rate") is None):
        raise UsageError(f"{where}: give exactly one of concurrency or request_rate", "one row per cell")
    figures = ("request_throughput", "output_throughput", "total_token_throughput")
    if all(v.get(k) is None for k in figures) and not any(METRIC_RE.match(k) and x is not None for k, x in v.items()):
        raise UsageError(f"{where}: no figure in this row", "give a throughput or a latency column")
    facts = {"engine": v["engine"], "version": v.get("engine_version"), "model": v["model"],
             "hardware": v.get("hardware"), "devices": v.get("devices"), "params_b": v.get("params_b"),
             "bytes_per_param": v.get("bytes_per_param"), "kv_capacity_tokens": v.get("kv_capacity_tokens"),
             "workload": {"temperature": v.get("temperature"), "ignore_eos": v.get("ignore_eos"),
                          "prefix_cache": v.get("prefix_cache")}}
    facts = {**{k: x for k, x in facts.items() if x is not None}, **opts.facts()}
    return opts.config or v.get("config") or v["engine"], facts, v


def _csv_summary(v: dict) -> dict:
    keys = ("num_prompts", "completed", "failed", "duration", "request_throughput", "output_throughput",
            "total_token_throughput", "source", "notes")
    summary = {k: v[k] for k in keys if v.get(k) is not None}
    summary.update({k: x for k, x in v.items() if METRIC_RE.match(k) and x is not None})
    if "output_throughput" not in summary and "request_throughput" in summary:
        summary["output_throughput"] = v["request_throughput"] * v["output_len"]
        summary["derived"] = ["output_throughput = request_throughput × output_len"]
    return summary


def parse_csv(path: Path, text: str, opts: ImportOptions) -> Parsed:
    reader = csv.DictReader(text.splitlines())
    _check_header(list(reader.fieldnames or []), path)
    parsed = Parsed()
    for lineno, row in enumerate(reader, start=2):
        where = f"{path}:{lineno}"
        name, facts, v = _csv_row(row, where, opts)
        known = parsed.configs.setdefault(name, facts)
        if known != facts:
            diff = sorted(k for k in set(known) | set(facts) if known.get(k) != facts.get(k))
            raise UsageError(f"{where}: config '{name}' has different {', '.join(diff)} than its earlier rows",
                             "give each server setup its own 'config' value")
        conc = v.get("concurrency")
        cell = _cell((v["input_len"], v["output_len"]), plain_load(conc, v.get("request_rate"), v.get("max_concurrency")),
                     _csv_summary(v),
                     facts.get("kv_capacity_tokens"), v.get("over_capacity"))
        parsed.cells.append((name, cell, []))
    if not parsed.cells:
        raise UsageError(f"{path} has a header but no rows", "one row per cell")
    return parsed


# entry point ------------------------------------------------------------------------------------
def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}", "check the path") from None


def _json_lines(path: Path, text: str) -> list[tuple[int, dict]]:
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                out.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}:{n}: not JSON ({exc.msg})", "one JSON object per line") from None
    if not out:
        raise UsageError(f"{path} is empty", "import a file with results")
    return out


# AISBench ------------------------------------------------------------------------------------------
def parse_aisbench(path: Path, opts: ImportOptions) -> Parsed:
    res = aisbench.read(path)
    summary = {k: v for k, v in res.summary.items() if k != "max_concurrency"}
    if res.details and "completed" not in summary:
        summary["completed"] = sum(1 for d in res.details if d.get("success"))
        summary["failed"] = len(res.details) - summary["completed"]
    il, ol = _lengths(summary)
    conc = res.summary.get("max_concurrency")
    name = opts.config or res.model
    parsed = Parsed()
    parsed.configs[name] = {"engine": opts.engine or "unknown", "model": res.model,
                            "workload": {"temperature": None, "ignore_eos": None},
                            "client": {"tool": "aisbench", "dataset": res.dataset}, **opts.facts()}
    summary["source"] = f"AISBench {res.model}/{res.dataset}"
    recs = aisbench.records(res, il, ol)
    summary = aisbench.filled(summary, recs)
    rate = None if conc else _num(summary.get("request_throughput"))
    parsed.cells.append((name, _cell((il, ol), plain_load(conc, rate), summary), recs))
    return parsed


def _digest(path: Path) -> str:
    if not path.is_dir() and not aisbench.is_aisbench(path):
        return hashlib.sha256(path.read_bytes()).hexdigest()
    h = hashlib.sha256()
    for f in aisbench.read(path).files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def parse(path: Path, fmt: str | None, opts: ImportOptions) -> tuple[str, Parsed]:
    """The file's format (given, or told from its content) and what it holds."""
    if fmt == "aisbench" or (fmt is None and aisbench.is_aisbench(path)):
        return "aisbench", parse_aisbench(path, opts)
    text = _read(path)
    fmt, doc = (fmt, None) if fmt else sniff(path, text)
    if fmt == "csv":
        return fmt, parse_csv(path, text, opts)
    if fmt == "sglang":
        return fmt, parse_sglang(_json_lines(path, text), opts, path)
    if fmt == "tokenbench":
        return fmt, _own(own.read(str(path), text, doc), opts)
    if doc is None:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{exc.lineno}: not JSON ({exc.msg})",
                             "pass the file vllm bench serve wrote") from None
    return fmt, parse_vllm(doc, opts)


def _own(parsed: Parsed, opts: ImportOptions) -> Parsed:
    """A file of tokenbench's own keeps its config names (`--config` names its only one) and takes the
    facts given by flags over its own."""
    if opts.config and len(parsed.configs) > 1:
        raise UsageError(f"--config names one config; this file has {len(parsed.configs)} "
                         f"({', '.join(parsed.configs)})", "leave --config out: the file names its configs")
    rename = (lambda name: opts.config) if opts.config else (lambda name: name)
    configs = {rename(name): {**facts, **opts.facts()} for name, facts in parsed.configs.items()}
    return replace(parsed, configs=configs, cells=[(rename(n), c, r) for n, c, r in parsed.cells])


def import_file(store: Store, path: str | Path, fmt: str | None = None, opts: ImportOptions | None = None,
                argv: list[str] | None = None) -> str:
    path = Path(path)
    check_readable(path, "import file", dir_ok=True)
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown import format '{fmt}'", f"use one of: {', '.join(FORMATS)}")
    fmt, parsed = parse(path, fmt, opts or ImportOptions())
    spec, environment = _provenance(path, fmt, parsed)
    run_id = store.create_run("import", f"{fmt}:{path.name}", spec, argv or ["tokenbench", "import", str(path)],
                              environment)
    ids = {name: store.upsert_config(run_id, name, facts=ServerFacts.from_dict(facts), status="done")
           for name, facts in parsed.configs.items()}
    cells = parsed.cells if parsed.source else _repeats(parsed.cells)
    for name, cell, recs in cells:
        store.save_cell(run_id, ids[name], cell, recs)
    store.set_run_status(run_id, "done")
    return run_id


def _provenance(path: Path, fmt: str, parsed: Parsed) -> tuple[dict, dict]:
    """The imported run's spec (what was imported, from where; a tokenbench run's own spec beside it, so its
    SLOs, sampling and name are judged as they were) and its environment (a tokenbench run's own)."""
    sources = sorted({s for _, cell, _ in parsed.cells if (s := cell.summary.source)})
    about = {"format": fmt, "file": path.name, "sha256": _digest(path), "cells": len(parsed.cells),
             "source": "; ".join(sources) or path.name}
    src = parsed.source
    if src is None:
        return {"import": about}, {}
    spec = {k: v for k, v in src.spec.items() if k not in ("planned_cells", "import")}
    return {**spec, "import": {**about, "run": src.id, "kind": src.kind}}, src.environment


def _repeats(cells: Iterable[tuple[str, CellRow, list]]) -> Iterator[tuple[str, CellRow, list]]:
    """The same cell twice in a file (e.g. a JSONL appended to by two runs) becomes repeat 0, 1, ..."""
    seen: dict[tuple[str, str], int] = {}
    for name, cell, recs in cells:
        k = (name, cell.key)
        seen[k] = seen.get(k, -1) + 1
        yield name, replace(cell, repeat=seen[k]), recs
