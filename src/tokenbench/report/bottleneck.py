"""Why is a cell slow? One label per cell with the evidence that gave it (docs/metrics.md, "Bottleneck").

Checked in order, the first that holds wins: client-bound (the client's own health), KV-bound (`*`, KV
usage near 100 %, preemptions), queueing (requests waiting at the server, or TTFT growing with load),
compute- or bandwidth-bound (output tok/s near the decode roofline), else unknown, saying what was
missing. Pure: reads the cell's summary, the monitor samples and the roofline, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.report.model import CellInfo, RunData
from tokenbench.report.plausibility import ConfigCheck, Roofline

KV_FULL = 0.95              # KV usage peak at or above this share is "full"
TTFT_GROWTH = 2.0           # mean TTFT this many times the lowest load's is queueing
ROOF_NEAR = 0.5             # output tok/s at or above this share of the roofline is bound by it
CLIENT_CPU_NEAR = 80.0      # % of a core per client process


@dataclass(frozen=True)
class Label:
    kind: str               # client | kv | queueing | compute | bandwidth | unknown
    evidence: str           # plain, language-neutral figures ("waiting peak 12 (server /metrics)")


def _peak(run: RunData, c: CellInfo, name: str) -> float | None:
    vals = [s["value"] for r in (c.repeats or (c,)) for s in run.samples.get(r.id, []) if s["name"] == name]
    stored = c.get({"waiting": "monitor_server_waiting_max", "kv_usage": "monitor_server_kv_usage_peak"}[name])
    both = vals + ([stored] if stored is not None else [])
    return max(both) if both else None


def _client(c: CellInfo) -> str | None:
    if c.state.kind == "invalid":
        return c.state.reason or "client health check failed"
    cpu, workers = c.get("client_cpu_percent"), c.get("client_workers") or 1
    if cpu is not None and cpu / workers >= CLIENT_CPU_NEAR:
        return f"client CPU {cpu / workers:.0f}% of a core per process"
    return None


def _kv(run: RunData, c: CellInfo) -> str | None:
    if c.over_capacity:
        return f"* KV demand {c.kv_demand:,} > capacity {c.kv_capacity:,}" if c.kv_demand and c.kv_capacity \
            else "* KV demand > capacity"
    kv = _peak(run, c, "kv_usage")
    if kv is not None and kv >= KV_FULL:
        return f"KV usage peak {100 * kv:.0f}% (server /metrics)"
    pre = c.get("monitor_server_preemptions")
    return f"{pre:g} preemptions (server /metrics)" if pre else None


def _lowest(run: RunData, c: CellInfo) -> CellInfo | None:
    same = [o for o in run.cells_of(c.config) if o.pair == c.pair and (o.concurrency is None) == (c.concurrency is None)
            and o.state.ok]
    low = min(same, key=lambda o: o.x, default=None)
    return low if low is not None and low.x < c.x else None


def _queueing(run: RunData, c: CellInfo) -> str | None:
    waiting = _peak(run, c, "waiting")
    if waiting:
        return f"waiting peak {waiting:g} (server /metrics)"
    low = _lowest(run, c)
    a, b = (low.get("mean_ttft_ms") if low else None), c.get("mean_ttft_ms")
    if a and b and b >= TTFT_GROWTH * a:
        return f"mean TTFT x{b / a:.1f} vs {low.load_label}"
    return None


def _roof(c: CellInfo, roof: Roofline | None) -> Label | None:
    out = c.get("output_throughput")
    if roof is None or not out:
        return None
    bound = roof.aggregate(c.concurrency)
    share = out / bound if bound else 0.0
    kind = "compute" if c.concurrency and c.concurrency * roof.per_stream > roof.compute else "bandwidth"
    if share >= ROOF_NEAR:
        return Label(kind, f"{100 * share:.0f}% of the {kind} roofline ({out:,.0f} of {bound:,.0f} tok/s)")
    return Label("unknown", f"{100 * share:.0f}% of the roofline; no queueing or KV evidence")


def label(run: RunData, c: CellInfo, roof: Roofline | None) -> Label:
    if not c.state.ok and c.state.kind != "invalid":
        return Label("unknown", f"cell not ok ({c.state.mark})")
    for kind, found in (("client", _client(c)), ("kv", _kv(run, c)), ("queueing", _queueing(run, c))):
        if found:
            return Label(kind, found)
    near = _roof(c, roof)
    if near is not None:
        return near
    missing = [what for what, have in (("monitor samples", bool(run.samples)), ("roofline", roof is not None))
               if not have]
    return Label("unknown", "no evidence: " + (", ".join(missing) if missing else "no bound reached"))


def rooflines(checks: list[ConfigCheck]) -> dict[str, Roofline | None]:
    return {chk.config.name: chk.roofline for chk in checks}
