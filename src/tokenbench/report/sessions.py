"""The sessions section of a run report: per sessions cell, its shape and how its sessions went, its hit
rates (from the responses, and from the server's counters), a table by turn index, and one figure of
TTFT by turn with 95 % intervals for every sessions cell. Rendering only: the figures were computed when
the cell ran (metrics/summary.py) and stored in its summary."""

from __future__ import annotations

from tokenbench.judge.cells import label_of, session_shape_of, state_of
from tokenbench.judge.views import RunData
from tokenbench.metrics.summary_groups import SessionFigures
from tokenbench.report.document import Block, Cell, Figure, Heading, Para, Table, num, pct
from tokenbench.report.i18n import t
from tokenbench.report.marks import fig, footnotes
from tokenbench.report.svg import Series, line_chart
from tokenbench.store.rows import CellRow


def session_cells(run: RunData) -> list[CellRow]:
    """Every stored sessions cell, each repeat on its own (its figures by turn are its own)."""
    return [c for cfg in run.config_names() for c in run.all_cells_of(cfg) if c.summary.sessions is not None]


def _item(values: list | None, k: int):
    return values[k] if values is not None and k < len(values) else None


def _ttft(f: SessionFigures, k: int) -> str:
    mean, lo, hi = _item(f.turn_ttft_mean_ms, k), _item(f.turn_ttft_lo_ms, k), _item(f.turn_ttft_hi_ms, k)
    if mean is None:
        return "-"
    return f"{num(mean)} [{num(lo)} – {num(hi)}]" if lo is not None and hi is not None else num(mean)


def turn_table(c: CellRow, lang: str) -> Table:
    """One row per turn index: requests, prompt and cached tokens, hit rate (a trajectories cell's theoretical
    hit beside it, with the block it counts), TTFT (with its interval), TPOT."""
    f = c.summary.sessions or SessionFigures()
    theory = f.turn_theory_hit_rate is not None
    head = [t(lang, k) for k in ("col.turn", "col.turn_requests", "col.turn_prompt", "col.turn_cached",
                                  "col.turn_hit_rate")]
    head += [t(lang, "col.turn_theory", block=num(f.cache_block_size, 0))] if theory else []
    head += [t(lang, k) for k in ("col.turn_ttft", "col.turn_ttft_p50", "col.turn_tpot")]
    rows: list[list[str | Cell]] = [
        [str(k), num(n, 0), num(_item(f.turn_prompt_tokens_mean, k)), num(_item(f.turn_cached_tokens_mean, k)),
         pct(_item(f.turn_hit_rate, k)), *([pct(_item(f.turn_theory_hit_rate, k))] if theory else []),
         fig(c, _ttft(f, k), over=False), fig(c, num(_item(f.turn_ttft_p50_ms, k)), over=False),
         fig(c, num(_item(f.turn_tpot_mean_ms, k)), over=False)]
        for k, n in enumerate(f.turn_requests or [])]
    notes = [t(lang, "sess.theory", block=num(f.cache_block_size, 0), theory=pct(f.theory_hit_rate),
               achieved=pct(c.summary.cache_hit_rate))] if theory else []
    return Table(head, rows, role="turns", left=1, footnotes=footnotes([c], lang) + notes)


def facts(c: CellRow, lang: str) -> list[Block]:
    """The cell's shape, how its sessions went, what its histories were made of, and its hit rates."""
    f, s = c.summary.sessions or SessionFigures(), c.summary
    out: list[Block] = [
        Para(t(lang, "sess.shape", shape=f"{f.load_text()} x {session_shape_of(c)}", started=num(f.started, 0),
               completed=num(f.completed, 0), cut=num(f.cut_short, 0))),
        Para(t(lang, "sess.replies", ids=num(f.replies_returned_ids, 0), retok=num(f.replies_retokenized, 0),
               fixed=num(f.replies_fixed, 0)))]
    told = s.cache_reported_requests
    out.append(Para(t(lang, "sess.hits", usage=pct(s.cache_hit_rate), told=num(told, 0)) if told
                    else t(lang, "sess.hits_none")))
    cache = s.counters
    if cache is not None and cache.server_prefix_cache_hit_rate is not None:
        out.append(Para(t(lang, "sess.counters", rate=pct(cache.server_prefix_cache_hit_rate),
                          hits=num(cache.server_prefix_cache_hits, 0), queries=num(cache.server_prefix_cache_queries, 0))))
    return out


def ttft_by_turn(cells: list[CellRow], lang: str) -> Figure | None:
    """Mean TTFT by turn index, one line per sessions cell, its 95 % interval shaded."""
    series = []
    for c in cells:
        f = c.summary.sessions or SessionFigures()
        s = Series(f"{c.config} {label_of(c)}")
        for k, mean in enumerate(f.turn_ttft_mean_ms or []):
            lo, hi = _item(f.turn_ttft_lo_ms, k), _item(f.turn_ttft_hi_ms, k)
            if mean is None:
                continue
            tip = f"{c.config} {label_of(c)} turn {k}: TTFT {num(mean)} ms [{num(lo)} – {num(hi)}]"
            (s.points if state_of(c).ok else s.hollow).append((float(k), mean, tip))
            if lo is not None and hi is not None and state_of(c).ok:
                s.band.append((float(k), lo, hi))
        if s.points or s.hollow:
            series.append(s)
    svg = line_chart(t(lang, "plot.ttft_by_turn"), t(lang, "axis.turn"), t(lang, "axis.ttft_mean_ms"), series)
    return Figure("ttft-by-turn", t(lang, "plot.ttft_by_turn"), svg) if svg else None


def section(run: RunData, lang: str, sub) -> list[Block]:
    """The whole section (`sub` numbers the subheadings); empty for a run without sessions cells."""
    cells = session_cells(run)
    if not cells:
        return []
    out: list[Block] = [Para(t(lang, "sess.intro"))]
    for c in cells:
        heading: Heading = sub(t(lang, "h.sessions_cell", config=c.config, cell=label_of(c)))
        out += [heading, *facts(c, lang), turn_table(c, lang)]
    figure = ttft_by_turn(cells, lang)
    return out + ([figure] if figure else [])
