"""A run's report document, section by section (rendered by markdown.py / html.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from tokenbench.judge import tune as judged_tune
from tokenbench.judge.bottleneck import rooflines
from tokenbench.judge.cells import label_of, measured, ok_repeats, pair_of, state_of, value_of
from tokenbench.judge.frontier import run_members
from tokenbench.judge.history import History
from tokenbench.judge.intervals import Book, Judging
from tokenbench.judge.plausibility import ConfigCheck
from tokenbench.judge.views import RunData, spread_of
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.cell_summary import Metric
from tokenbench.report import (
    accelerator,
    capacity,
    configcmp,
    cost,
    frontier,
    headline,
    history,
    interval_tables,
    jobs,
    marks,
    phases,
    plots,
    sections,
    sessions,
    slices,
    tune,
)
from tokenbench.report.document import Block, Cell, Document, Para, Table, num, pct
from tokenbench.report.explain import plausibility_blocks
from tokenbench.report.i18n import t
from tokenbench.store.rows import CellRow, SampleRow

TEXT_HEAD = 120      # characters of model output shown per sample request
# the metric definitions every report shows, in order (texts `def.NAME` and its formula `def.NAME.f`)
DEFINITIONS = ("ttft", "tpot", "itl", "e2e", "duration", "req_s", "out_tps", "total_tps", "percentile", "kv",
               "repeat_cv", "roofline", "per_user", "per_device", "per_joule")


@dataclass(frozen=True, kw_only=True)
class Context:
    """What every section reads: the run, the language, its judged intervals and rooflines."""

    run: RunData
    lang: str
    checks: list[ConfigCheck]
    book: Book
    roofs: dict
    num: sections.Numberer
    judging: Judging
    series: History | None = None      # the history of the run's series up to it (judge/history.of_run)


@dataclass(frozen=True)
class Section:
    """One numbered section of the report: its heading (an i18n key) and its blocks, [] when the run has
    nothing to show there (the section is then left out). Adding a section is one line in SECTIONS."""

    heading: str
    blocks: Callable[[Context], list[Block]]


def _cells(make: Callable[[Context], list[Block]]) -> Callable[[Context], list[Block]]:
    """A section about cells' figures: nothing where no cell measured one (every table would hold only dashes;
    the report opens with why, and the failures section gives each cell's)."""
    return lambda x: make(x) if measured(x.run.cells) else []


def _stored(make: Callable[[Context], list[Block]]) -> Callable[[Context], list[Block]]:
    """A section about the cells stored, measured or not (their failures, their timeline)."""
    return lambda x: make(x) if x.run.cells else []


def _tune(x: Context) -> list[Block]:
    """A tune's rankings behind its answer (nothing for any other run; the answer opens the report)."""
    tuning = judged_tune.of_run(x.run.spec, x.run.configs, x.run.searches)
    return [] if tuning is None else tune.section(tuning, x.lang, x.num)


SECTIONS: tuple[Section, ...] = (
    Section("h.tune", _tune),
    Section("h.capacity", lambda x: capacity.section(x.run, x.lang, x.num, x.roofs) if x.run.searches else []),
    Section("h.baseline", _cells(lambda x: sections.baseline(x.run, x.lang, x.book))),
    Section("h.scaling", _cells(lambda x: _scaling(x.run, x.lang, x.num, x.roofs, x.book))),
    Section("h.sessions", lambda x: sessions.section(x.run, x.lang, x.num.sub) if sessions.session_cells(x.run) else []),
    Section("h.jobs", lambda x: jobs.section(x.run, x.book, x.lang, x.num.sub)),
    Section("h.phases", lambda x: phases.section(x.run, x.lang) if phases.cells_with(x.run) else []),
    Section("h.intervals", _cells(lambda x: interval_tables.section(x.book, x.lang, x.num))),
    Section("h.matrix", _cells(lambda x: _matrix(x.run, x.lang, x.num))),
    Section("h.configcmp", _cells(lambda x: _configcmp(x.run, x.lang, x.num, x.book, x.judging))),
    Section("h.frontier", _cells(lambda x: frontier.blocks(run_members(x.run, x.book), x.lang, x.num))),
    Section("h.repeats", lambda x: repeatability(x.run, x.lang) if x.run.has_repeats() else []),
    Section("h.series", lambda x: history.blocks(x.series, x.lang) if x.series is not None else []),
    Section("h.failures", _stored(lambda x: failures(x.run, x.lang))),
    Section("h.timeline", _cells(lambda x: timeline(x.run, x.lang))),
    Section("h.monitor", lambda x: monitor(x.run, x.lang) if x.run.samples else []),
    Section("h.accel", lambda x: accelerator.section(x.run, x.lang, x.num) if accelerator.shown(x.run) else []),
    Section("h.cost", lambda x: cost.section(x.run, x.lang) if cost.shown(x.run) else []),
    Section("h.slices", _cells(lambda x: slices.section(x.run, x.lang))),
    Section("h.plausibility", lambda x: plausibility_blocks(x.checks, x.lang)
            if any(c.roofline is not None for c in x.checks) else []),
    Section("h.environment", lambda x: _environment(x.run, x.lang, x.num)),
    Section("h.definitions", lambda x: definitions(x.lang, sections.server_columns(x.run.cells))),
)


