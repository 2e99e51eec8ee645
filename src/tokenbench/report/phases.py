"""The "where the time went" section of a run report: per cell, the phase ledger the server's spans gave (each
phase's mean, p50 and p99 over the joined requests; how many joined; the clock offset), stacked bars of the mean
time to the first token and to the last, and the server's own means from its /metrics histograms. Rendering
only: the ledger was computed when the cell ran (metrics/server.py) and stored in its summary."""

from __future__ import annotations

from tokenbench.judge import phases as jp
from tokenbench.judge.cells import label_of, load_of, ok_repeats, pair_of, state_of, x_of
from tokenbench.judge.fairness import Column
from tokenbench.judge.views import RunData
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.summary_groups import LAST_PHASES, PHASES, TTFT_PHASES, PhaseLedger, PhaseName
from tokenbench.report.document import Block, Cell, Figure, Para, Table, num
from tokenbench.report.i18n import t
from tokenbench.report.svg import PALETTE, Stack, stacked_chart
from tokenbench.store.rows import CellRow

MEANS = ("queue_ms", "prefill_ms", "decode_ms", "inference_ms", "ttft_ms", "e2e_ms")


def cells_with(run: RunData) -> list[CellRow]:
    """Every stored cell with a phase ledger or the server's means, each repeat on its own."""
    return [c for cfg in run.config_names() for c in run.all_cells_of(cfg)
            if c.summary.phases is not None or c.summary.server_means is not None]


def _stat(book: PhaseLedger, phase: PhaseName) -> str:
    mean, p50, p99 = (book.stat(phase, s) for s in ("mean", "p50", "p99"))
    return "-" if mean is None else f"{num(mean, 2)} / {num(p50, 2)} / {num(p99, 2)}"


def ledger_table(cells: list[CellRow], lang: str) -> Table:
    """One row per traced cell: joined requests, each phase's mean / p50 / p99, the client's mean TTFT they sum
    to, and the clock offset's error."""
    head = [t(lang, "col.config"), t(lang, "col.cell"), t(lang, "ph.col.joined"),
            *(t(lang, f"ph.{p}") for p in PHASES), t(lang, "ph.col.ttft"), t(lang, "ph.col.offset")]
    rows: list[list[str | Cell]] = []
    for c in cells:
        b = c.summary.phases
        if b is None:
            continue
        joined = f"{num(b.joined, 0)} / {num(b.requests, 0)}"
        rows.append([c.config, label_of(c), joined, *(_stat(b, p) for p in PHASES), num(b.client_ttft_mean_ms, 2),
                     "±" + num(b.clock_offset_error_ms, 2) + ("" if b.clock_consistent is not False else " !")])
    return Table(head, rows, role="phases", left=2)


def means_table(cells: list[CellRow], lang: str) -> Table:
    """The server's own means from its request-time histograms (no tracing needed)."""
    head = [t(lang, "col.config"), t(lang, "col.cell"), t(lang, "ph.col.counted"), *(t(lang, f"ph.mean.{m}") for m in MEANS)]
    rows: list[list[str | Cell]] = []
    for c in cells:
        m = c.summary.server_means
        if m is not None:
            rows.append([c.config, label_of(c), num(m.requests, 0), *(num(getattr(m, k), 2) for k in MEANS)])
    return Table(head, rows, role="server-means", left=2)


def _stack(c: CellRow, phases: tuple[PhaseName, ...], lang: str) -> Stack | None:
    b = c.summary.phases
    if b is None or not b.mean_ms:
        return None
    parts = [(b.stat(p) or 0.0, f"{c.config} {label_of(c)}: {t(lang, f'ph.{p}')} {num(b.stat(p), 2)} ms") for p in phases]
    return Stack(f"{c.config} {label_of(c)}", parts)


def figure(cells: list[CellRow], phases: tuple[PhaseName, ...], name: str, lang: str) -> Figure | None:
    stacks = [s for c in cells if (s := _stack(c, phases, lang)) is not None]
    colors = [PALETTE[PHASES.index(p) % len(PALETTE)] for p in phases]          # one colour per phase, in both
    svg = stacked_chart(t(lang, f"ph.plot.{name}"), t(lang, "ph.axis"), stacks, [t(lang, f"ph.{p}") for p in phases],
                        colors)
    return Figure(f"phases-{name}", t(lang, f"ph.plot.{name}"), svg) if svg else None


