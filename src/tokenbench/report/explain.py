"""The judgements (judge/) said in words, in the report's language: a cell's bottleneck and its evidence,
a fairness issue of a comparison, the plausibility section, and what a cell offered (its send rates, and
why they are off) and how its streams ended (the stream tail). The judgements hold codes and numbers;
every number is formatted here, once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tokenbench.judge.cells import label_of
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import SendRates
from tokenbench.report.document import Block, Bullets, Para, Table, num, pct, signed_pct
from tokenbench.report.i18n import t
from tokenbench.report.marks import source_text
from tokenbench.spec.server_kinds import Capabilities

if TYPE_CHECKING:                    # types only: a bench run's console says what a cell offered, nothing more
    from tokenbench.judge.bottleneck import Label
    from tokenbench.judge.fairness import Issue, Value
    from tokenbench.judge.fingerprint import Reason
    from tokenbench.judge.plausibility import ConfigCheck, Finding, Rate, Roofline, Unknown

# how each figure of a bottleneck's evidence is written (the rest: as it is)
EVIDENCE_FORMAT = {"cpu": "{:.0f}", "demand": "{:,}", "capacity": "{:,}", "pct": "{:.0f}", "n": "{:g}",
                   "times": "{:.1f}", "out": "{:,.0f}", "bound": "{:,.0f}", "max": "{:g}", "batch": "{:.3g}", "size": "{:g}",
                   "rise": "{:.2g}", "client": "{:.0f}", "server": "{:.0f}", "other": "{:.0f}", "cpus": "{:g}",
                   "psi": "{:.0f}%"}


# bottleneck ----------------------------------------------------------------------------------------
def evidence(label: Label, lang: str = "en") -> str:
    shown = {k: EVIDENCE_FORMAT[k].format(v) if k in EVIDENCE_FORMAT and not isinstance(v, str) else v
             for k, v in label.values.items()}
    return t(lang, f"ev.{label.evidence}", **shown)


def bottleneck_text(label: Label, lang: str) -> str:
    """'queueing: waiting peak 4 (server /metrics)'."""
    return f"{t(lang, f'bn.{label.kind}')}: {evidence(label, lang)}"


# fairness ------------------------------------------------------------------------------------------
def _value(v: Value | None, lang: str) -> str:
    from tokenbench.judge.fairness import SINGLE_TURN, CacheUse
    if v is None:
        return "-"
    if isinstance(v, CacheUse):
        if v.stated is not None:
            return v.stated
        what = t(lang, "fair.cached", pct=f"{v.percent}%") if v.percent is not None else t(lang, "fair.no_reuse")
        if v.state is None:
            return what
        return t(lang, "fair.cache_state", state=cache_state_text(v.state, lang), what=what)
    if isinstance(v, bool):
        return str(v).lower()
    if v == SINGLE_TURN:
        return t(lang, "fair.single_turn")
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def issue_text(issue: Issue, lang: str = "en") -> str:
    if issue.check == "load":
        values = ", ".join(f"{c}: {v or '-'}" for c, v in zip(issue.columns, issue.values, strict=True))
        return t(lang, "fair.load", cell=issue.cell, values=values, why=t(lang, f"fair.load.{issue.detail}"))
    what = t(lang, f"fair.{issue.check}")
    if issue.kind == "unknown":
        return t(lang, "fair.unknown", what=what, columns=", ".join(issue.columns))
    values = ", ".join(f"{c}={_value(v, lang)}" for c, v in zip(issue.columns, issue.values, strict=True))
    if issue.cell:
        return t(lang, "fair.differs", what=what, cell=issue.cell, values=values)
    return t(lang, "fair.differs_all", what=what, values=values)


def cache_state_text(state: str, lang: str) -> str:
    """'cold', 'warm', or several joined ('cold+warm': cells of one side in different states)."""
    return "+".join(t(lang, f"cache.{s}") for s in state.split("+"))


# refused verdicts ----------------------------------------------------------------------------------
def refusal_text(reasons: Sequence[Reason], lang: str) -> str:
    """Why a verdict is refused (judge/fingerprint.refusals): the first refusing reason, A's value then B's."""
    r = next(x for x in reasons if x.refuses)
    if r.code == "cache_differs":
        a, b = (_cache_side(str(state), share, lang) for state, share in zip((r.a, r.b), r.shares, strict=True))
        return t(lang, "verdict.refused_cache", a=a, b=b)
    key = {"other_work": "verdict.refused_other", "server_wait": "verdict.refused_wait"}.get(r.code,
                                                                                         "verdict.refused_pressure")
    return t(lang, key, a=pct(_fraction(r.a), 0), b=pct(_fraction(r.b), 0))


def _cache_side(state: str, share: float | None, lang: str) -> str:
    """'cold', or 'warm (98 % from the cache)' where the server told the share it served from its cache."""
    text = cache_state_text(state, lang)
    return text if share is None else t(lang, "verdict.cache_share", state=text, share=pct(share, 0))


def _fraction(value: float | str | None) -> float | None:
    """A share in % (of one core, or of the window) as a fraction, for `pct`."""
    return value / 100.0 if isinstance(value, int | float) else None


# plausibility --------------------------------------------------------------------------------------
def _bounds(r: Roofline, config: str) -> dict:
    return {"config": config, "devices": r.devices, "hardware": r.device.name,
            "params": f"{r.size.params_b:g}", "bpp": f"{r.size.bytes_per_param:g}",
            "gb": num(r.size.weights_gb, 2), "bw": f"{r.device.bandwidth_gbs:g}",
            "stream": num(r.per_stream), "tflops": f"{r.device.bf16_tflops:g}", "compute": num(r.compute, 0)}


def shaped_by(r: Roofline) -> list[tuple[str, dict]]:
    """(i18n key, fields) for what shaped the bounds beyond a dense model's weights."""
    z = r.size
    out: list[tuple[str, dict]] = []
    if z.total_params_b and z.total_params_b != z.params_b:
        out.append(("plaus.moe", {"active": f"{z.params_b:g}", "total": f"{z.total_params_b:g}"}))
    if z.spec_tokens:
        out.append(("plaus.spec", {"k": z.spec_tokens, "k1": z.spec_tokens + 1}))
    if z.kv_bytes is not None:
        out.append(("plaus.kv", {"kv": f"{z.kv_bytes:g}"}))
    return out


