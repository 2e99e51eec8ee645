"""Why is a cell slow? One label per cell with the evidence that gave it (docs/metrics.md, "Bottleneck").

Checked in order, the first that holds wins: client-bound (the client's own health), KV-bound (`*`, KV
usage near 100 %, preemptions), queueing (requests waiting at the server, or TTFT growing with load),
compute- or bandwidth-bound (output tok/s near the decode roofline), else unknown, saying what was
missing. Pure: reads the cell's summary, the monitor samples and the roofline, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.metrics.cell_summary import known
from tokenbench.metrics.summary_groups import ClientHealth, MonitorFigures
from tokenbench.report.i18n import t
from tokenbench.report.model import CellInfo, RunData
from tokenbench.report.plausibility import ConfigCheck, Roofline

KV_FULL = 0.95              # KV usage peak at or above this share is "full"
TTFT_GROWTH = 2.0           # mean TTFT this many times the lowest load's is queueing
ROOF_NEAR = 0.5             # output tok/s at or above this share of the roofline is bound by it
CLIENT_CPU_NEAR = 80.0      # % of a core per client process


@dataclass(frozen=True)
class Label:
    kind: str               # client | kv | queueing | compute | bandwidth | unknown
    key: str                # i18n key of the evidence (ev.*), formatted with `fields`
    fields: dict

    @property
    def evidence(self) -> str:
        """The evidence in English (reports use `text` in their own language)."""
        return self.text("en")

    def text(self, lang: str) -> str:
        return t(lang, self.key, **self.fields)


Found = tuple[str, dict] | None


def _monitor(c: CellInfo) -> MonitorFigures:
    return c.summary.monitor or MonitorFigures()


def _peak(run: RunData, c: CellInfo, name: str) -> float | None:
    vals = [s.value for r in (c.repeats or (c,)) for s in run.samples.get(r.id, []) if s.name == name]
    m = _monitor(c)
    stored = known(m.server_waiting_max if name == "waiting" else m.server_kv_usage_peak)
    both = vals + ([stored] if stored is not None else [])
    return max(both) if both else None


def _client(c: CellInfo) -> Found:
    if c.state.kind == "invalid":
        return "ev.client", {"reason": c.state.reason or "-"}
    health = c.summary.health or ClientHealth()
    cpu, workers = known(health.client_cpu_percent), health.client_workers or 1
    if cpu is not None and cpu / workers >= CLIENT_CPU_NEAR:
        return "ev.client_cpu", {"cpu": f"{cpu / workers:.0f}"}
    return None


def _kv(run: RunData, c: CellInfo) -> Found:
    if c.over_capacity:
        return "ev.kv_demand", {"demand": f"{c.kv_demand or 0:,}", "capacity": f"{c.kv_capacity or 0:,}"}
    kv = _peak(run, c, "kv_usage")
    if kv is not None and kv >= KV_FULL:
        return "ev.kv_usage", {"pct": f"{100 * kv:.0f}"}
    pre = known(_monitor(c).server_preemptions)
    return ("ev.preempt", {"n": f"{pre:g}"}) if pre else None


def _lowest(run: RunData, c: CellInfo) -> CellInfo | None:
    same = [o for o in run.cells_of(c.config) if o.pair == c.pair and (o.concurrency is None) == (c.concurrency is None)
            and o.state.ok]
    low = min(same, key=lambda o: o.x, default=None)
    return low if low is not None and low.x < c.x else None


def _queueing(run: RunData, c: CellInfo) -> Found:
    waiting = _peak(run, c, "waiting")
    if waiting:
        return "ev.waiting", {"n": f"{waiting:g}"}
    low = _lowest(run, c)
    a, b = (known(low.summary.mean_ttft_ms) if low else None), known(c.summary.mean_ttft_ms)
    if low is not None and a and b and b >= TTFT_GROWTH * a:
        return "ev.ttft_growth", {"times": f"{b / a:.1f}", "load": low.load_label}
    return None


def _roof(c: CellInfo, roof: Roofline | None) -> Label | None:
    out = known(c.summary.output_throughput)
    if roof is None or not out:
        return None
    bound = roof.aggregate(c.concurrency)
    share = out / bound if bound else 0.0
    kind = "compute" if c.concurrency and c.concurrency * roof.per_stream > roof.compute else "bandwidth"
    fields = {"pct": f"{100 * share:.0f}", "out": f"{out:,.0f}", "bound": f"{bound:,.0f}"}
    if share >= ROOF_NEAR:
        return Label(kind, f"ev.roof_{kind}", fields)
    return Label("unknown", "ev.roof_far", fields)


def label(run: RunData, c: CellInfo, roof: Roofline | None) -> Label:
    if not c.state.ok and c.state.kind != "invalid":
        return Label("unknown", "ev.not_ok", {"mark": c.state.mark})
    for kind, found in (("client", _client(c)), ("kv", _kv(run, c)), ("queueing", _queueing(run, c))):
        if found:
            return Label(kind, *found)
    near = _roof(c, roof)
    if near is not None:
        return near
    if run.samples:
        return Label("unknown", "ev.no_roofline", {})
    return Label("unknown", "ev.nothing" if roof is None else "ev.no_monitor", {})


def rooflines(checks: list[ConfigCheck]) -> dict[str, Roofline | None]:
    return {chk.config.name: chk.roofline for chk in checks}
