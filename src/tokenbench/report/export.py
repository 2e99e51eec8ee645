"""Stored runs as data: the run list (`tokenbench runs`) and cell / request rows (`tokenbench export`).

Cell rows carry the summary under the same vLLM-style keys `bench` prints and stores; request rows carry
the per-request metrics (TTFT, TPOT, E2EL in ms) next to the raw integer-ns timings.
"""

from __future__ import annotations

import csv
import io
import json
import math

from tokenbench.metrics import request as rm
from tokenbench.report.status import judge
from tokenbench.store.db import Store
from tokenbench.store.records import json_safe, to_dict

CELL_FIELDS = ("config", "key", "repeat", "input_len", "output_len", "concurrency", "request_rate", "status",
               "verdict", "verdict_mark", "verdict_reason", "message", "kv_demand", "kv_capacity", "over_capacity")
FIRST_SUMMARY = ("num_prompts", "completed", "failed", "duration", "request_throughput", "output_throughput",
                 "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
                 "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_e2el_ms",
                 "median_e2el_ms", "p90_e2el_ms", "p99_e2el_ms")
REQUEST_FIELDS = ("config", "cell", "phase", "index", "input_len", "output_len", "intended_ns", "sent_ns",
                  "end_ns", "status", "ttft_ms", "tpot_ms", "e2el_ms", "prompt_tokens", "completion_tokens",
                  "cached_tokens", "usage_source", "finish_reason", "error_kind", "error_detail", "length_error")


def planned(run: dict, configs: int) -> int | None:
    """Cells the run meant to measure, when its spec says: `planned_cells`, or the product of its axes."""
    spec = run.get("spec") or {}
    if isinstance(spec.get("planned_cells"), int):
        return spec["planned_cells"]
    if isinstance(spec.get("import"), dict):
        return spec["import"].get("cells")
    if isinstance(spec.get("cells"), list):
        return len(spec["cells"]) * max(configs, 1)
    return None


def run_rows(store: Store) -> list[dict]:
    out = []
    for r in store.runs():
        total = planned(r, len(store.configs(r["id"])))
        out.append({"id": r["id"], "date": r["created_at"], "kind": r["kind"], "target": r["target"],
                    "cells_done": r["cells_done"], "cells_total": total, "status": r["status"],
                    "message": r.get("message") or ""})
    return out


def cell_rows(store: Store, run_id: str) -> list[dict]:
    rows = []
    for c in store.cells(run_id):
        row = {"config": c["config_name"], **{k: c.get(k) for k in CELL_FIELDS[1:]}}
        row["over_capacity"] = bool(c["over_capacity"])
        state = judge(c["status"], c.get("message") or "", c.get("summary") or {})
        row.update(verdict=state.kind, verdict_mark=state.mark, verdict_reason=state.reason)
        rows.append({**row, **(c.get("summary") or {}), "_cell_id": c["id"]})
    return rows


def request_rows(store: Store, run_id: str, phases: tuple[str, ...] = ("measure",)) -> list[dict]:
    out = []
    for c in store.cells(run_id):
        for phase in phases:
            for r in store.requests(c["id"], phase):
                d = to_dict(r)
                d.pop("token_offsets_ns")
                d.pop("token_counts")
                out.append({"config": c["config_name"], "cell": c["key"], **d, "ttft_ms": rm.ttft_ms(r),
                            "tpot_ms": rm.tpot_ms(r), "e2el_ms": rm.e2el_ms(r)})
    return out


def to_json(store: Store, run_id: str, requests: bool) -> str:
    run = store.run(run_id)
    cells = cell_rows(store, run_id)
    doc = {"run": {k: run[k] for k in ("id", "created_at", "kind", "status", "target", "tool_version", "spec",
                                       "command", "environment")},
           "configs": [{k: c[k] for k in ("name", "overrides", "profile", "facts", "status")}
                       for c in store.configs(run_id)],
           "cells": []}
    for row in cells:
        cell_id = row.pop("_cell_id")
        if requests:
            row["requests"] = [{**to_dict(r), "ttft_ms": rm.ttft_ms(r), "tpot_ms": rm.tpot_ms(r),
                                "e2el_ms": rm.e2el_ms(r)} for r in store.requests(cell_id)]
        doc["cells"].append(row)
    return json.dumps(json_safe(doc), indent=1, ensure_ascii=False) + "\n"


def _flat(v):
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, ensure_ascii=False)
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return ""
    return "" if v is None else v


def _csv(rows: list[dict], first: tuple[str, ...]) -> str:
    keys = list(first) + sorted({k for r in rows for k in r} - set(first) - {"_cell_id"})
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _flat(r.get(k)) for k in keys})
    return buf.getvalue()


def to_csv(store: Store, run_id: str, requests: bool) -> str:
    store.run(run_id)            # a clear error for an unknown run
    if requests:
        return _csv(request_rows(store, run_id), REQUEST_FIELDS)
    return _csv(cell_rows(store, run_id), CELL_FIELDS + FIRST_SUMMARY)