def unknown_text(u: Unknown, lang: str) -> str:
    fields = {"total": f"{u.total_params_b:g}"} if u.total_params_b is not None else {}
    if u.reason == "no_hw":
        fields = {"known": ", ".join(u.known_hardware)}
    return t(lang, f"plaus.{u.reason}", **fields)


def _how(rate: Rate, f: Finding, lang: str) -> str:
    c = f.cell
    by_how: dict[str, dict[str, object]] = {"derived": {"rps": num(rate.rps, 2), "olen": c.output_len},
                                            "tpot": {"tpot": num(rate.tpot_ms, 2)},
                                            "total_derived": {"rps": num(rate.rps, 2), "ilen": c.input_len}}
    fields = by_how.get(rate.how, {})
    return t(lang, f"plaus.how.{rate.how}", **fields)


def latency_note(f: Finding, r: Roofline, lang: str) -> str:
    """At concurrency c the request rate leaves c / rate per request: what a derived rate implies."""
    c, rps = f.cell, f.cell.summary.request_throughput or 0.0
    ms = 1000 * (c.concurrency or 0) / rps
    return t(lang, "plaus.latency_note", cell=label_of(c), c=c.concurrency, rps=num(rps, 2), ms=num(ms),
             olen=c.output_len, tokens=num(int(ms / 1000 * r.per_stream)))


def why(f: Finding, r: Roofline, lang: str) -> list[str]:
    c = f.cell
    fields = {"cell": label_of(c), "stream": num(r.per_stream), "compute": num(r.compute, 0), "c": c.concurrency,
              "how": _how(f.measured, f, lang), "measured": num(f.measured.value), "bound": num(f.bound),
              "times": f"{f.times:,.1f}"}
    if f.check == "compute":
        fields.update(tflop=num(f.measured.value * 2 * r.size.params_b * 1e9 / 1e12), params=f"{r.size.params_b:g}",
                      devices=r.devices, tflops=f"{r.device.bf16_tflops:g}")
    out = [t(lang, f"plaus.why.{f.check}", **fields)]
    if f.telling_latency:
        out.append(latency_note(f, r, lang))
    return out


def plausibility_blocks(checks: list[ConfigCheck], lang: str) -> list[Block]:
    out: list[Block] = []
    for chk in checks:
        name, roof = chk.config.name, chk.roofline
        if roof is None:
            reason = unknown_text(chk.skipped, lang) if chk.skipped else "-"
            out.append(Para(t(lang, "plaus.skipped", config=name, reason=reason)))
            continue
        out.append(Para(t(lang, "plaus.bounds", **_bounds(roof, name))))
        out += [Para(t(lang, key, **fields)) for key, fields in shaped_by(roof)]
        if not chk.findings:
            out.append(Para(t(lang, "plaus.ok", config=name, n=chk.cells)))
            continue
        out.append(Para(t(lang, "plaus.flagged", config=name, n=len(chk.findings))))
        head = [t(lang, k) for k in ("col.cell", "col.check", "col.measured", "col.bound", "col.times")]
        out.append(Table(head, [[label_of(f.cell), t(lang, f"plaus.check.{f.check}"), num(f.measured.value),
                                 num(f.bound), f"{f.times:,.1f}"] for f in chk.findings], role="plausibility",
                         left=2))
        out.append(Bullets([line for f in chk.findings for line in why(f, roof, lang)]))
    return out


