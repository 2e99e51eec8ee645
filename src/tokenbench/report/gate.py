"""The regression gate in words: its report section (a document of its own, markdown and HTML) and the
lines of its one-screen console summary. Every text is in report/i18n.py under `gate.`."""

from __future__ import annotations

from collections import Counter
from statistics import fmean

from tokenbench.judge.gate import FigureResult, GateResult
from tokenbench.report.document import Block, Document, Para, Table, num
from tokenbench.report.i18n import t
from tokenbench.report.verdicts import DIGITS, metric_name

SHOWN_ROWS = 20           # the console summary lists at most this many figures that did not pass plainly


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def verdict_word(f: FigureResult, lang: str) -> str:
    """'regressed', 'no change', ...; a refused one with its reason."""
    if f.decision != "refused":
        return t(lang, "gate.v." + f.decision.replace(" ", "_"))
    values = "" if f.refusal is None else t(lang, "gate.refusal_values", a=", ".join(f.refusal.values[0]),
                                            b=", ".join(f.refusal.values[1]))
    return t(lang, "gate.v.refused", why=t(lang, f"gate.why.{f.why}")) + values


def _mean(values: tuple[float, ...], digits: int) -> str:
    return num(fmean(values), digits) if values else "-"


def row(f: FigureResult, lang: str) -> list[str]:
    """cell, figure, baseline and candidate (means over their runs, with the run counts), the change and its
    interval, the smallest change the gate could have seen, the verdict."""
    digits = DIGITS.get(f.metric.name, 1)
    change = "-" if f.change is None else f"{_pct(f.change)} [{_pct(f.lo)}, {_pct(f.hi)}]"
    return [f.cell, metric_name(f.metric, lang), f"{_mean(f.base, digits)} ({len(f.base)})",
            f"{_mean(f.cand, digits)} ({len(f.cand)})", change, _pct(f.detectable).lstrip("+"),
            verdict_word(f, lang)]


def headers(lang: str) -> list[str]:
    return [t(lang, k) for k in ("col.load", "col.metric", "gate.col.baseline", "gate.col.candidate",
                                 "gate.col.change", "gate.col.detectable", "gate.col.verdict")]


def counts(result: GateResult, lang: str) -> str:
    found = Counter(f.decision for f in result.figures)
    return ", ".join(f"{found[v]} {t(lang, 'gate.v.' + v.replace(' ', '_'))}" for v in
                     ("regressed", "improved", "no change", "inconclusive") if found[v]) + \
        (f", {found['refused']} {t(lang, 'gate.refused_count')}" if found["refused"] else "")


def noise_text(result: GateResult, lang: str) -> str:
    """Which between-run noise the figures were judged with: repeats, a learned floor, the default floor."""
    found = Counter(f.noise.source for f in result.figures if f.noise is not None)
    return "; ".join(t(lang, f"gate.noise.{s}", n=k) for s, k in sorted(found.items())) or "-"


def how(result: GateResult, lang: str) -> str:
    p = result.policy
    return t(lang, "gate.how", alpha=f"{100 * p.alpha:g}%", m=sum(f.p is not None for f in result.figures),
             look=result.look.number, alpha_look=f"{100 * result.alpha_look:.3g}%",
             min_effect=f"{100 * p.min_effect:g}%", power=f"{100 * p.power:g}%")


def summary_lines(result: GateResult, lang: str) -> list[str]:
    """The console's header lines: outcome and counts, the sides, how it decided, the noise, notes."""
    lines = [t(lang, "gate.outcome", outcome=t(lang, f"gate.o.{result.outcome}"), counts=counts(result, lang)),
             t(lang, "gate.sides", base=", ".join(result.base_runs), cand=", ".join(result.cand_runs)),
             how(result, lang), t(lang, "gate.noise", text=noise_text(result, lang))]
    return lines + ([t(lang, "gate.fingerprints")] if result.fingerprints_differ else [])


def shown(result: GateResult) -> list[FigureResult]:
    """The figures the console lists: those that did not pass plainly (regressed first), at most SHOWN_ROWS."""
    order = {"regressed": 0, "refused": 1, "inconclusive": 2, "improved": 3}
    return sorted((f for f in result.figures if f.decision in order), key=lambda f: order[f.decision])[:SHOWN_ROWS]


def section(result: GateResult, lang: str) -> list[Block]:
    """The gate's report section: what it decided and how, then every figure."""
    out: list[Block] = [Para(line) for line in summary_lines(result, lang)]
    out.append(Table(headers(lang), [row(f, lang) for f in result.figures], role="gate", left=2))
    out.append(Para(t(lang, "gate.note")))
    return out


def document(result: GateResult, lang: str, version: str) -> Document:
    doc = Document(t(lang, "gate.title", base=", ".join(result.base_runs), cand=", ".join(result.cand_runs)), lang)
    doc.add(*section(result, lang), Para(t(lang, "note.rendered", version=version)))
    return doc
