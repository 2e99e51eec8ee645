"""The regression gate in words: its report section (a document of its own, markdown and HTML) and the
lines of its one-screen console summary. A refused verdict is said as `compare` says it (report/explain.py,
`verdict.*`); the gate's own texts are in the catalogs under `gate.`."""

from __future__ import annotations

from collections import Counter
from statistics import fmean

from tokenbench.judge.gate import Decision, FigureResult, GateResult
from tokenbench.report.document import Block, Document, Para, Table, num
from tokenbench.report.explain import refusal_text
from tokenbench.report.i18n import t
from tokenbench.report.verdicts import DIGITS, metric_name, refused_note

SHOWN_ROWS = 20           # the console summary lists at most this many figures that did not pass plainly
DECISIONS: dict[Decision, str] = {"regressed": "gate.v.regressed", "improved": "gate.v.improved", "no change": "gate.v.no_change",
             "inconclusive": "gate.v.inconclusive", "refused": "gate.v.refused"}
UNJUDGED = {"not_ok": "verdict.not_ok", "moved": "verdict.moved", "no_data": "verdict.na"}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def verdict_word(f: FigureResult, lang: str) -> str:
    """'regressed', 'no change', ...; a refused one with its reason, as compare says it."""
    if f.decision != "refused":
        return t(lang, DECISIONS[f.decision])
    if any(r.refuses for r in f.reasons):
        return refusal_text(f.reasons, lang)
    return t(lang, UNJUDGED.get(f.why or "no_data", "verdict.na"))


def _mean(values: tuple[float, ...], digits: int) -> str:
    return num(fmean(values), digits) if values else "-"


def _runs(values: tuple[float, ...], units: int, left_out: int, lang: str) -> str:
    """'(3)'; '(4 / 2)' where 4 runs shared 2 launches; '(5; 1 left out: ...)' where the client's delays moved
    the figure in a run."""
    runs = f"{len(values)}" if units in (0, len(values)) else f"{len(values)} / {units}"
    return f"({runs}{t(lang, 'gate.left_out', n=left_out) if left_out else ''})"


def row(f: FigureResult, lang: str) -> list[str]:
    """cell, figure, baseline and candidate (means over their runs, with the run counts and, where runs shared
    a launch, the launches; the runs left out), the change and its interval, the smallest change the gate could
    have seen, the verdict."""
    digits = DIGITS.get(f.metric.name, 1)
    change = "-" if f.change is None else f"{_pct(f.change)} [{_pct(f.lo)}, {_pct(f.hi)}]"
    (ub, uc), (lb, lc) = f.units, f.left_out
    return [f.cell, metric_name(f.metric, lang), f"{_mean(f.base, digits)} {_runs(f.base, ub, lb, lang)}",
            f"{_mean(f.cand, digits)} {_runs(f.cand, uc, lc, lang)}", change, _pct(f.detectable).lstrip("+"),
            verdict_word(f, lang)]


def headers(lang: str) -> list[str]:
    return [t(lang, k) for k in ("col.load", "col.metric", "gate.col.baseline", "gate.col.candidate",
                                 "gate.col.change", "gate.col.detectable", "gate.col.verdict")]


def counts(result: GateResult, lang: str) -> str:
    found = Counter(f.decision for f in result.figures)
    return ", ".join(f"{found[v]} {t(lang, key)}" for v, key in DECISIONS.items() if found[v])


def noise_text(result: GateResult, lang: str) -> str:
    """Which between-run noise the figures were judged with: repeats, a learned floor, the default floor."""
    found = Counter(f.noise.source for f in result.figures if f.noise is not None)
    return "; ".join(t(lang, f"gate.noise.{s}", n=k) for s, k in sorted(found.items())) or "-"


def how(result: GateResult, lang: str) -> str:
    p = result.policy
    return t(lang, "gate.how", alpha=f"{100 * p.alpha:g}%", m=sum(f.p is not None for f in result.figures),
             look=result.look.number, alpha_look=f"{100 * result.alpha_look:.3g}%",
             min_effect=f"{100 * p.min_effect:g}%", power=f"{100 * p.power:g}%")


FACT_KEYS = {"engine": "attr.engine", "version": "attr.version", "model": "attr.model", "flags": "attr.flags",
             "image": "attr.image", "tool": "attr.tool", "host": "attr.host", "cpu_model": "attr.host",
             "cpus": "attr.host"}


def differences_text(result: GateResult, lang: str) -> str | None:
    """'engine version: 0.11 against 0.12; host (CPU model, CPUs): a (EPYC, 16) against b (EPYC, 16)'; None
    where the sides ran alike."""
    if result.prints is None or not result.differences:
        return None
    base, cand = result.prints
    named = dict.fromkeys(FACT_KEYS[d.fact] for d in result.differences)

    def value(p, key: str) -> str:
        facts = [f for f, k in FACT_KEYS.items() if k == key]
        return f"{p.host} ({p.cpu_model}, {p.cpus})" if key == "attr.host" else str(getattr(p, facts[0]))
    return "; ".join(t(lang, "gate.differs_fact", fact=t(lang, key), a=value(base, key), b=value(cand, key))
                     for key in named)


def summary_lines(result: GateResult, lang: str) -> list[str]:
    """The console's header lines: outcome and counts, the sides, how it decided, the noise, what differs
    between the sides, what could not be checked."""
    lines = [t(lang, "gate.outcome", outcome=t(lang, f"gate.o.{result.outcome}"), counts=counts(result, lang)),
             t(lang, "gate.sides", base=", ".join(result.base_runs), cand=", ".join(result.cand_runs)),
             how(result, lang), t(lang, "gate.noise", text=noise_text(result, lang))]
    differs = differences_text(result, lang)
    lines += [t(lang, "gate.differs", facts=differs)] if differs else []
    unchecked = sum(f.host_unchecked for f in result.figures)
    return lines + ([t(lang, "gate.host_unknown", n=unchecked)] if unchecked else [])


def shown(result: GateResult) -> list[FigureResult]:
    """The figures the console lists: those that did not pass plainly (regressed first), at most SHOWN_ROWS."""
    order = {"regressed": 0, "refused": 1, "inconclusive": 2, "improved": 3}
    return sorted((f for f in result.figures if f.decision in order), key=lambda f: order[f.decision])[:SHOWN_ROWS]


def section(result: GateResult, lang: str) -> list[Block]:
    """The gate's report section: what it decided and how, then every figure."""
    out: list[Block] = [Para(line) for line in summary_lines(result, lang)]
    out.append(Table(headers(lang), [row(f, lang) for f in result.figures], role="gate", left=2))
    out.append(Para(t(lang, "gate.note")))
    if any(any(r.refuses for r in f.reasons) for f in result.figures):
        out.append(Para(refused_note(lang)))
    return out


def document(result: GateResult, lang: str, version: str) -> Document:
    doc = Document(t(lang, "gate.title", base=", ".join(result.base_runs), cand=", ".join(result.cand_runs)), lang)
    doc.add(*section(result, lang), Para(t(lang, "note.rendered", version=version)))
    return doc
