"""What a running study shows: a bar per study and per cell, one line per finished cell, the target
line, then the matrix and the workload facts. Shared by bench, sweep, demo and agree."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console
from rich.markup import escape

from tokenbench.cli import console
from tokenbench.load.cell import CellProgress, CellResult
from tokenbench.load.target import Endpoint
from tokenbench.metrics.cell_summary import CellSummary, Metric
from tokenbench.metrics.summary_groups import ServerCounters, WorkloadFacts
from tokenbench.report import explain
from tokenbench.spec.slo import JobMetric
from tokenbench.store import commands
from tokenbench.store.rows import CellRow
from tokenbench.study import run as study
from tokenbench.study.plan import PlannedCell
from tokenbench.study.run import Outcome, ResultFile, Study
from tokenbench.study.settings import StudyEvents


def _facts(s: CellSummary) -> WorkloadFacts:
    return s.facts or WorkloadFacts()


def _counters(s: CellSummary) -> ServerCounters:
    return s.counters or ServerCounters()


WORKLOAD_FACTS: tuple[tuple[Callable[[CellSummary], object], str], ...] = (
    (lambda s: _facts(s).length_distribution, "lengths drawn per request: {}"),
    (lambda s: _facts(s).chat_template_overhead_tokens, "chat template overhead {} tokens"),
    (lambda s: _facts(s).image_tokens_per_image, "{:.1f} prompt tokens per image"),
    (lambda s: s.total_images, "{} images sent"), (lambda s: s.server_counted_images, "{} counted by the server"),
    (lambda s: s.cache_hit_rate, "prefix-cache hit rate {:.1%}"),
    (lambda s: _facts(s).trace_reuse_rate, "the trace's own reuse {:.1%}"),
    (lambda s: _counters(s).server_prefix_cache_hit_rate, "engine prefix-cache counters {:.1%}"),
    (lambda s: _counters(s).speculative, "speculative decoding: {}"),
    (lambda s: _facts(s).input_len_mean, "mean input {:.1f} tokens"),
    (lambda s: _facts(s).output_len_mean, "mean output {:.1f} tokens"))


def acceptance(summary: CellSummary) -> str:
    """' (spec acceptance 62.0%, 2.91 tokens/step)' after TPOT, when the server's counters gave it."""
    c = _counters(summary)
    rate, length = c.spec_acceptance_rate, c.spec_mean_acceptance_length
    if rate is None and length is None:
        return ""
    parts = [f"{rate:.1%}" if rate is not None else None, f"{length:.2f} tokens/step" if length is not None else None]
    return f" (spec acceptance {', '.join(p for p in parts if p)})"


class Display:
    def __init__(self, bar, total: int | None, run_id: str) -> None:
        self.bar, self.run_id = bar, run_id
        self.overall = bar.add_task("cells", total=total)
        self.cell_task = None
        self.results: list[CellResult] = []

    def events(self) -> StudyEvents:
        return StudyEvents(log=lambda m: self.bar.console.print(m, markup=False, highlight=False), cell_started=self.started,
                           cell_progress=self.progress, cell_done=self.done, target_ready=self.target,
                           cell_stored=self.stored)

    def stored(self, cell: PlannedCell, row: CellRow, result: CellResult) -> None:
        """Kept for the workload lines, with the summary as stored (the server's counters included)."""
        self.results.append(result)

    def target(self, t: Endpoint, facts: dict) -> None:
        self.bar.console.print(f"[bold]tokenbench[/] {t.base_url} model={escape(t.model)} "
                               f"vocab={t.vocab.size} ({escape(t.vocab.source)}) run={self.run_id}")

    def started(self, cell: PlannedCell) -> None:
        if self.cell_task is not None:
            self.bar.remove_task(self.cell_task)
        self.cell_task = self.bar.add_task(f"  {cell.config.name} {cell.key}", total=None)

    def progress(self, cell: PlannedCell, p: CellProgress) -> None:
        live = p.line()
        self.bar.update(self.cell_task, description=f"  {cell.config.name} {cell.key} {p.phase}"
                        + (f" [{p.done:,} done, {live}]" if live else ""), completed=p.done, total=p.total)

    def done(self, cell: PlannedCell, row: CellRow) -> None:
        self.bar.advance(self.overall)
        s = row.summary
        star = "*" if row.over_capacity else ""
        if s.monitor is not None and s.monitor.queue_check:
            self.bar.console.print(f"  note: {s.monitor.queue_check}")
        v = console.state(row.status, row.message, s)
        status = f"{v.mark} {row.status}" if v.mark else row.status
        self.bar.console.print(f"{cell.config.name} {cell.key}{star} {status}: "
                               f"{console.figure(s, 'output_throughput', v)} out tok/s, "
                               f"TTFT {console.figure(s, 'mean_ttft_ms', v)} ms, TPOT {console.figure(s, 'mean_tpot_ms', v)} ms"
                               + acceptance(s)
                               + (f" ({escape(row.message)})" if row.message else ""))