def _notes(cells: list[CellRow], lang: str) -> list[Block]:
    """What arrived besides the joined spans, and the requests whose delivery the check flags."""
    out: list[Block] = []
    for c in cells:
        b = c.summary.phases
        if b is None:
            continue
        if b.missing or b.unjoined_spans or b.dropped_payloads:
            out.append(Para(t(lang, "ph.note.unjoined", cell=f"{c.config} {label_of(c)}", missing=num(b.missing, 0),
                              unjoined=num(b.unjoined_spans, 0), other=num(b.other_spans, 0),
                              dropped=num(b.dropped_payloads, 0))))
        if b.delivery_flagged:
            out.append(Para(t(lang, "ph.note.flagged", cell=f"{c.config} {label_of(c)}", n=num(b.delivery_flagged, 0),
                              joined=num(b.joined, 0), worst=num(b.delivery_max_ms, 2))))
        if b.clock_consistent is False:
            out.append(Para(t(lang, "ph.note.clock", cell=f"{c.config} {label_of(c)}")))
    return out


def _load_pairs(run: RunData) -> list[tuple[CellRow, CellRow]]:
    """Per config and length pair with two or more traced loads (of one load dimension): its lowest and highest."""
    out = []
    for cfg in run.config_names():
        traced = [c for c in run.cells_of(cfg) if c.summary.phases is not None and c.summary.phases.joined
                  and state_of(c).ok]
        for pair in sorted({(pair_of(c), load_of(c).dimension) for c in traced}):
            loads = sorted((c for c in traced if (pair_of(c), load_of(c).dimension) == pair), key=lambda c: x_of(c))
            if len(loads) > 1:
                out.append((loads[0], loads[-1]))
    return out


def across_loads(run: RunData, lang: str) -> list[Block]:
    """Which phase grew from the lowest traced load to the highest, per config and length pair (as `compare` says
    it of two runs, from the stored per-request phases)."""
    read = run.reader or (lambda _id: [])
    out: list[Block] = []
    for a, b in _load_pairs(run):
        found = jp.changes(a, [r for c in ok_repeats(a) for r in read(c.id)],
                           [r for c in ok_repeats(b) for r in read(c.id)], u.MIN_EFFECT)
        top = jp.grew(found)
        said = (t(lang, "ph.grew", phase=t(lang, f"ph.{top.phase}"), delta=f"{top.delta:+,.2f}",
                  lo=f"{top.lo:+,.2f}", hi=f"{top.hi:+,.2f}") if top else t(lang, "ph.none_grew"))
        out += [Para(f"{t(lang, 'ph.cmp_pair', a=f'{a.config} {label_of(a)}', b=label_of(b))}: {said}"),
                change_table(found, label_of(a), label_of(b), lang)]
    return [Para(t(lang, "ph.loads_intro", floor=f"{100 * u.MIN_EFFECT:g}%")), *out] if out else []


def section(run: RunData, lang: str) -> list[Block]:
    """The whole section; empty for a run without a ledger or server means."""
    cells = cells_with(run)
    traced = [c for c in cells if c.summary.phases is not None]
    out: list[Block] = []
    if traced:
        out += [Para(t(lang, "ph.intro")), ledger_table(traced, lang), *_notes(traced, lang), *across_loads(run, lang)]
        out += [f for name, phases in (("ttft", TTFT_PHASES), ("last", LAST_PHASES))
                if (f := figure(traced, phases, name, lang)) is not None]
    if any(c.summary.server_means is not None for c in cells):
        out += [Para(t(lang, "ph.means_intro")), means_table(cells, lang)]
    return out



# ---- the console's lines (bench, sweep: one per cell, after the table) ----

def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.2f}"


def _arrived(b: PhaseLedger) -> tuple[tuple[float | None, str], ...]:
    """What the receiver got besides the joined spans, with the console's words."""
    return ((b.unjoined_spans, "unjoined request spans"), (b.other_spans, "spans that are no request's"),
            (b.dropped_payloads, "payloads dropped"))


