"""The report's figures, built from the report model (data selection here, drawing in svg.py)."""

from __future__ import annotations

from tokenbench.judge.cells import label_of, pair_of, state_of
from tokenbench.judge.views import RunData, Timeline
from tokenbench.metrics import request as rm
from tokenbench.metrics.cell_summary import Metric
from tokenbench.report import load_plots
from tokenbench.report.document import Figure, num
from tokenbench.report.i18n import t
from tokenbench.report.load_plots import Plot, Source
from tokenbench.report.svg import Bar, Series, line_chart, timeline_chart
from tokenbench.store.rows import CellRow, SampleRow

OUTPUT = Metric("output_throughput")


def _sources(run: RunData) -> list[Source]:
    """One line per (config, pair): named by both when the run has several configs."""
    many = len(run.config_names()) > 1
    out = []
    for cfg in run.config_names():
        for pair in run.pairs(cfg):
            name = f"{cfg} {pair[0]}/{pair[1]}" if many else f"{pair[0]}/{pair[1]}"
            out.append(Source(name, cfg, [c for c in run.cells_of(cfg) if pair_of(c) == pair]))
    return out


def any_hollow(run: RunData) -> bool:
    """Whether the load figures draw any point hollow (then a note says what hollow means)."""
    return any(not state_of(c).ok or (c.summary.figures and c.summary.figures.client_marks)
               for cfg in run.config_names() for c in run.cells_of(cfg))


LOAD_PLOTS = [Plot("throughput", title="throughput", ylabel="axis.out_tps", metric=OUTPUT),
              Plot("ttft", title="ttft_p50", ylabel="axis.ttft_p50_ms", metric=Metric("ttft", "p50"),
                   band=(Metric("ttft", "p90"), Metric("ttft", "p99"))),
              Plot("tpot", title="tpot_p50", ylabel="axis.tpot_p50_ms", metric=Metric("tpot", "p50"),
                   band=(Metric("tpot", "p90"), Metric("tpot", "p99")))]


def load_figures(run: RunData, lang: str) -> list[Figure]:
    """Output tok/s, p50 TTFT and p50 TPOT against each load axis the run has (load_plots.py), then TPOT
    against output tok/s."""
    sources = _sources(run)
    figs = load_plots.figures(sources, LOAD_PLOTS, lang)
    svg = line_chart(t(lang, "plot.latency_throughput"), t(lang, "axis.out_tps"), t(lang, "axis.tpot_ms"),
                     load_plots.figure_series(sources, Metric("tpot"), OUTPUT))
    if svg:
        figs.append(Figure("latency-throughput", t(lang, "plot.latency_throughput"), svg))
    return figs


def _bar(r, t0: int) -> Bar:
    s = 1e-9
    ttft, e2e = rm.ttft_ms(r), rm.e2el_ms(r)
    first = (r.token_times_ns[0] - t0) * s if r.token_times_ns else None
    state = f" {r.error_kind}" if r.error_kind else ""
    tip = (f"#{r.index}{state}: sent +{(r.sent_ns - t0) * s:.3f} s, TTFT {num(ttft)} ms, "
           f"E2E {num(e2e)} ms, {r.output_tokens} tokens")
    return Bar((r.intended_ns - t0) * s, (r.sent_ns - t0) * s, first, (r.end_ns - t0) * s, tip)


def timeline_figure(tl: Timeline, lang: str) -> Figure | None:
    if not tl.requests:
        return None
    t0 = min(r.intended_ns for r in tl.requests)
    label = f"{tl.cell.config} {label_of(tl.cell)}"
    svg = timeline_chart(t(lang, "plot.timeline", cell=label), t(lang, "axis.seconds"), t(lang, "axis.requests"),
                         [_bar(r, t0) for r in tl.requests],
                         [t(lang, "legend.client_wait"), t(lang, "legend.ttft"), t(lang, "legend.decode")])
    return Figure("timeline", t(lang, "plot.timeline", cell=label), svg) if svg else None


def monitor_figure(cell: CellRow, samples: list[SampleRow], lang: str) -> Figure | None:
    t0 = min(s.t_ns for s in samples)
    series = []
    for name in ("running", "waiting", "kv_usage"):
        scale = 100.0 if name == "kv_usage" else 1.0
        pts = [((s.t_ns - t0) / 1e9, s.value * scale, f"{name}={num(s.value * scale)}")
               for s in samples if s.name == name]
        if pts:
            series.append(Series(t(lang, f"series.{name}"), pts))
    label = f"{cell.config} {label_of(cell)}"
    svg = line_chart(t(lang, "plot.monitor", cell=label), t(lang, "axis.seconds"), t(lang, "axis.count"), series)
    return Figure("monitor", t(lang, "plot.monitor", cell=label), svg) if svg else None
