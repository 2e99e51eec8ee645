"""The whole verdict of a cell, in one place: were the lengths what was asked and did few enough requests
fail (metrics/verify.py), could the client keep up (its health, judged against the accuracy tokenbench
claims), and did the server stay reachable. `cell_verdict` returns it typed: the status and its reason,
the client lag a `--allow-client-lag` tolerated, and why the server is taken for gone. Nothing downstream
overrules it; the report reads it back from the stored status, message and summary (report/ judgements).
Formulas: docs/metrics.md ("Client health")."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.verify import UNREACHABLE_AFTER, Outcomes, unreachable, verdict
from tokenbench.spec.bench import Load

Status = Literal["ok", "failed", "invalid", "skipped", "interrupted"]

# Client health: the accuracy tokenbench claims for a published latency figure is CLAIM_REL of the
# figure's scale or CLAIM_ABS_MS, whichever is larger (the absolute part is calibrate's delivery limit).
# A cell is invalid when the client's own delay could move a published figure by more than that: its
# numbers then measure the client, not the server.
CLAIM_REL = 0.05
CLAIM_ABS_MS = 1.0
PROBE_RESOLUTION_MS = 2.0         # an idle loop's 10 ms probe timer still wakes up late: epoll timeouts are
                                  # whole ms, and a VM's timer jitter adds about 1 ms more (p99 2.1-2.4 ms on
                                  # an idle 2-core VM while calibrate's delivery error stayed under 0.4 ms)
SCHEDULE_LAG_P99_MAX_MS = 50.0    # open loop without a cap: sends this late versus the schedule
CLIENT_CPU_MAX_PERCENT = 90.0     # the busiest client process: one core nearly saturated


@dataclass(frozen=True)
class VerdictPolicy:
    """What a cell tolerates (the run's options) and what the verdict needs to say about the target."""

    allow_mismatch: bool = False         # --allow-length-mismatch
    allow_client_lag: bool = False       # --allow-client-lag
    max_error_rate: float = 0.0          # --max-error-rate
    api_key_sent: bool = False
    base_url: str = ""                   # named when the server became unreachable


@dataclass(frozen=True)
class Verdict:
    status: Status
    message: str = ""                    # why, one line ("" when ok)
    lag_tolerated: str | None = None     # the client lagged and --allow-client-lag kept the cell ok
    unreachable: str | None = None       # the server stopped accepting connections (the cell stopped sending)

    def failed(self, why: str) -> Verdict:
        """The same verdict turned "failed" with `why` ahead of its message (a server that died)."""
        return replace(self, status="failed", message=f"{why}; {self.message}" if self.message else why)

    def marked(self, summary: CellSummary) -> CellSummary:
        """The summary with the verdict's marks (kept in the stored summary, read by the report)."""
        marks = {"client_lag_tolerated": self.lag_tolerated} if self.lag_tolerated else {}
        return summary.with_(**marks, **({"server_unreachable": True} if self.unreachable else {}))


def claim_ms(scale_ms: float) -> float:
    """The largest error tokenbench claims for a figure of this scale."""
    return max(CLAIM_REL * scale_ms, CLAIM_ABS_MS)


def _excess(lag_ms: float | None) -> float:
    return max(0.0, (lag_ms or 0.0) - PROBE_RESOLUTION_MS)


def _lag(s: CellSummary, pct: int) -> float | None:
    h = s.health
    return None if h is None else h.loop_lag_p50_ms if pct == 50 else h.loop_lag_p99_ms


def _itl_checks(s: CellSummary) -> list[str]:
    """A lagging loop stamps chunks late: the typical lag (p50) moves the median and mean ITL and TPOT,
    the lag one stamp in a hundred suffers (p99) moves p99 ITL (the issue's p99 ITL of 58 ms against a
    truth of 21 ms). Each is judged against the claim on the figure it moves."""
    itl, completed = s.median_itl_ms, s.completed or 0
    multi = completed and (s.total_output_tokens or 0) / completed >= 2
    if itl is None or itl != itl or not multi:
        return []
    if itl == 0:
        return ["median ITL is 0 ms with multi-token outputs: chunks were stamped together (read late)"]
    out = []
    for pct, name, scale in ((50, "median itl", s.median_itl_ms), (99, "p99 itl", s.p99_itl_ms)):
        lag = _lag(s, pct)
        scale = itl if scale is None or scale != scale else scale
        if _excess(lag) > claim_ms(scale):
            out.append(f"event-loop lag p{pct} {lag:.1f} ms could move {name} "
                       f"({scale:.1f} ms) by more than {claim_ms(scale):.2f} ms ({CLAIM_REL:.0%})")
    return out


def _stall_check(s: CellSummary) -> list[str]:
    """The longest stall against the p99 TTFT: a stall delays every stamp that falls in it, so the TTFT
    of a request whose first token arrived then is off by up to the stall; the largest TTFT figure
    published (p99) must stay within the claim."""
    ttft, stall = s.p99_ttft_ms, s.health.loop_lag_max_ms if s.health else None
    if ttft is None or ttft != ttft:
        ttft = s.median_ttft_ms
    if ttft is None or ttft != ttft or stall is None:
        return []
    if _excess(stall) > claim_ms(ttft):
        return [f"an event-loop stall of {stall:.1f} ms could move a TTFT by more than {claim_ms(ttft):.2f} ms "
                f"({CLAIM_REL:.0%} of the p99 TTFT {ttft:.1f} ms)"]
    return []


def client_health_verdict(summary: CellSummary, load: Load) -> tuple[Status, str]:
    """("ok", "") or ("invalid", reason) from the client's own observations during the cell."""
    reasons = _itl_checks(summary) + _stall_check(summary)
    q99 = summary.p99_queue_ms
    if load.concurrency is None and load.max_concurrency is None and q99 and q99 > SCHEDULE_LAG_P99_MAX_MS:
        reasons.append(f"sends ran {q99:.1f} ms (p99) behind the arrival schedule")
    cpu = summary.health.busiest_cpu_percent() if summary.health else 0.0
    if cpu > CLIENT_CPU_MAX_PERCENT:
        reasons.append(f"busiest client process at {cpu:.0f}% of a core > {CLIENT_CPU_MAX_PERCENT:g}%")
    if reasons:
        return "invalid", "client overloaded: " + "; ".join(reasons) + " (use --workers N or a lighter load)"
    return "ok", ""


def _health(summary: CellSummary, load: Load, policy: VerdictPolicy) -> Verdict:
    status, message = client_health_verdict(summary, load)
    if status == "invalid" and policy.allow_client_lag:
        return Verdict("ok", message, lag_tolerated=message)      # stays ok; the report marks it '~'
    return Verdict(status, message)


def _gone(seen: Outcomes, policy: VerdictPolicy, planned: int | None) -> str | None:
    lost = unreachable(seen)
    if not lost:
        return None
    left = f"{planned - seen.n} of {planned} requests not sent" if planned else "the rest not sent"
    return (f"server unreachable at {policy.base_url}: {UNREACHABLE_AFTER} consecutive connection failures "
            f"({lost}); {left}")


def cell_verdict(seen: Outcomes, summary: CellSummary, load: Load, policy: VerdictPolicy,
                 planned: int | None = None) -> Verdict:
    """The cell's verdict: lengths and errors first, then the client's health (a cell ok so far), and a
    server that went away overrides both (`--resume` runs such a cell again)."""
    status, message = verdict(seen, policy.allow_mismatch, policy.max_error_rate, policy.api_key_sent)
    out = _health(summary, load, policy) if status == "ok" else Verdict(status, message)
    lost = _gone(seen, policy, planned)
    return Verdict("failed", lost, out.lag_tolerated, lost) if lost else out
