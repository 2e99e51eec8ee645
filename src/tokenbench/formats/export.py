"""Stored runs as data: cell / request rows (`tokenbench export`; the run list of `tokenbench runs` is
judge/run_verdict.py's).

Cell rows carry the summary under the same vLLM-style keys `bench` prints and stores; request rows carry
the per-request metrics (TTFT, TPOT, E2EL in ms) next to the raw integer-ns timings.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict

from tokenbench.client.records import RequestRecord
from tokenbench.judge import tune
from tokenbench.judge.fingerprint import Fingerprint
from tokenbench.judge.status import judge
from tokenbench.judge.views import load_run
from tokenbench.metrics import request as rm
from tokenbench.metrics.health import claim_ms
from tokenbench.metrics.server import delivery_flagged, phases_of
from tokenbench.metrics.summary_groups import PHASES
from tokenbench.store.db import Store
from tokenbench.store.records import dumps, to_dict
from tokenbench.store.rows import CellRow

CELL_FIELDS = ("config", "key", "repeat", "input_len", "output_len", "concurrency", "request_rate", "status",
               "verdict", "verdict_mark", "verdict_reason", "message", "kv_demand", "kv_capacity", "over_capacity")
FIRST_SUMMARY = ("num_prompts", "completed", "failed", "duration", "request_throughput", "output_throughput",
                 "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
                 "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_e2el_ms",
                 "median_e2el_ms", "p90_e2el_ms", "p99_e2el_ms")
REQUEST_FIELDS = ("config", "cell", "phase", "index", "input_len", "output_len", "intended_ns", "sent_ns",
                  "end_ns", "status", "ttft_ms", "tpot_ms", "e2el_ms", "stream_tail_ms", "prompt_tokens",
                  "completion_tokens",
                  "cached_tokens", "usage_source", "finish_reason", "error_kind", "error_detail", "length_error")


def _cell_row(c: CellRow) -> dict:
    """A cell as export writes it: its columns, its verdict (judge/status.py), then its summary."""
    state = judge(c.status, c.message, c.summary)
    return {"config": c.config, **c.columns(), "verdict": state.kind, "verdict_mark": state.mark,
            "verdict_reason": state.reason, **c.summary.to_dict()}


def cell_rows(store: Store, run_id: str) -> list[dict]:
    return [_cell_row(c) for c in store.cells(run_id)]


def _request(r: RequestRecord) -> dict:
    """A request as export writes it: the stored record (store/records.to_dict) and its TTFT, TPOT, E2EL
    and stream tail; joined to the server's span, its phases (`phase_<name>_ms`, docs/metrics.md "Where the
    time went") and their uncertainty."""
    return {**to_dict(r), "ttft_ms": rm.ttft_ms(r), "tpot_ms": rm.tpot_ms(r), "e2el_ms": rm.e2el_ms(r),
            "stream_tail_ms": rm.stream_tail_ms(r), **_phases(r)}


def _phases(r: RequestRecord) -> dict:
    p = phases_of(r)
    if p is None:
        return {}
    return {**{f"phase_{name}_ms": None if (v := p.get(name)) is None else v / 1e6 for name in PHASES},
            "phase_error_ms": p.error_ns / 1e6,
            "phase_delivery_flagged": r.ttft_ns is not None and delivery_flagged(p, r.ttft_ns, claim_ms)}


def request_rows(store: Store, run_id: str, phases: tuple[str, ...] = ("measure",)) -> list[dict]:
    """Flat rows for CSV: the chunk lists left out."""
    lists = ("token_offsets_ns", "token_counts")
    return [{"config": c.config, "cell": c.key, **{k: v for k, v in _request(r).items() if k not in lists}}
            for c in store.cells(run_id) for phase in phases for r in store.requests(c.id, phase)]


def to_json(store: Store, run_id: str, requests: bool) -> str:
    run = store.run(run_id)
    shown = ("id", "created_at", "kind", "status", "target", "tool_version", "spec", "command", "environment")
    configs = store.configs(run_id)
    prints = fingerprints(store, run_id)
    doc = {"run": {k: v for k, v in asdict(run).items() if k in shown},
           "configs": [{"name": c.name, "overrides": c.overrides,
                        "profile": c.profile.model_dump(mode="json") if c.profile else {}, "facts": c.facts.to_dict(),
                        "status": c.status, **({"launch": c.launch.model_dump(mode="json")} if c.launch else {}),
                        **({"deaths": [d.model_dump(mode="json") for d in c.deaths]} if c.deaths else {}),
                        **({"fingerprint": prints[c.name]} if c.name in prints else {})}
                       for c in configs],
           "cells": [{**_cell_row(c), **({"requests": [_request(r) for r in store.requests(c.id)]}
                                         if requests else {})} for c in store.cells(run_id)]}
    stored = store.searches(run_id)
    searches = [{"config": x.config, **x.record.model_dump(mode="json")} for x in stored]
    doc.update({"searches": searches} if searches else {})
    tuning = tune.of_run(run.spec or {}, configs, stored)
    doc.update({"tune": tuning.model_dump(mode="json")} if tuning is not None else {})
    return dumps(doc, indent=1, ensure_ascii=False) + "\n"


def fingerprints(store: Store, run_id: str) -> dict[str, dict]:
    """Each server config's fingerprint (judge/fingerprint.py): what `compare` and the gate tell apart."""
    run = load_run(store, run_id, requests=False)
    return {c.name: asdict(Fingerprint.of(run, c)) for c in run.configs}


def _flat(v):
    if isinstance(v, (dict, list)):
        return dumps(v, sort_keys=True, ensure_ascii=False)
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return ""
    return "" if v is None else v


def _csv(rows: list[dict], first: tuple[str, ...]) -> str:
    keys = list(first) + sorted({k for r in rows for k in r} - set(first))
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