def run(planned: Study, files: Sequence[ResultFile], quiet: bool = False) -> tuple[Outcome, Display]:
    """Execute the study with progress bars (`quiet`: none, vLLM's --disable-tqdm; each finished cell is
    still one line); an interruption says how to resume."""
    with console.progress(disable=quiet) as bar:
        display = Display(bar, study.pending_count(planned), planned.run_id)
        try:
            return study.execute(planned, display.events(), files), display
        except KeyboardInterrupt:
            advice = commands.resume_advice(planned.store, planned.settings.kind, planned.run_id)
            console.err.print(f"interrupted: {advice}", markup=False, highlight=False, soft_wrap=True)  # one line, to paste
            raise


def _phase_lines(key: str, s: CellSummary) -> list[str]:
    """Where the cell's time went, when the server said (report/phases.py, imported only then: the run
    model it compares with is not on a cell's path)."""
    if s.phases is None and s.server_means is None:
        return []
    from tokenbench.report import phases
    return phases.console_lines(key, s)


def workload_lines(r: CellResult) -> list[str]:
    """What the table does not show: template/image overheads, cache hits, dataset means, the rate an open
    loop sent at (and why it is off the asked one), a stream tail that matters, answers ended early, notes."""
    shown = [(v, f) for get, f in WORKLOAD_FACTS if (v := get(r.summary)) is not None]
    if r.load.arrival == "trace" and r.summary.p99_queue_ms is not None:
        shown.append((r.summary.p99_queue_ms, "send lateness p99 {:.2f} ms"))
    facts = ", ".join(f.format(v) for v, f in shown)
    told = [explain.send_note(r.key, r.summary) or explain.send_line(r.key, r.summary),
            explain.schedule_note(r.key, r.summary), explain.tail_note(r.key, r.summary),
            explain.delivery_note(r.key, r.summary), explain.early_note(r.key, r.summary)]
    turns = [line for line in (_by_turn(r.summary), _jobs(r.summary)) if line]
    return ([f"{r.key}: {facts}"] if facts else []) + [f"{r.key}: {line}" for line in turns] + \
        [line for line in told if line] + _phase_lines(r.key, r.summary) + [f"{r.key}: {n}" for n in r.notes]


def _rates(values: list[float | None] | None) -> str:
    return ", ".join("-" if v is None else f"{v:.0%}" for v in values or [])


def _by_turn(s: CellSummary) -> str:
    """A sessions cell: its sessions (a trajectories cell's jobs say it), its mean TTFT and hit rate by turn, the
    theoretical hit beside it (the report has the intervals), and where a window that ends early ended."""
    f = s.sessions
    if f is None:
        return ""
    ttft = ", ".join("-" if v is None else f"{v:.1f}" for v in f.turn_ttft_mean_ms or [])
    hits, theory = _rates(f.turn_hit_rate), _rates(f.turn_theory_hit_rate)
    window = ("" if f.window_end_s is None or (f.window == "all" and not f.outside_requests) else
              f"; window {f.window} ended at {f.window_end_s:.1f} s, {f.outside_requests or 0} turns sent after it"
              + (" (stored, in the jobs, in no request figure)" if f.outside_requests else ""))
    told = "" if s.jobs is not None and s.jobs.complete else f"sessions {f.completed} of {f.started} completed; "
    return (f"{told}by turn: TTFT mean {ttft} ms"
            + (f"; hit rate {hits}" if hits.strip("-, ") else "")
            + (f" (theory {theory}, {f.cache_block_size}-token blocks)" if theory else "") + window)