# send rates and stream tail ----------------------------------------------------------------------------
def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}" if v < 1000 else f"{v:,.0f}"


def send_line(cell: str, s: CellSummary, lang: str = "en") -> str | None:
    """'8:4/rate=20/s: sent at 19.9/s (asked 20/s, scheduled 20/s)'; None for a closed loop."""
    r = s.send
    if r is None or r.send_rate_asked is None:
        return None
    return t(lang, "send.line", cell=cell, achieved=_rate(r.send_rate_achieved), asked=_rate(r.send_rate_asked),
             scheduled=_rate(r.send_rate_scheduled))


def send_note(cell: str, s: CellSummary, lang: str = "en") -> str | None:
    """Why a cell's sent rate is off the asked one (metrics/summary.off_reason), or None when it is not."""
    r = s.send
    if r is None or r.send_rate_off is None:
        return None
    why = _off_why(s, r.send_rate_off, lang)
    off = signed_pct(r.off)
    return t(lang, "send.note", cell=cell, achieved=_rate(r.send_rate_achieved), asked=_rate(r.send_rate_asked),
             off=off, why=why)


def schedule_note(cell: str, s: CellSummary, lang: str = "en") -> str | None:
    """That a cell's sends left their schedule (metrics/summary.schedule_off), with the lateness figures and
    why; None when they kept it."""
    r = s.send
    if r is None or r.send_schedule_off is None:
        return None
    cv = lambda v: "-" if v is None else f"{v:.2f}"    # noqa: E731
    return t(lang, "send.schedule", cell=cell, p99=_ms(r.send_late_p99_ms), max=_ms(r.send_late_max_ms),
             tol=_ms(r.send_late_tolerance_ms), share=pct(r.send_late_share, 0), cv_sent=cv(r.send_gap_cv_sent),
             cv_sched=cv(r.send_gap_cv_scheduled), why=_off_why(s, r.send_schedule_off, lang))


def _ms(v: float | None) -> str:
    return f"{v or 0:.1f}"


def _off_why(s: CellSummary, reason: str, lang: str) -> str:
    """Why an open loop's sends were off (a reason code of metrics/summary.off_reason), in words."""
    r = s.send or SendRates()
    return t(lang, f"send.off.{reason}", n=num(s.num_prompts), scheduled=_rate(r.send_rate_scheduled),
             waits=num(r.send_slot_waits), wait=_ms(r.send_slot_wait_mean_ms), connect=_ms(r.send_connect_mean_ms),
             late=_ms(r.send_late_mean_ms))


def tail_note(cell: str, s: CellSummary, lang: str = "en") -> str | None:
    """The stream tail, when it matters (metrics/summary_groups.StreamTail.matters), else None."""
    tail = s.tail
    if tail is None or not tail.matters(s.mean_e2el_ms, s.p99_e2el_ms):
        return None
    return t(lang, "tail.note", cell=cell, mean=num(tail.mean_stream_tail_ms, 1), p99=num(tail.p99_stream_tail_ms, 1))


def delivery_note(cell: str, s: CellSummary, lang: str = "en") -> str | None:
    """How the stream reached the client when it came in bursts while the client waited idle (metrics/health.py:
    what was seen, whose shape it is on the evidence, whether every figure is bounded by the holds); None when
    it did not, or too rarely to matter (no hold bounded beyond its bursts, no server's own writes)."""
    f = s.figures
    if f is None or not f.chunks_coalesced or not (f.held_upstream or f.burst_source == "server"):
        return None
    note = t(lang, "delivery.note", cell=cell, size=num(f.burst_size_median, 0), largest=num(f.burst_size_max),
             period=num(f.burst_period_ms, 0), share=pct(f.chunks_coalesced / (f.token_chunks or 1), 0),
             source=source_text(s, lang))
    return note + (t(lang, "delivery.held") if f.held_upstream else "")


def early_note(cell: str, s: CellSummary, lang: str = "en") -> str | None:
    """Answers the server ended before the asked length where it could not be forced (metrics/early_ends.py)."""
    e = s.early
    if e is None or not e.ended_early:
        return None
    return t(lang, "early.note", cell=cell, n=num(e.ended_early), ok=num(s.completed), asked=num(s.output_len),
             lo=num(e.ended_early_out_min), hi=num(e.ended_early_out_max), median=num(e.ended_early_out_median, 1))


def method_notes(config: str, caps: Capabilities | None, lang: str = "en") -> list[str]:
    """How a server config's requests kept their lengths (the capability probe), and each field left out."""
    if caps is None:
        return []
    how = t(lang, "probe.how.probed", n=caps.requests) if caps.probed else t(lang, "probe.how.assumed")
    return [t(lang, "probe.method", config=config, method=caps.method or caps.method_line(), how=how),
            *(t(lang, "probe.refused", config=config, line=line) for line in caps.refused)]
