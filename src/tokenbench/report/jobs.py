"""The report's jobs section (a run with sessions or trajectories cells): per server config and lengths, a row
per cell of its jobs (complete of started, completion time p50 and p95 and the worst turn's TTFT and TPOT p95,
each with its 95 % interval; where a job's time went: the server, the tools, the client; turns per job; the
measured window's end and the turns sent after it), then the corpus each trajectories cell replayed, and the
plot of job completion time against concurrent agents (and agents started per second). Rendering only: the
figures were computed when the cell ran (metrics/summary.job_figures), their intervals are the interval book's
(judge/intervals.Book, from the jobs each repeat stored); docs/metrics.md, "Jobs"."""

from __future__ import annotations

from tokenbench.judge.cells import label_of, load_label_of, pair_of
from tokenbench.judge.intervals import Book
from tokenbench.judge.views import RunData
from tokenbench.metrics.cell_summary import Metric
from tokenbench.metrics.summary_groups import JobFigures, SessionFigures, WorkloadFacts
from tokenbench.report import load_plots
from tokenbench.report.document import Block, Figure, Para, Table, num, pct
from tokenbench.report.i18n import t
from tokenbench.report.load_plots import Plot, Source
from tokenbench.report.marks import fig, footnotes
from tokenbench.report.verdicts import figure, unreliable_in
from tokenbench.store.rows import CellRow

# the job figures the table shows, each with its interval (and its column's key)
SHOWN = (("col.jct_p50", Metric("job", "p50")), ("col.jct_p95", Metric("job", "p95")),
         ("col.job_ttft_p95", Metric("job_ttft", "p95")), ("col.job_tpot_p95", Metric("job_tpot", "p95")))
JOB_PLOTS = [Plot("jct", title="jct", ylabel="axis.jct_ms", metric=Metric("job", "p50"), more=(Metric("job", "p95"),),
                  intervals=True)]
P95_JOBS = 59          # complete jobs a p95's Woodruff interval needs for its largest to bound it
SKIPPED_SHOWN = 5      # skipped trajectories (or split chains) named, the rest counted


def job_cells(run: RunData) -> list[CellRow]:
    """The cells with jobs (sessions and trajectories cells), repeats merged, config by config."""
    return [c for cfg in run.config_names() for c in run.cells_of(cfg) if c.summary.jobs is not None]


def _jobs(c: CellRow) -> JobFigures:
    return c.summary.jobs or JobFigures()


def _split(j: JobFigures) -> str:
    """'99.7% / 0.0% / 0.3%': the server's, the tools' and the client's shares of a job's completion time."""
    if j.server_share is None or j.tool_share is None or j.client_share is None:
        return "-"
    return f"{pct(j.server_share)} / {pct(j.tool_share)} / {pct(j.client_share)}"


def _turns(j: JobFigures) -> str:
    return "-" if j.turns_mean is None else f"{num(j.turns_mean)} ({num(j.turns_max, 0)})"


def _window(s: SessionFigures | None, lang: str) -> str:
    """Where the measured window ended and the turns sent after it (stored, in no request figure)."""
    if s is None or s.window is None:
        return "-"
    if s.window_end_s is None:
        return s.window
    return t(lang, "job.window", rule=s.window, end=f"{s.window_end_s:.1f}", after=num(s.outside_requests or 0, 0))


def _row(book: Book, c: CellRow, lang: str) -> list:
    j = _jobs(c)
    return [fig(c, load_label_of(c)), fig(c, f"{num(j.complete, 0)}/{num(j.started, 0)}", over=False),
            *[figure(book, c, m) for _, m in SHOWN], fig(c, _split(j), over=False), fig(c, _turns(j), over=False),
            fig(c, _window(c.summary.sessions, lang), over=False)]