def corpus_line(s: CellSummary) -> str | None:
    """A trajectories cell's corpus: its format and hash, what was replayed, what was skipped, how many passes."""
    f = _facts(s)
    if f.corpus_sha256 is None:
        return None
    passes = f", {f.corpus_passes:g} pass{'es' * (f.corpus_passes != 1)}" if f.corpus_passes is not None else ""
    named = sorted(f.corpus_skipped or {})
    skipped = f", {len(named)} skipped ({', '.join(named[:3])}{', ...' * (len(named) > 3)})" if named else ""
    return (f"corpus {f.corpus_format} sha256 {f.corpus_sha256[:16]}: {f.corpus_replayed} of {f.corpus_trajectories} "
            f"trajectories replayed ({f.corpus_turns} turns){skipped}{passes}")


def _stat(s: CellSummary, name: JobMetric, stat: str) -> str:
    """'392.7 [389.6, 393.3]◊': a job figure with its interval, `◊` where an end is no 95 % bound, `~` where the
    client's delays could have moved its turns' figure (metrics/summary_groups.JOB_MARK_KEYS)."""
    x = s.jobs.stat(name, stat) if s.jobs is not None else None
    if x is None:
        return "-"
    moved = "~" if s.figures is not None and s.figures.mark(Metric(name, stat).key) else ""   # type: ignore[arg-type]
    return f"{x.value:.1f}{moved} [{x.lo:.1f}, {x.hi:.1f}]{'◊' * x.unreliable}"


JOB_MARKS = ("◊ an interval's end that is no 95 % bound (a p95 needs 59 complete jobs); ~ the client's delays "
             "could have moved the figure of the turns it is made of")


def _jobs(s: CellSummary) -> str:
    """A sessions cell's jobs: how many completed, their completion time and worst turns (95 % intervals), and
    where their time went."""
    j = s.jobs
    if j is None or not j.complete:
        return ""
    shares = (f"; server {j.server_share:.0%}, tools {j.tool_share:.0%}, client {j.client_share:.1%} of it"
              if j.server_share is not None and j.tool_share is not None and j.client_share is not None else "")
    return (f"jobs {j.complete} of {j.started} complete ({j.turns_mean:.1f} turns each): completion ms p50 "
            f"{_stat(s, 'job', 'p50')}, p95 {_stat(s, 'job', 'p95')}{shares}; worst turn TTFT p95 "
            f"{_stat(s, 'job_ttft', 'p95')} ms, TPOT p95 {_stat(s, 'job_tpot', 'p95')} ms")


TITLE = "results (ms, tokens/s; * = concurrency x (input+output) > KV capacity)"


def matrix(out: Outcome, title: str = TITLE, to: Console = console.out) -> None:
    many = len({c.config for c in out.cells}) > 1
    rows = [(f"{(c.config or '') + ' ' if many else ''}{c.key}{'*' if c.over_capacity else ''}"
             + (f" #{c.repeat + 1}" if c.repeat else ""), c.summary, c.status, c.message) for c in out.cells]
    to.print(console.cells_table(rows, title))
    for note in console.notes(rows):
        to.print(f"  {escape(note)}", highlight=False)
    for name, lines in out.capacity.items():
        for line in lines:
            to.print(f"{escape(name)}: {escape(line)}", highlight=False)


def report(out: Outcome, display: Display, locations: list[str], to: Console = console.out) -> None:
    """The results table and workload facts on `to` (stderr when stdout carries the JSON result), then
    where everything was kept, on stderr."""
    matrix(out, to=to)
    corpora = [corpus_line(r.summary) for r in display.results]
    shared = corpora[0] if corpora and all(c == corpora[0] for c in corpora) else None
    if shared is not None:
        to.print(f"every cell: {shared}", highlight=False)
    marked = False
    for r, corpus in zip(display.results, corpora, strict=True):
        lines = workload_lines(r)
        if corpus is not None and shared is None:
            lines.insert(0, f"{r.key}: {corpus}")
        for line in lines:
            to.print(line, highlight=False)
        jobs = _jobs(r.summary)
        marked = marked or "◊" in jobs or "~ [" in jobs
    if marked:
        to.print(f"jobs: {JOB_MARKS}", highlight=False)
    for where in locations:
        console.err.print(where, markup=False, highlight=False, soft_wrap=True)    # one line, to paste