def build_report(run: RunData, lang: str, checks: list[ConfigCheck], version: str,
                 min_effect: float = u.MIN_EFFECT, series: History | None = None) -> Document:
    """The headline first (what was run, every cell's figures with their marks), then each section that
    has something to show, environment and definitions last. `series`: the history of the run's series up to
    it, shown as a section of its own."""
    doc = Document(t(lang, "title.report", run=run.id), lang)
    judging = Judging(min_effect=min_effect, allow_client_lag=bool(run.spec.get("allow_client_lag")))
    x = Context(run=run, lang=lang, checks=checks, book=Book(run), roofs=rooflines(checks), num=sections.Numberer(),
                judging=judging, series=series)
    tuning = judged_tune.of_run(run.spec, run.configs, run.searches)
    doc.add(*(tune.answer(tuning, lang) if tuning is not None else []), *headline.blocks(run, lang))
    for section in SECTIONS:
        x.num.section(doc, t(lang, section.heading), partial(section.blocks, x))
    doc.add(*_notes(run, lang), Para(t(lang, "note.rendered", version=version)))
    return doc


def _environment(run: RunData, lang: str, num_: sections.Numberer) -> list[Block]:
    return [*sections.environment(run, lang), num_.sub(t(lang, "h.configs")), *sections.configs(run, lang)]


def _drawn(run: RunData, cfg: str, pair: tuple[int, int], lang: str) -> list[Block]:
    """The length distribution the pair's cells drew each request's lengths from (docs/workloads.md)."""
    found = sorted({c.summary.facts.length_distribution for c in run.cells_of(cfg)
                    if pair_of(c) == pair and c.summary.facts and c.summary.facts.length_distribution})
    return [Para(t(lang, "note.lengths_drawn", distribution="; ".join(found)))] if found else []


def _scaling(run: RunData, lang: str, num_: sections.Numberer, roofs: dict, book: Book) -> list[Block]:
    out: list[Block] = []
    for cfg in run.config_names():
        for pair in run.pairs(cfg):
            out += [num_.sub(t(lang, "h.scaling_pair", config=cfg, input=pair[0], output=pair[1])),
                    *_drawn(run, cfg, pair, lang), sections.scaling_table(run, cfg, pair, lang, roofs.get(cfg), book)]
    if sections.any_over(run):
        out.append(Para(t(lang, "note.over_capacity")))
    out += _eager_notes(run, lang)
    figs = plots.load_figures(run, lang)
    out += figs
    if figs:
        out.append(Para(t(lang, "note.band")))
    if figs and plots.any_hollow(run):
        out.append(Para(t(lang, "mark.hollow")))
    return out


def _eager_notes(run: RunData, lang: str) -> list[Block]:
    """What `^` means, with where each marked config's captured sizes came from."""
    marked = {c.config for c in run.cells if c.eager}
    return [Para(t(lang, "note.eager", source=f"{cfg.name}: {cfg.facts.graphs.source}"))
            for cfg in run.configs if cfg.name in marked and cfg.facts.graphs is not None]


def _matrix(run: RunData, lang: str, num_: sections.Numberer) -> list[Block]:
    """Per config, output tok/s by pair and load: left out where every config has one cell (the headline
    already shows it)."""
    if all(len(run.cells_of(cfg)) < 2 for cfg in run.config_names()):
        return []
    out: list[Block] = []
    for cfg in run.config_names():
        out += [num_.sub(t(lang, "h.matrix_config", config=cfg)), sections.matrix(run, cfg, lang)]
    if sections.any_over(run):
        out.append(Para(t(lang, "note.over_capacity")))
    return out


def _configcmp(run: RunData, lang: str, num_: sections.Numberer, book: Book, judging: Judging) -> list[Block]:
    names = run.config_names()
    if len(names) < 2:
        return []
    out: list[Block] = []
    for other in names[1:]:
        table = configcmp.config_pair_table(run, names[0], other, lang, book, judging)
        if table:
            out += [num_.sub(t(lang, "h.configcmp_pair", other=other, base=names[0])), table]
    if out:
        out.append(Para(t(lang, "note.verdicts", floor=f"{100 * judging.min_effect:g}%")))
    return out or [Para(t(lang, "note.no_common"))]


# repeats -----------------------------------------------------------------------------------------
NOISY_CV = 0.05     # a repeat CV above this is marked
OUTPUT = Metric("output_throughput")


def _cv(spread) -> str:
    if spread is None or spread.cv is None:
        return "-"
    return pct(spread.cv) + (" †" if spread.cv > NOISY_CV else "")


