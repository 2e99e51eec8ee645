"""Why is a cell slow? One label per cell with the evidence that gave it (docs/metrics.md, "Bottleneck").

Checked in order, the first that holds wins: client-bound (the client's own health), KV-bound (`*`, KV
usage near 100 %, preemptions), graph capture (the decode batch above the captured graph sizes: `^`, with
the TPOT cliff it caused when the batch crossed them), a TPOT cliff nothing above explains, queueing
(requests waiting at the server, or TTFT growing with load), compute- or bandwidth-bound (output tok/s
near the decode roofline), accelerator busy (its utilisation over the measured window) or, on a server
without accelerator samples, the host's CPUs full: said as what took them (the cell's CPU shares: the client's,
the server's and other work's, monitor/cpu.py): CPU shared with other work when other processes took at least
half a core, host CPU-bound (the server and the client filled it) otherwise, and unknown where the server's
processes are not seen; else unknown, saying what was seen and what was missing. Pure: reads the cell's summary
(its monitor figures and CPU shares over the measured window), the monitor samples, the config's facts and the
roofline, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from tokenbench.judge import capture
from tokenbench.judge.cells import load_label_of, load_of, pair_of, state_of, x_of
from tokenbench.judge.plausibility import ConfigCheck, Roofline
from tokenbench.judge.views import RunData
from tokenbench.metrics.cell_summary import known
from tokenbench.metrics.summary_groups import ClientHealth, CpuShares, MonitorFigures
from tokenbench.store.rows import CellRow

KV_FULL = 0.95              # KV usage peak at or above this share is "full"
TTFT_GROWTH = 2.0           # mean TTFT this many times the lowest load's is queueing
ROOF_NEAR = 0.5             # output tok/s at or above this share of the roofline is bound by it
CLIENT_CPU_NEAR = 80.0      # % of a core per client process
ACCEL_BUSY = 90.0           # mean accelerator utilisation over the window at or above this is "busy"
HOST_BUSY = 90.0            # mean host CPU (% of all cores) at or above this bounds a server without accelerator
OTHERS_HELD = 50.0          # ... unless other work took at least this (% of one core): the CPU was shared with it


Kind = Literal["client", "kv", "graph", "cliff", "queueing", "compute", "bandwidth", "accelerator", "host",
               "contention", "unknown"]
Evidence = Literal["client", "client_cpu", "kv_demand", "kv_usage", "preempt", "graph_cliff", "graph_eager",
                   "graph_padding",
                   "tpot_cliff", "waiting", "ttft_growth", "roof_compute", "roof_bandwidth", "roof_far", "not_ok",
                   "accel_busy", "host_cpu", "server_cpu", "host_others", "host_unsplit", "monitor_quiet",
                   "quiet_split", "no_roofline", "no_monitor", "nothing"]


@dataclass(frozen=True)
class Label:
    """A cell's bottleneck: its kind, the evidence that gave it (a code) and that evidence's figures (numbers,
    or the cell's own words: a verdict's reason, a load label, a mark). report/ says it in words."""

    kind: Kind
    evidence: Evidence
    values: dict[str, float | str] = field(default_factory=dict)


Found = tuple[Evidence, dict[str, float | str]] | None


def _monitor(c: CellRow) -> MonitorFigures:
    return c.summary.monitor or MonitorFigures()


def _peak(run: RunData, c: CellRow, name: str) -> float | None:
    vals = [s.value for r in (c.repeats or (c,)) for s in run.samples.get(r.id, []) if s.name == name]
    m = _monitor(c)
    stored = known(m.server_waiting_max if name == "waiting" else m.server_kv_usage_peak)
    both = vals + ([stored] if stored is not None else [])
    return max(both) if both else None


def _client(c: CellRow) -> Found:
    if state_of(c).kind == "invalid":
        return "client", {"reason": state_of(c).reason or "-"}
    health = c.summary.health or ClientHealth()
    cpu, workers = known(health.client_cpu_percent), health.client_workers or 1
    mark = c.summary.figures.mark("output_throughput") if c.summary.figures else None
    if (cpu is not None and cpu / workers >= CLIENT_CPU_NEAR) or (mark is not None and mark.cause == "client_cpu"):
        return "client_cpu", {"cpu": (cpu or 0.0) / workers}
    return None


def _kv(run: RunData, c: CellRow) -> Found:
    if c.over_capacity:
        return "kv_demand", {"demand": c.kv_demand or 0, "capacity": c.kv_capacity or 0}
    kv = _peak(run, c, "kv_usage")
    if kv is not None and kv >= KV_FULL:
        return "kv_usage", {"pct": 100 * kv}
    pre = known(_monitor(c).server_preemptions)
    return ("preempt", {"n": pre}) if pre else None


def _graph(run: RunData, c: CellRow) -> Found:
    """Above the captured sizes (the TPOT cliff it caused when the batch crossed them into this cell), or a
    TPOT cliff from the batch being padded up to a captured size that rose more than the load did."""
    g = capture.graphs(run, c)
    size = capture.batch(run, c)
    if g is None:
        return None
    jump = capture.cliff(run, c)
    if not g.eager(size):
        if jump is None or jump.padded is None:
            return None
        return "graph_padding", {"times": jump.tpot_ratio, "load": load_label_of(jump.below), "batch": size or 0,
                                 "size": jump.padded[1]}
    if jump is not None and jump.crossed:
        return "graph_cliff", {"times": jump.tpot_ratio, "load": load_label_of(jump.below), "max": g.max_size or 0,
                               "batch": size or 0}
    return "graph_eager", {"batch": size or 0, "max": g.max_size or 0}


def _cliff(run: RunData, c: CellRow) -> Found:
    """A TPOT cliff that neither KV nor graph capture explains."""
    jump = capture.cliff(run, c)
    if jump is None:
        return None
    return "tpot_cliff", {"times": jump.tpot_ratio, "load": load_label_of(jump.below), "rise": jump.load_ratio}


def _lowest(run: RunData, c: CellRow) -> CellRow | None:
    same = [o for o in run.cells_of(c.config) if pair_of(o) == pair_of(c) and load_of(o).dimension == load_of(c).dimension
            and load_of(o).cap == load_of(c).cap and state_of(o).ok]
    low = min(same, key=lambda o: x_of(o), default=None)
    return low if low is not None and x_of(low) < x_of(c) else None


def _queueing(run: RunData, c: CellRow) -> Found:
    waiting = _peak(run, c, "waiting")
    if waiting:
        return "waiting", {"n": waiting}
    low = _lowest(run, c)
    a, b = (known(low.summary.mean_ttft_ms) if low else None), known(c.summary.mean_ttft_ms)
    if low is not None and a and b and b >= TTFT_GROWTH * a:
        return "ttft_growth", {"times": b / a, "load": load_label_of(low)}
    return None


def _roof(c: CellRow, roof: Roofline | None) -> Label | None:
    out = known(c.summary.output_throughput)
    if roof is None or not out:
        return None
    bound = roof.aggregate(c.concurrency)
    share = out / bound if bound else 0.0
    kind: Kind = "compute" if c.concurrency and c.concurrency * roof.per_stream > roof.compute else "bandwidth"
    figures: dict[str, float | str] = {"pct": 100 * share, "out": out, "bound": bound}
    if share >= ROOF_NEAR:
        return Label(kind, "roof_compute" if kind == "compute" else "roof_bandwidth", figures)
    return Label("unknown", "roof_far", figures)


def _host_pct(c: CellRow) -> float | None:
    """The host's CPU over the measured window, % of all cores: from the CPU shares, else the monitor's samples."""
    split = c.summary.cpu
    if split is not None and split.host_pct is not None and split.count:
        return split.host_pct / float(split.count)
    return known(_monitor(c).host_cpu_mean_pct)


def _shares(split: CpuShares, pct: float | None) -> dict[str, float | str]:
    """What took the host's CPUs, for the label: each share in % of one core, the CPUs, the host's CPU (% of all
    cores), and the CPU pressure ("-" where the kernel does not tell it)."""
    told = {"client": split.client_pct, "server": split.server_pct, "other": split.other_pct, "pct": pct,
            "cpus": split.count, "psi": split.psi_some_pct}
    return {k: "-" if v is None else float(v) for k, v in told.items()}


def _host(c: CellRow, pct: float) -> Label:
    """The host's CPUs full: who took them (the cell's CPU shares), never the host alone where other work did."""
    split = c.summary.cpu
    if split is None:
        return Label("unknown", "host_cpu", {"pct": pct})      # stored without shares: nothing tells who took it
    values = _shares(split, pct)
    if split.other_pct is None:
        return Label("unknown", "host_unsplit", values)
    if split.other_pct >= OTHERS_HELD:
        return Label("contention", "host_others", values)
    return Label("host", "server_cpu", values)


def _busy(c: CellRow) -> Label | None:
    """The accelerator busy over the measured window; on a server without accelerator samples, the host's CPUs
    full, said as who took them."""
    m = _monitor(c)
    util, cpu = known(m.accel_util_mean_pct), _host_pct(c)
    if util is not None and util >= ACCEL_BUSY:
        return Label("accelerator", "accel_busy", {"pct": util, "max": known(m.accel_util_max_pct) or util})
    if util is None and cpu is not None and cpu >= HOST_BUSY:
        return _host(c, cpu)
    return None


def _seen(run: RunData, c: CellRow) -> Label:
    """Nothing bounds the cell: what the monitor saw of it (with the CPU shares where they were read), or that
    there was nothing to see."""
    m = _monitor(c)
    util, cpu = known(m.accel_util_mean_pct), _host_pct(c)
    split = c.summary.cpu
    if util is None and split is not None and split.other_pct is not None:
        return Label("unknown", "quiet_split", _shares(split, cpu))
    if util is not None or cpu is not None:
        return Label("unknown", "monitor_quiet", {"util": "-" if util is None else f"{util:.0f}",
                                                  "cpu": "-" if cpu is None else f"{cpu:.0f}"})
    return Label("unknown", "no_roofline") if run.samples.get(c.id) else Label("unknown", "nothing")


def label(run: RunData, c: CellRow, roof: Roofline | None) -> Label:
    if not state_of(c).ok and state_of(c).kind != "invalid":
        return Label("unknown", "not_ok", {"mark": state_of(c).mark})
    checks: tuple[tuple[Kind, Callable[[], Found]], ...] = (
        ("client", lambda: _client(c)), ("kv", lambda: _kv(run, c)), ("graph", lambda: _graph(run, c)),
        ("cliff", lambda: _cliff(run, c)), ("queueing", lambda: _queueing(run, c)))
    for kind, check in checks:
        found = check()
        if found:
            return Label(kind, *found)
    near = _roof(c, roof)
    if near is not None and near.kind != "unknown":
        return near
    busy = _busy(c)
    if busy is not None:
        return busy
    if near is not None:
        return near
    seen = _seen(run, c)
    if roof is not None and seen.evidence == "nothing":
        return Label("unknown", "no_monitor")
    return seen


def rooflines(checks: list[ConfigCheck]) -> dict[str, Roofline | None]:
    return {chk.config.name: chk.roofline for chk in checks}