def table(book: Book, cells: list[CellRow], lang: str) -> Table:
    """One row per cell: its jobs, their figures with their 95 % intervals, where their time went."""
    head = [t(lang, k) for k in ("col.load", "col.jobs", *(k for k, _ in SHOWN), "col.job_split", "col.job_turns",
                                  "col.job_window")]
    rows = [_row(book, c, lang) for c in cells]
    notes = footnotes(cells, lang, keys=[m.key for _, m in SHOWN])
    if unreliable_in(x for r in rows for x in r):
        notes.append(t(lang, "note.jobs_unreliable", n=P95_JOBS))
    return Table(head, rows, role="jobs", left=1, footnotes=notes)


def _named(found: dict[str, str] | None) -> str:
    """'id: cause; id: cause' for the first few, the rest counted."""
    items = sorted((found or {}).items())
    shown = "; ".join(f"{k}: {v}" for k, v in items[:SKIPPED_SHOWN])
    return shown + (f"; +{len(items) - SKIPPED_SHOWN}" if len(items) > SKIPPED_SHOWN else "")


def corpus_text(f: WorkloadFacts, lang: str) -> str | None:
    """A trajectories cell's corpus: its format and hash, what was replayed of what was read, what was skipped
    (with each cause) or split, and the passes over it; None for a cell that replayed none."""
    if f.corpus_sha256 is None:
        return None
    text = t(lang, "job.corpus", format=f.corpus_format or "-", sha=f.corpus_sha256[:16],
             replayed=num(f.corpus_replayed, 0), read=num(f.corpus_trajectories, 0), turns=num(f.corpus_turns, 0))
    if f.corpus_skipped:
        text += t(lang, "job.skipped", n=len(f.corpus_skipped), which=_named(f.corpus_skipped))
    if f.corpus_chains:
        text += t(lang, "job.chains", n=len(f.corpus_chains), which=_named(f.corpus_chains))
    if f.corpus_passes is not None:
        text += t(lang, "job.passes", passes=f"{f.corpus_passes:g}")
    return text


def corpus_notes(cells: list[CellRow], lang: str) -> list[Block]:
    """The corpus each trajectories cell replayed: once when every cell replayed the same, else per cell."""
    texts = {c.id: text for c in cells if c.summary.facts is not None
             and (text := corpus_text(c.summary.facts, lang)) is not None}
    if not texts:
        return []
    if len(set(texts.values())) == 1 and len(texts) == len(cells):
        return [Para(t(lang, "job.corpus_all", corpus=next(iter(texts.values()))))]
    return [Para(t(lang, "job.corpus_cell", cell=f"{c.config} {label_of(c)}", corpus=texts[c.id]))
            for c in cells if c.id in texts]


def figures(run: RunData, book: Book, lang: str) -> list[Figure]:
    """Job completion time (p50 and p95, each with its 95 % interval shaded) against each session axis the
    cells have: concurrent agents (users), agents started per second (session rate)."""
    many = len(run.config_names()) > 1
    sources = [Source(f"{cfg} {p[0]}/{p[1]}" if many else f"{p[0]}/{p[1]}", cfg,
                      [c for c in job_cells(run) if c.config == cfg and pair_of(c) == p], book)
               for cfg in run.config_names() for p in run.pairs(cfg)]
    return load_plots.figures([s for s in sources if s.cells], JOB_PLOTS, lang)


def section(run: RunData, book: Book, lang: str, sub) -> list[Block]:
    """The whole section (`sub` numbers the subheadings); empty for a run without cells with jobs."""
    cells = job_cells(run)
    if not cells:
        return []
    out: list[Block] = [Para(t(lang, "job.intro"))]
    for cfg in run.config_names():
        for pair in run.pairs(cfg):
            mine = [c for c in cells if c.config == cfg and pair_of(c) == pair]
            if mine:
                out += [sub(t(lang, "h.jobs_pair", config=cfg, input=pair[0], output=pair[1])), table(book, mine, lang),
                        *corpus_notes(mine, lang)]
    plots = figures(run, book, lang)
    return out + plots + ([Para(t(lang, "note.jct_plot"))] if plots else [])
