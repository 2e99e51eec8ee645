"""`tokenbench tune`'s judgement in words (judge/tune.py decides; this says it): the recommended config with
its ready `deploy` command, the gain over the baseline with its interval, the binding SLO, each tier's
ranking with a verdict per config, the configs that did not start with their cause, and the frontier. The
report's section and the console's lines come from the same sentences, in both languages."""

from __future__ import annotations

import shlex

from tokenbench.judge import tune as judged
from tokenbench.judge.tune import Gain, Ranking, Standing, Tuning
from tokenbench.logs.launch import LaunchFailure
from tokenbench.metrics.capacity import Answer
from tokenbench.report.document import Block, Heading, Para, Table, signed_pct
from tokenbench.report.i18n import has, t
from tokenbench.report.sections import Numberer
from tokenbench.report.verdicts import UNRELIABLE


def load_text(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def interval(a: Answer) -> str:
    return f"[{load_text(a.lo)}{UNRELIABLE * a.lo_unreliable}, {load_text(a.hi)}{UNRELIABLE * a.hi_unreliable}]"


STOPPED = ("outranked", "time", "budget")      # a search stopped before a load met the tier: "below" its failure


def capacity_unit(a: Answer | None, unit: str, lang: str) -> str:
    """The capacity with its unit ("none" stands alone)."""
    if a is None or (a.capacity is None and (a.fail_load is None or a.reason not in STOPPED)):
        return t(lang, "cap.none")
    return f"{capacity_text(a, lang)} {unit}"


def capacity_text(a: Answer | None, lang: str) -> str:
    if a is not None and a.capacity is None and a.fail_load is not None and a.reason in STOPPED:
        return t(lang, "tune.below", load=load_text(a.fail_load))
    if a is None or a.capacity is None:
        return t(lang, "cap.none")
    return t(lang, "cap.at_least", load=load_text(a.capacity)) if a.reason == "above_max" else load_text(a.capacity)


def cause_text(f: LaunchFailure, lang: str) -> str:
    return t(lang, f"cause.{f.cause}")


def meaning(code: str, lang: str) -> str:
    key = f"acl.{code}"
    return t(lang, key) if has(lang, key) else ""


def code_text(f: LaunchFailure, lang: str) -> str:
    return "" if f.code is None else t(lang, "tune.code", code=f.code, meaning=meaning(f.code, lang))


def verdict_text(s: Standing, lang: str) -> str:
    if s.verdict == "worse":
        return t(lang, "tune.verdict.worse", by=s.beaten_by)
    if s.verdict == "failed" and s.launch is not None:
        return t(lang, "tune.verdict.failed", cause=cause_text(s.launch, lang))
    if s.verdict == "not_run" and s.note:
        return f"{t(lang, 'tune.verdict.not_run')} ({s.note.removeprefix('not run: ')})"
    return t(lang, f"tune.verdict.{s.verdict}")


def _pct(x: float | None, lang: str) -> str:
    return t(lang, "tune.open") if x is None else signed_pct(x)


def gain_text(r: Ranking, tuning: Tuning, lang: str) -> str:
    base = r.of(tuning.baseline) if any(s.config == tuning.baseline for s in r.standings) else None
    g: Gain | None = r.gain
    if r.best == tuning.baseline:
        return t(lang, "tune.is_baseline")
    if g is None or g.value is None:
        why = "base_failed" if base is not None and base.verdict == "failed" else \
            "base_not_run" if base is None or base.answer is None else "base_zero"
        return t(lang, "tune.gain_none", baseline=tuning.baseline, why=t(lang, f"tune.gain_why.{why}"))
    return t(lang, "tune.gain", baseline=tuning.baseline, value=signed_pct(g.value), lo=_pct(g.lo, lang),
             hi=_pct(g.hi, lang))


def binding_text(a: Answer, unit: str, lang: str) -> str | None:
    b = a.binding
    if b is None or b.value is None:
        return None
    where = t(lang, "tune.inside" if b.margin >= 0 else "tune.outside", share=f"{abs(b.margin):.1%}")
    return t(lang, "tune.binding", limit=b.limit.text, load=load_text(a.fail_load), unit=unit, value=f"{b.value:.4g}",
             where=where)


def undecided_text(r: Ranking, lang: str) -> str | None:
    """What the budget left open under a tier, and how to decide it; None when nothing is."""
    u = judged.undecided(r)
    if u is None:
        return None
    parts = []
    if u.rivals:
        short = ", ".join(f"{c} ({t(lang, f'cap.reason.{why}', budget=r.of(c).cells)})" for c, why in u.short)
        parts.append(t(lang, "tune.undecided.rivals", best=r.best, rivals=", ".join(u.rivals), short=short))
    if u.not_run:
        parts.append(t(lang, "tune.undecided.not_run", configs=", ".join(u.not_run)))
    if u.budget:
        parts.append(t(lang, "tune.undecided.more"))
    return t(lang, "tune.undecided", tier=r.tier.name, what=t(lang, "tune.undecided.sep").join(parts))


def headline(tuning: Tuning, dimension: str, lang: str) -> list[str]:
    """The answer: the recommended config, its command, the gain over the baseline, the binding SLO, and what
    the budget left undecided."""
    r = tuning.rankings[0]
    a, unit = r.best_answer, t(lang, f"unit.{dimension}")
    open_ = [x for x in (undecided_text(x, lang) for x in tuning.rankings) if x]
    if r.best is None or a is None or a.capacity is None:
        return [t(lang, "tune.none", tier=r.tier.name), *open_]
    out = [t(lang, "tune.recommended", config=r.best, tier=r.tier.name, capacity=capacity_unit(a, unit, lang),
             interval=interval(a))]
    if tuning.recommendation is not None:
        out.append(t(lang, "tune.command", command=shlex.join(tuning.recommendation.argv)))
    out.append(gain_text(r, tuning, lang))
    binding = binding_text(a, unit, lang)
    return out + ([binding] if binding else []) + open_


def reason_text(s: Standing, lang: str) -> str:
    return t(lang, f"cap.reason.{s.answer.reason}", budget=s.cells) if s.answer is not None else "-"


def standing_line(s: Standing, unit: str, lang: str) -> str:
    a = s.answer
    if a is None:
        return t(lang, "tune.config_unsearched", config=s.config, verdict=verdict_text(s, lang))
    return t(lang, "tune.config_line", config=s.config, capacity=capacity_unit(a, unit, lang),
             interval=interval(a), verdict=verdict_text(s, lang), reason=reason_text(s, lang), cells=s.cells)


def failures(tuning: Tuning) -> list[Standing]:
    return [s for s in tuning.rankings[0].standings if s.launch is not None and s.answer is None]


def console_lines(tuning: Tuning, dimension: str, lang: str = "en") -> list[str]:
    """What `tokenbench tune` prints when it ends."""
    unit = t(lang, f"unit.{dimension}")
    out = []
    for r in tuning.rankings:
        out.append(t(lang, "h.tune_tier", tier=r.tier.name, limits=r.tier.text))
        out += [f"  {standing_line(s, unit, lang)}" for s in r.standings]
    out += [t(lang, "tune.failed_line", config=s.config, cause=cause_text(f, lang), code=code_text(f, lang),
              evidence=f.evidence or f.message) for s in failures(tuning) if (f := s.launch) is not None]
    out.append(t(lang, "tune.frontier", configs=", ".join(tuning.frontier) or "-"))
    return out + headline(tuning, dimension, lang)


def ranking_table(r: Ranking, lang: str) -> Table:
    head = [t(lang, k) for k in ("col.config", "col.flags", "col.capacity", "col.interval", "col.tune_verdict",
                                 "col.stopped", "col.cells")]
    rows = [[s.config, " ".join(f"{k}={v}" for k, v in s.overrides.items()) or "-", capacity_text(s.answer, lang),
             interval(s.answer) if s.answer is not None else "-", verdict_text(s, lang), reason_text(s, lang),
             str(s.cells)]
            for s in r.standings]
    return Table(head, rows, role="tune", left=2)


def failure_table(tuning: Tuning, lang: str) -> Table:
    head = [t(lang, k) for k in ("col.config", "col.cause", "col.evidence", "col.code", "col.log")]
    rows = [[s.config, cause_text(f, lang), f.evidence or f.message,
             "-" if f.code is None else f.code + meaning(f.code, lang), f.log or "-"]
            for s in failures(tuning) if (f := s.launch) is not None]
    return Table(head, rows, role="tune-failed", left=3)


def section(tuning: Tuning, dimension: str, lang: str, num_: Numberer) -> list[Block]:
    out: list[Block] = [Para(t(lang, "note.tune", dimension=t(lang, f"cap.dim.{dimension}"),
                               baseline=tuning.baseline))]
    out += [Para(line) for line in headline(tuning, dimension, lang)]
    for r in tuning.rankings:
        out += [num_.sub(t(lang, "h.tune_tier", tier=r.tier.name, limits=r.tier.text)), ranking_table(r, lang)]
    if failures(tuning):
        out += [Heading(t(lang, "h.tune_failed"), 4), failure_table(tuning, lang)]
    return out + [Para(t(lang, "tune.frontier", configs=", ".join(tuning.frontier) or "-"))]
