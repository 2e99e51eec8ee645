"""`tokenbench tune`'s judgement in words (judge/tune.py decides; this says it): the recommended config with
its ready `deploy` command and its confirmation on a fresh launch, the gain over the baseline with its
interval, the binding SLO, each tier's ranking with a verdict per config, the configs that did not start and
those whose engine died under load, each with its cause, and the frontier. The report's section and the
console's lines come from the same sentences, in both languages; the answer (`headline`) comes first in both."""

from __future__ import annotations

import shlex

from tokenbench.judge import tune as judged
from tokenbench.judge.tune import Confirmation, Gain, Ranking, Standing, Tuning
from tokenbench.logs.launch import Death, LaunchFailure
from tokenbench.metrics.capacity import Answer
from tokenbench.report.document import Block, Heading, Para, Table, signed_pct
from tokenbench.report.i18n import has, t
from tokenbench.report.sections import Numberer
from tokenbench.report.verdicts import UNRELIABLE


def load_text(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def interval(a: Answer) -> str:
    return f"[{load_text(a.lo)}{UNRELIABLE * a.lo_unreliable}, {load_text(a.hi)}{UNRELIABLE * a.hi_unreliable}]"


STOPPED = ("outranked", "time", "budget", "died")    # a search stopped before a load met the tier: "below" its failure


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
    if s.verdict == "died" and s.deaths:
        return t(lang, "tune.verdict.died", cause=cause_text(s.deaths[-1].failure, lang))
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
            "base_died" if base is not None and base.verdict == "died" else \
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


def death_text(d: Death, lang: str) -> str:
    """One death: the launch and cell, the cause, and the line of the log that tells it (or the exit code)."""
    f = d.failure
    seen = f.evidence or (t(lang, "tune.exit_code", code=f.exit_code) if f.exit_code is not None else "-")
    return t(lang, "tune.death", launch=d.launch if d.launch is not None else "?", cell=d.cell or "-",
             cause=cause_text(f, lang), code=code_text(f, lang), evidence=seen)


def confirmation_text(c: Confirmation, tier: str, unit: str, lang: str) -> str:
    """What came of one confirmation: the sustain cell's load, length and the first tier's reading there."""
    if c.outcome == "died" and c.death is not None:
        return t(lang, "tune.confirm.died", config=c.config, death=death_text(c.death, lang))
    v = c.verdict
    bind = v.binding if v is not None else None
    reading = t(lang, "tune.confirm.reading", limit=bind.limit.text, value=f"{bind.value:.4g}") \
        if bind is not None and bind.value is not None else "-"
    line = t(lang, f"tune.confirm.{c.outcome}", config=c.config, tier=tier, load=load_text(c.load), unit=unit,
             duration=f"{c.duration_s or 0:.0f}", reading=reading)
    notes = ([t(lang, "tune.confirm.drifted")] if c.drifted else []) + \
        ([t(lang, "tune.confirm.apart", limits=", ".join(c.apart))] if c.apart else [])
    return line + "".join(f" ({n})" for n in notes)


def confirmation_lines(tuning: Tuning, lang: str) -> list[str]:
    """Each confirmation tried, in order (a failed one first: the next-ranked config was confirmed in its
    place), and the recommended config's when it has none."""
    unit, tier = t(lang, f"unit.{tuning.dimension}"), tuning.rankings[0].tier.name
    out = [confirmation_text(c, tier, unit, lang) for c in tuning.confirmations]
    if tuning.recommended is not None and tuning.confirmed is None:
        out.append(t(lang, "tune.confirm.skipped" if not tuning.confirm else "tune.confirm.not_run",
                     config=tuning.recommended))
    return out


def empty_text(tuning: Tuning, lang: str) -> str:
    """Why there is nothing to recommend: no config started, none met the first tier, or none that met it held."""
    tier = tuning.rankings[0].tier.name if tuning.rankings else "-"
    why = tuning.empty or "none_met"
    if why == "none_started":
        return t(lang, "tune.none_started", causes=t(lang, "tune.undecided.sep").join(failure_causes(tuning, lang)))
    return t(lang, "tune.none" if why == "none_met" else "tune.none_held", tier=tier)


def failure_causes(tuning: Tuning, lang: str) -> list[str]:
    """The causes the configs did not start for, each once with the configs it covers."""
    by: dict[tuple[str, str], list[str]] = {}
    for s in failures(tuning):
        if s.launch is not None:
            by.setdefault((cause_text(s.launch, lang), s.launch.evidence or s.launch.message), []).append(s.config)
    return [t(lang, "tune.cause_configs", cause=cause, evidence=evidence, configs=", ".join(configs))
            for (cause, evidence), configs in by.items()]


def headline(tuning: Tuning, lang: str) -> list[str]:
    """The answer: the recommended config, its command, its confirmation on a fresh launch (and those that
    failed before it), the gain over the baseline, the binding SLO, the configs whose engine died, and what
    the budget left undecided; or why there is nothing to recommend."""
    r = tuning.rankings[0]
    a, unit = r.best_answer, t(lang, f"unit.{tuning.dimension}")
    open_ = [x for x in (undecided_text(x, lang) for x in tuning.rankings) if x]
    died = [t(lang, "tune.died_line", config=s.config, death=death_text(d, lang))
            for s in r.standings for d in s.deaths if not d.sustain]
    if r.best is None or a is None or a.capacity is None:
        return [empty_text(tuning, lang), *confirmation_lines(tuning, lang), *died, *open_]
    out = [t(lang, "tune.recommended", config=r.best, tier=r.tier.name, capacity=capacity_unit(a, unit, lang),
             interval=interval(a))]
    if tuning.recommendation is not None:
        out.append(t(lang, "tune.command", command=shlex.join(tuning.recommendation.argv)))
    out += confirmation_lines(tuning, lang)
    out.append(gain_text(r, tuning, lang))
    binding = binding_text(a, unit, lang)
    return out + ([binding] if binding else []) + died + open_


def reason_text(s: Standing, lang: str) -> str:
    return t(lang, f"cap.reason.{s.answer.reason}", budget=s.cells) if s.answer is not None else "-"


def standing_line(s: Standing, unit: str, lang: str) -> str:
    a = s.answer
    if a is None:
        return t(lang, "tune.config_unsearched", config=s.config, verdict=verdict_text(s, lang))
    return t(lang, "tune.config_line", config=s.config, capacity=capacity_unit(a, unit, lang),
             interval=interval(a), verdict=verdict_text(s, lang), reason=reason_text(s, lang), cells=s.cells)


def failures(tuning: Tuning) -> list[Standing]:
    """The configs whose last launch did not start."""
    return [s for s in tuning.rankings[0].standings if s.launch is not None and s.verdict == "failed"]


def console_lines(tuning: Tuning, lang: str = "en") -> list[str]:
    """What `tokenbench tune` prints when it ends: the rankings, the configs that did not start, then the
    answer last (where the eye lands when the command returns)."""
    unit = t(lang, f"unit.{tuning.dimension}")
    out = []
    for r in tuning.rankings:
        out.append(t(lang, "h.tune_tier", tier=r.tier.name, limits=r.tier.text))
        out += [f"  {standing_line(s, unit, lang)}" for s in r.standings]
    out += failed_lines(tuning, lang)
    out.append(t(lang, "tune.frontier", configs=", ".join(tuning.frontier) or "-"))
    return out + headline(tuning, lang)


def failed_lines(tuning: Tuning, lang: str) -> list[str]:
    """The configs that did not start, one line per cause and log line (with every config it covers)."""
    by: dict[tuple[str, str, str], list[str]] = {}
    for s in failures(tuning):
        if (f := s.launch) is not None:
            by.setdefault((cause_text(f, lang), code_text(f, lang), f.evidence or f.message), []).append(s.config)
    return [t(lang, "tune.failed_line", config=", ".join(configs), cause=cause, code=code, evidence=evidence)
            for (cause, code, evidence), configs in by.items()]


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


def deaths(tuning: Tuning) -> list[tuple[str, Death]]:
    return [(s.config, d) for s in tuning.rankings[0].standings for d in s.deaths]


def death_table(tuning: Tuning, lang: str) -> Table:
    """Every death of a config's engine after it started: the launch, the cell, whether it was confirming the
    config, the cause and the log's line that tells it, the exit code, the engine's log."""
    head = [t(lang, k) for k in ("col.config", "col.launch", "col.cell", "col.cause", "col.evidence",
                                 "col.exit_code", "col.log")]
    rows = [[config, str(d.launch or "-"), d.cell + (t(lang, "tune.during_confirmation") if d.sustain else ""),
             cause_text(d.failure, lang) + code_text(d.failure, lang), d.failure.evidence or "-",
             "-" if d.failure.exit_code is None else str(d.failure.exit_code), d.failure.log or "-"]
            for config, d in deaths(tuning)]
    return Table(head, rows, role="tune-died", left=3)


def answer(tuning: Tuning, lang: str) -> list[Block]:
    """The tune's answer, what its report opens with (before any table)."""
    return [Para(line) for line in headline(tuning, lang)]


def section(tuning: Tuning, lang: str, num_: Numberer) -> list[Block]:
    """The rankings behind the answer (which the report has shown first): how the tune decided, each tier's
    ranking, the configs that did not start and those whose engine died, and the frontier."""
    out: list[Block] = [Para(t(lang, "note.tune", dimension=t(lang, f"cap.dim.{tuning.dimension}"),
                               baseline=tuning.baseline))]
    for r in tuning.rankings:
        out += [num_.sub(t(lang, "h.tune_tier", tier=r.tier.name, limits=r.tier.text)), ranking_table(r, lang)]
    if failures(tuning):
        out += [Heading(t(lang, "h.tune_failed"), 4), failure_table(tuning, lang)]
    if deaths(tuning):
        out += [Heading(t(lang, "h.tune_died"), 4), death_table(tuning, lang)]
    return out + [Para(t(lang, "tune.frontier", configs=", ".join(tuning.frontier) or "-"))]
