"""The truth of a cell from the reference server's send log, and every figure the client published judged
against it: within its tolerance, or marked with a bound that covers its error (docs/metrics.md, "Client
health"). What `calibrate` does for three means, for every figure: the tests and bench/ scripts that
disturb the client (stops, a busy core), the server (several chunks per write, a ramping ITL) or the way
between them (a flushing proxy) read their verdict here.

The truth of a request, from the server's writes (one clock, CLOCK_MONOTONIC, for both processes):
TTFT = its first token write - its start; TPOT = (last token write - first) / (tokens - 1); ITL = the
gaps between its token chunks' writes (chunks written together share their write's time); E2EL = the end
of its answer - its start, the end being what a client reads as one: `[DONE]` written (`done_ns`), else the
body's end (`eof_ns`); the stream tail = the end - the last token write. Its start is the client's
send when the client's sends are given (`starts`: the i-th send goes with the i-th receipt: the server's
intake is part of what a user waits, only the delivery to the client is the client's own), else the
server's receipt. A cell's throughputs divide the tokens (requests) written by the span from the first
start to the last end."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.health import tolerance
from tokenbench.metrics.request import PERCENTILES, percentile
from tokenbench.metrics.summary_groups import FigureMark

MS = 1e6
STATS = ("mean", "median", *(f"p{q}" for q in PERCENTILES))
TruthVerdict = Literal["clean", "clean_wrong", "covered", "uncovered"]


def measured(log: Sequence[dict], n: int, sends: Sequence[int] | None = None) -> list[dict]:
    """The last `n` requests the server received (a cell's measured phase follows its warmup), in the order
    received; with the client's `sends` (n of them), each with its `start_ns`: the i-th send in time order."""
    rows = [dict(r) for r in sorted(log, key=lambda r: r["recv_ns"])[-n:]] if n else []
    starts = sorted(sends) if sends is not None and len(sends) == len(rows) else [r["recv_ns"] for r in rows]
    for r, t in zip(rows, starts, strict=True):
        r["start_ns"] = t
    return rows


def _start(r: dict) -> int:
    return r.get("start_ns", r["recv_ns"])


def _end(r: dict) -> int:
    """When the answer's end went out as a client reads it: its `[DONE]`, else its body's end (a stream), else
    when the handler finished (the body's end follows `[DONE]` a loop turn later: later on a busy server)."""
    return r.get("done_ns") or r.get("eof_ns") or r["end_ns"]


def _ok(log: Iterable[dict]) -> list[dict]:
    return [r for r in log if r.get("outcome") == "ok" and r.get("write_ns")]


def samples(log: Iterable[dict]) -> dict[str, np.ndarray]:
    """Per-request truth (ms) of the ok requests: ttft, tpot (2 tokens or more), e2el, ntpot, tail; itl per gap."""
    ok = _ok(log)
    first = np.array([r["write_ns"][0] - _start(r) for r in ok], np.float64) / MS
    multi = [r for r in ok if r["completion_tokens"] > 1]
    tpot = [(r["write_ns"][-1] - r["write_ns"][0]) / (r["completion_tokens"] - 1) / MS for r in multi]
    e2el = np.array([_end(r) - _start(r) for r in ok], np.float64) / MS
    out = [max(r["completion_tokens"], 1) for r in ok]
    gaps = [np.diff(np.asarray(r["write_ns"], np.int64)) / MS for r in ok]
    return {"ttft": first, "tpot": np.array(tpot, np.float64), "e2el": e2el, "ntpot": e2el / np.array(out),
            "itl": np.concatenate(gaps) if gaps else np.zeros(0),
            "tail": np.array([_end(r) - r["write_ns"][-1] for r in ok], np.float64) / MS}


def _stats(x: np.ndarray, name: str) -> dict[str, float]:
    if not len(x):
        return {}
    s = np.sort(x)
    out = {f"mean_{name}_ms": float(s.mean()), f"median_{name}_ms": percentile(s, 50)}
    return out | {f"p{q}_{name}_ms": percentile(s, q) for q in PERCENTILES}


def figures(log: Sequence[dict]) -> dict[str, float]:
    """Every figure the server's writes give, under the summary's names."""
    per = samples(log)
    out: dict[str, float] = {}
    for name in ("ttft", "tpot", "itl", "e2el", "ntpot"):
        out |= _stats(per[name], name)
    tail = np.sort(per["tail"])
    if len(tail):
        out |= {"mean_stream_tail_ms": float(tail.mean()), "median_stream_tail_ms": percentile(tail, 50),
                "p99_stream_tail_ms": percentile(tail, 99), "max_stream_tail_ms": float(tail[-1])}
    return out | _rates(log)


def _rates(log: Sequence[dict]) -> dict[str, float]:
    ok = _ok(log)
    if not ok:
        return {}
    span = (max(_end(r) for r in log) - min(_start(r) for r in log)) / 1e9
    tokens = sum(r["completion_tokens"] for r in ok)
    prompt = sum(r["prompt_tokens"] for r in ok)
    return {"request_throughput": len(ok) / span, "output_throughput": tokens / span,
            "total_token_throughput": (tokens + prompt) / span}


@dataclass(frozen=True)
class Judged:
    """One published figure against its truth: its error, its tolerance and its mark (None: clean)."""

    key: str
    value: float
    truth: float
    tolerance: float
    mark: FigureMark | None

    @property
    def error(self) -> float:
        return self.value - self.truth

    @property
    def verdict(self) -> TruthVerdict:
        """clean (within its tolerance, unmarked); clean_wrong (unmarked, beyond it); covered (marked, the
        error within the bound plus the tolerance); uncovered (marked, the error beyond that)."""
        off = abs(self.error)
        if self.mark is None:
            return "clean" if off <= self.tolerance else "clean_wrong"
        return "covered" if off <= self.mark.bound + self.tolerance else "uncovered"

    def line(self) -> str:
        mark = f" ~{self.mark.cause} ±{self.mark.bound:.3g}" if self.mark else ""
        return (f"{self.key:28s} {self.value:10.3f} truth {self.truth:10.3f} err {self.error:+9.3f} "
                f"(tol {self.tolerance:.3g}){mark}: {self.verdict}")


def judge(summary: CellSummary, log: Sequence[dict]) -> list[Judged]:
    """Every figure the summary publishes that the send log gives a truth for, judged."""
    truth = figures(log)
    marks = (summary.figures.client_marks if summary.figures else None) or {}
    flat = summary.to_dict()
    out = []
    for key, t in truth.items():
        v = flat.get(key)
        if v is None or not isinstance(v, (int, float)) or math.isnan(float(v)) or math.isnan(t):
            continue
        out.append(Judged(key, float(v), t, tolerance(key, t), marks.get(key)))
    return out


def wrong(judged: Iterable[Judged]) -> list[Judged]:
    """The figures shown as they should not be: clean and wrong, or marked with a bound short of the error."""
    return [j for j in judged if j.verdict in ("clean_wrong", "uncovered")]


def slice_figures(log: Sequence[dict], t0_ns: int, width_s: float, n: int, spans_s: Sequence[float]) -> dict[str, list]:
    """Each timeslice's figures as the server's writes give them (the slices of metrics/timeslices.py: slice
    k covers [t0 + k w, t0 + (k + 1) w); a request's TTFT and TPOT count in the slice it started in,
    its tokens in the slices they were written in): ttft_mean_ms, tpot_mean_ms, output_tps."""
    w = int(width_s * 1e9)
    ok = _ok(log)
    slot = [min(max((_start(r) - t0_ns) // w, 0), n - 1) for r in ok]
    out: dict[str, list] = {"ttft_mean_ms": [], "tpot_mean_ms": [], "output_tps": []}
    for k in range(n):
        mine = [r for r, s in zip(ok, slot, strict=True) if s == k]
        ttft = [(r["write_ns"][0] - _start(r)) / MS for r in mine]
        tpot = [(r["write_ns"][-1] - r["write_ns"][0]) / (r["completion_tokens"] - 1) / MS
                for r in mine if r["completion_tokens"] > 1]
        a, b = t0_ns + k * w, t0_ns + (k + 1) * w
        tokens = sum(c for r in ok for t, c in zip(r["write_ns"], r["tokens"], strict=False) if a <= t < b)
        out["ttft_mean_ms"].append(sum(ttft) / len(ttft) if ttft else None)
        out["tpot_mean_ms"].append(sum(tpot) / len(tpot) if tpot else None)
        out["output_tps"].append(tokens / spans_s[k])
    return out