def repeatability(run: RunData, lang: str) -> list[Block]:
    head = [t(lang, k) for k in ("col.config", "col.cell", "col.repeats", "col.out_tps", "col.range_out_tps",
                                  "col.cv_out_tps", "col.cv_ttft", "col.cv_tpot")]
    rows: list[list[str | Cell]] = []
    used: list[CellRow] = []
    for cfg in run.config_names():
        for c in run.cells_of(cfg):
            if not c.repeats:
                continue
            used.append(c)
            out = spread_of(c, OUTPUT)
            rows.append([cfg, label_of(c), f"{len(ok_repeats(c))}/{len(c.repeats)}",
                         marks.fig(c, num(value_of(c, OUTPUT)), over=False, key=OUTPUT.key),
                         f"{num(out.lo)} – {num(out.hi)}" if out else "-", _cv(out),
                         _cv(spread_of(c, Metric("ttft"))), _cv(spread_of(c, Metric("tpot")))])
    table = Table(head, rows, role="repeats", left=3, footnotes=marks.footnotes(used, lang, keys=[OUTPUT.key]))
    return [table, Para(t(lang, "note.repeats_cv", limit=pct(NOISY_CV, 0)))]


# failures, timeline, monitor, definitions ----------------------------------------------------------
def failures(run: RunData, lang: str) -> list[Block]:
    rows = []
    for cfg in run.config_names():
        for c in run.cells_of(cfg):
            for kind, n in sorted(c.summary.failed_by_kind.items()):
                rows.append([cfg, label_of(c), kind, num(n)])
    out: list[Block] = []
    if rows:
        head = [t(lang, k) for k in ("col.config", "col.cell", "col.kind", "col.count")]
        out.append(Table(head, rows, left=3))
    bad = [c for c in run.cells if not state_of(c).ok]
    if bad:
        out.append(Para(t(lang, "note.failed_cells")))
        out.append(Table([t(lang, k) for k in ("col.config", "col.cell", "col.status", "col.message")],
                         [[c.config, label_of(c), f"{state_of(c).mark} {t(lang, f'mark.name.{state_of(c).kind}')}",
                           c.message[:300] or state_of(c).reason] for c in bad], role="notok", left=4))
    return out


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= TEXT_HEAD else flat[:TEXT_HEAD] + "…"


def timeline(run: RunData, lang: str) -> list[Block]:
    tl = run.timeline
    fig = plots.timeline_figure(tl, lang) if tl else None
    if tl is None or fig is None:
        return []
    out: list[Block] = [Para(t(lang, "note.timeline_cell", cell=label_of(tl.cell), config=tl.cell.config)), fig]
    samples = [r for r in tl.requests if r.text][:3]
    if samples:
        out.append(Para(t(lang, "note.sample_outputs", n=TEXT_HEAD)))
        out.append(Table([t(lang, "col.idx"), t(lang, "col.tokens"), t(lang, "col.text")],
                         [[f"#{r.index}", num(r.output_tokens), _one_line(r.text)] for r in samples],
                         role="samples", left=3))
    return out


def _peak(samples: list[SampleRow], name: str, scale: float = 1.0) -> float | None:
    vals = [s.value * scale for s in samples if s.name == name]
    return max(vals) if vals else None


def monitor(run: RunData, lang: str) -> list[Block]:
    head = [t(lang, k) for k in ("col.config", "col.cell", "col.peak_running", "col.peak_waiting", "col.peak_kv")]
    rows = []
    for c in run.cells:
        s = run.samples.get(c.id)
        if s:
            kv = _peak(s, "kv_usage", 100.0)
            rows.append([c.config, label_of(c), num(_peak(s, "running"), 0), num(_peak(s, "waiting"), 0),
                         "-" if kv is None else f"{kv:.1f}%"])
    out: list[Block] = [Table(head, rows, left=2)]
    chosen = run.timeline.cell if run.timeline and run.timeline.cell.id in run.samples else None
    if chosen is None:
        chosen = next(c for c in run.cells if c.id == max(run.samples, key=lambda k: len(run.samples[k])))
    fig = plots.monitor_figure(chosen, run.samples[chosen.id], lang)
    if fig:
        out += [Para(t(lang, "note.monitor_cell", cell=label_of(chosen), config=chosen.config)), fig]
    return out


def definitions(lang: str, extra: list[str] | None = None) -> list[Block]:
    """Every metric's formula; `extra`: those of the server-counter columns the run shows."""
    rows = [[t(lang, f"def.{k}"), t(lang, f"def.{k}.f")] for k in (*DEFINITIONS, *(extra or []))]
    table = Table([t(lang, "col.metric"), t(lang, "col.formula")], rows, left=2)
    return [table, Para(marks.legend(lang)), Para(t(lang, "note.definitions_source"))]


def _notes(run: RunData, lang: str) -> list[Block]:
    out: list[Block] = []
    if run.has_repeats():
        out.append(Para(t(lang, "note.repeats")))
    derived = Counter(d for c in run.cells for d in c.summary.derived or [])
    if derived:
        out.append(Para(t(lang, "note.derived", what="; ".join(sorted(derived)))))
    return out