def console_lines(key: str, s) -> list[str]:
    """Where the cell's time went (the ledger's means), or the server's /metrics means when it has no ledger."""
    b, m = s.phases, s.server_means
    if b is not None and b.joined:
        ttft = " + ".join(f"{t('en', f'ph.{p}').split(' (')[0]} {_ms(b.stat(p))}" for p in TTFT_PHASES)
        out = [f"{key}: where the time went (ms, means over {num(b.joined, 0)} of {num(b.requests, 0)} requests "
               f"joined to the server's spans, clock ±{_ms(b.clock_offset_error_ms)}): {ttft} = TTFT "
               f"{_ms(b.client_ttft_mean_ms)}; decode {_ms(b.stat('decode'))}, last token delivery "
               f"{_ms(b.stat('last_delivery'))}"]
        extra = [f"{n} {what}" for n, what in ((b.missing, "requests without a span"), (b.unjoined_spans, "unjoined spans"),
                                               (b.dropped_payloads, "payloads dropped"),
                                               (b.delivery_flagged, "deliveries beyond the TTFT tolerance")) if n]
        return out + ([f"{key}: {', '.join(extra)}"] if extra else [])
    out = []
    if b is not None and b.requests:
        came = ", ".join(f"{num(n, 0)} {what}" for n, what in _arrived(b) if n) or "no span"
        out = [f"{key}: none of {num(b.requests, 0)} requests joined a server span (the receiver got {came})"]
    if m is not None:
        out.append(f"{key}: server means (its /metrics histograms, {num(m.requests, 0)} requests): queue "
                   f"{_ms(m.queue_ms)}, prefill {_ms(m.prefill_ms)}, decode {_ms(m.decode_ms)}, TTFT {_ms(m.ttft_ms)}, "
                   f"e2e {_ms(m.e2e_ms)} ms")
    return out


# ---- compare: which phase moved ----

def _iv(iv) -> str:
    return f"{num(iv.value, 2)} [{num(iv.lo, 2)} – {num(iv.hi, 2)}]"


def _records(col: Column, cell: CellRow) -> list:
    read = col.run.reader or (lambda _id: [])
    return [r for c in ok_repeats(cell) for r in read(c.id)]


def change_table(found: list[jp.PhaseChange], a: str, b: str, lang: str) -> Table:
    head = [t(lang, "cmp.col.phase"), f"{a} (ms)", f"{b} (ms)", t(lang, "ph.col.delta"), t(lang, "ph.col.moved")]
    rows: list[list[str | Cell]] = [
        [t(lang, f"ph.{c.phase}"), _iv(c.a), _iv(c.b), f"{c.delta:+,.2f} [{c.lo:+,.2f}, {c.hi:+,.2f}]",
         t(lang, "ph.moved_up" if c.moved and c.delta > 0 else "ph.moved_down" if c.moved else "ph.not_moved")]
        for c in found]
    return Table(head, rows, role="phase-changes", left=1)


def compare_section(cols: list[Column], lang: str, min_effect: float) -> list[Block]:
    """Per pair of traced cells (the first column against each other one): each phase's mean, the change with its
    interval, and the phase that grew most."""
    out: list[Block] = []
    base = cols[0]
    for other in cols[1:]:
        for a, b in jp.pairs(base, other):
            found = jp.changes(a, _records(base, a), _records(other, b), min_effect)
            top = jp.grew(found)
            where = t(lang, "ph.cmp_pair", a=f"{base.name} {label_of(a)}", b=f"{other.name} {label_of(b)}")
            said = (t(lang, "ph.grew", phase=t(lang, f"ph.{top.phase}"), delta=f"{top.delta:+,.2f}",
                      lo=f"{top.lo:+,.2f}", hi=f"{top.hi:+,.2f}") if top else t(lang, "ph.none_grew"))
            out += [Para(f"{where}: {said}"), change_table(found, label_of(a), label_of(b), lang)]
    if out:
        out.append(Para(t(lang, "ph.cmp_note", floor=f"{100 * min_effect:g}%")))
    return out or [Para(t(lang, "cmp.phases_unpaired" if all(map(_traced_any, cols)) else "cmp.phases_none"))]


def _traced_any(col: Column) -> bool:
    return any(c.summary.phases is not None and c.summary.phases.joined for c in col.cells())


def any_traced(cols: list[Column]) -> bool:
    return any(c.summary.phases is not None for col in cols for c in col.cells())
